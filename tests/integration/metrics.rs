//! Response metrics against the Python references (tools/reference/metrics.py: sacrebleu,
//! nltk, rouge-score, and plain Python for F1, KF1, distinct-n and the grounding figures, the
//! latter's entity matching written from the delexicalizer's rule, not from its code): every
//! value to 1e-12, on 1,200 OpenDialKG dev pairs and on hand-written edge cases and grounding
//! cases, corpus-wide and pair by pair.

use crate::common::fixture;
use serde_json::Value;
use std::collections::BTreeMap;
use trellis::eval::responses::{score, ResponsePair};

const TOLERANCE: f64 = 1e-12;

fn reference() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("metrics/reference.json")).unwrap()).unwrap()
}

fn pairs_of(v: &Value) -> Vec<ResponsePair> {
    serde_json::from_value(v.clone()).unwrap()
}

/// Walks the reference's scores and Rust's side by side: numbers to TOLERANCE (recording the
/// largest difference per metric), everything else equal.
fn compare(path: &str, expected: &Value, got: &Value, diffs: &mut BTreeMap<String, f64>, wrong: &mut Vec<String>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let mut ek: Vec<_> = e.keys().collect();
            let mut gk: Vec<_> = g.keys().collect();
            ek.sort();
            gk.sort();
            if ek != gk {
                wrong.push(format!("{path}: keys {ek:?} vs {gk:?}"));
            }
            for (k, ev) in e {
                if let Some(gv) = g.get(k) {
                    compare(&format!("{path}.{k}"), ev, gv, diffs, wrong);
                }
            }
        }
        (Value::Number(e), Value::Number(g)) => {
            let (e, g) = (e.as_f64().unwrap(), g.as_f64().unwrap());
            let d = (e - g).abs();
            let key = path.split_once('.').map_or(path, |(_, rest)| rest).to_string();
            let max = diffs.entry(key).or_insert(0.0);
            *max = max.max(d);
            if d > TOLERANCE || !g.is_finite() {
                wrong.push(format!("{path}: Python {e:e}, Rust {g:e}"));
            }
        }
        (e, g) if e == g => {}
        (e, g) => wrong.push(format!("{path}: Python {e}, Rust {g}")),
    }
}

fn check(name: &str, pairs: &[ResponsePair], expected: &Value, diffs: &mut BTreeMap<String, f64>, wrong: &mut Vec<String>) {
    let got = serde_json::to_value(score(pairs).unwrap()).unwrap();
    compare(name, expected, &got, diffs, wrong);
}

fn report(diffs: &BTreeMap<String, f64>, wrong: &[String]) {
    for (k, d) in diffs {
        eprintln!("max |Rust - Python| {k:28} {d:.3e}");
    }
    assert!(wrong.is_empty(), "{} values differ from the Python reference:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn opendialkg_pairs_match_the_python_references() {
    let reference = reference();
    let text = std::fs::read_to_string(fixture("metrics/pairs.jsonl")).unwrap();
    let pairs: Vec<ResponsePair> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(pairs.len() >= 1000, "{} pairs", pairs.len());
    let expected = &reference["opendialkg"]["scores"];
    assert_eq!(expected["pairs"], pairs.len());
    let (mut diffs, mut wrong) = (BTreeMap::new(), Vec::new());
    check("opendialkg", &pairs, expected, &mut diffs, &mut wrong);
    report(&diffs, &wrong);
    // The references were made with the pinned libraries of tools/requirements/metrics.txt.
    let versions = &reference["versions"];
    for lib in ["sacrebleu", "rouge-score", "nltk"] {
        assert!(versions[lib].is_string(), "{lib} version recorded");
    }
    // sacrebleu's own scale is 0..100.
    let raw = reference["opendialkg"]["sacrebleu_raw"]["4"].as_f64().unwrap();
    let ours = score(&pairs).unwrap().bleu_sacrebleu.bleu4 * 100.0;
    assert!((raw - ours).abs() < TOLERANCE, "{raw} vs {ours}");
}

#[test]
fn edge_cases_match_the_python_references_as_a_corpus_and_one_by_one() {
    corpus_and_pairs_match("edge");
}

/// Hand-written pairs with entity names: stop-word titles ("It", "Up"), possessives, names
/// inside longer words, overlapping names, names too short to match, no knowledge.
#[test]
fn grounding_cases_match_the_python_references_as_a_corpus_and_one_by_one() {
    corpus_and_pairs_match("grounding");
    // The figures are computed here, not left null by both sides.
    let g = &reference()["grounding"]["scores"]["grounding"];
    assert!(g["pairs"].as_u64().unwrap() >= 10 && g["entity_recall"].is_f64() && g["mention_rate"].is_f64(), "{g}");
}

fn corpus_and_pairs_match(corpus: &str) {
    let reference = reference();
    let edge = &reference[corpus];
    let pairs = pairs_of(&edge["pairs"]);
    let (mut diffs, mut wrong) = (BTreeMap::new(), Vec::new());
    check(corpus, &pairs, &edge["scores"], &mut diffs, &mut wrong);
    let per_pair = edge["per_pair"].as_array().unwrap();
    assert_eq!(per_pair.len(), pairs.len());
    for (i, (p, expected)) in pairs.iter().zip(per_pair).enumerate() {
        check(&format!("{corpus}[{i}]"), std::slice::from_ref(p), expected, &mut diffs, &mut wrong);
    }
    report(&diffs, &wrong);
}

/// `trellis eval responses` on the fixture split into a predictions file (ids in reverse order,
/// half of them with "reply", a third with the entities) and a gold file (with the knowledge and
/// the entities): the same numbers; a bad line is exit 65 naming the file and line.
#[test]
fn cli_eval_responses_matches_the_library_and_names_bad_lines() {
    use crate::common::{trellis, write};
    let reference = reference();
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("metrics/pairs.jsonl")).unwrap();
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (mut pred, mut gold) = (String::new(), String::new());
    for (i, r) in rows.iter().rev().enumerate() {
        let key = if i % 2 == 0 { "response" } else { "reply" };
        let mut line = serde_json::json!({"id": r["id"], key: r["prediction"]});
        if i % 3 == 0 {
            line["entities"] = r["entities"].clone();
        }
        pred.push_str(&line.to_string());
        pred.push('\n');
    }
    for r in &rows {
        gold.push_str(&serde_json::json!({"id": r["id"], "response": r["reference"], "knowledge": r["knowledge"], "entities": r["entities"]}).to_string());
        gold.push('\n');
    }
    let pred_file = write(dir.path(), "pred.jsonl", pred.as_bytes());
    let gold_file = write(dir.path(), "gold.jsonl", gold.as_bytes());
    let out = trellis().args(["eval", "responses", "--json", "--pred"]).arg(&pred_file).arg("--gold").arg(&gold_file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (mut diffs, mut wrong) = (BTreeMap::new(), Vec::new());
    compare("cli", &reference["opendialkg"]["scores"], &got, &mut diffs, &mut wrong);
    report(&diffs, &wrong);

    let bad = write(dir.path(), "bad.jsonl", format!("{}{{\"id\": \"x\", \"response\": 3}}\n", &pred).as_bytes());
    let out = trellis().args(["eval", "responses", "--pred"]).arg(&bad).arg("--gold").arg(&gold_file).output().unwrap();
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("bad.jsonl:{}:", rows.len() + 1)), "{stderr}");
    let bad = write(dir.path(), "bad-entities.jsonl", format!("{{\"id\": \"x\", \"response\": \"r\", \"entities\": [\"a\", 1]}}\n{gold}").as_bytes());
    let out = trellis().args(["eval", "responses", "--pred"]).arg(&pred_file).arg("--gold").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad-entities.jsonl:1:") && stderr.contains("\"entities\" is not a list of strings"), "{stderr}");

    // The human table shows every new figure.
    let out = trellis().args(["eval", "responses", "--pred"]).arg(&pred_file).arg("--gold").arg(&gold_file).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let g = &reference["opendialkg"]["scores"];
    for want in [
        format!("DialogGSR's (nltk, method1)      1 {:.4}", g["bleu_dialoggsr"]["1"].as_f64().unwrap()),
        format!("distinct replies {} ({:.4} of the pairs)", g["distinct_replies"], g["distinct_replies_share"].as_f64().unwrap()),
        format!("entity recall {:.4}", g["grounding"]["entity_recall"].as_f64().unwrap()),
    ] {
        assert!(table.contains(&want), "{want:?} not in\n{table}");
    }
}
