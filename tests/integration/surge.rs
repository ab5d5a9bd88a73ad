//! SURGE's subgraph retriever (`--retriever surge`, task `subgraph`): the runtime against
//! PyTorch on a tiny random model of the class tools/train/surge.py trains
//! (tests/fixtures/encoders/subgraph, tools/reference/subgraph_fixture.py); the retriever's
//! path scores against the same model run here on a subgraph built apart from the `all`
//! retriever's candidates; `trellis targets` of a subgraph model giving what the retriever
//! runs; errors and doctor.

use crate::common::*;
use crate::encoders::{history_of, path_text, query, retrieve, sample};
use std::collections::HashMap;
use std::path::Path;
use trellis::link::Message;
use trellis::model::encoder::subgraph::{subgraph_ids, SubgraphIds, SubgraphScorer, SubgraphText};
use trellis::model::encoder::{EncoderDir, EncoderError, EncoderTask};
use trellis::model::RuntimeOptions;
use trellis::retrieve::surge::SurgeOptions;
use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

fn model() -> std::path::PathBuf {
    fixture("encoders/subgraph")
}

fn goldens() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(model().join("goldens.json")).unwrap()).unwrap()
}

fn u32s(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn strs(v: &serde_json::Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect()
}

#[test]
fn subgraph_model_matches_pytorch() {
    check_against_pytorch(&model());
}

/// The fixture with its message passing rewritten from dense incidence products to gathers
/// and scatter-adds (`tools/train/surge_sparse.py`, as the shipped model is): the same
/// PyTorch goldens.
#[test]
fn sparse_subgraph_model_matches_pytorch() {
    let sparse = fixture("encoders/subgraph-sparse");
    let scatters = |dir: &Path| {
        let graph = std::fs::read(dir.join("model.onnx")).unwrap();
        graph.windows(9).any(|w| w == b"ScatterND")
    };
    assert!(scatters(&sparse) && !scatters(&model()), "the sparse fixture is the rewritten graph, the other the dense export");
    check_against_pytorch(&sparse);
}

/// The fixture's model exported by today's tools/train/surge.py (scatter-adds since
/// 2026-11-29, as ScatterElements): the same PyTorch goldens (its own PyTorch run gave
/// scores within 1.7e-6 of them).
#[test]
fn scatter_export_of_the_subgraph_model_matches_pytorch() {
    let scatter = fixture("encoders/subgraph-scatter");
    let graph = std::fs::read(scatter.join("model.onnx")).unwrap();
    assert!(graph.windows(15).any(|w| w == b"ScatterElements"), "the fixture is today's export");
    check_against_pytorch(&scatter);
}

fn check_against_pytorch(dir: &Path) {
    let g = goldens();
    let m = SubgraphScorer::open(dir, &RuntimeOptions::default()).unwrap();
    assert_eq!(m.dir().task(), EncoderTask::Subgraph);
    assert_eq!((m.dir().max_length(), m.dir().name_length(), m.dir().turns()), (24, 4, 2));
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let text = SubgraphText {
            query: c["query"].as_str().unwrap(),
            entities: strs(&c["entities"]),
            mentioned: c["mentioned"].as_array().unwrap().iter().map(|x| x.as_bool().unwrap()).collect(),
            relations: strs(&c["relations"]),
            facts: c["facts"].as_array().unwrap().iter().map(|f| u32s(f).try_into().unwrap()).collect(),
        };
        let ids = subgraph_ids(m.dir(), &text).unwrap();
        assert_eq!(ids.input_ids, u32s(&c["input_ids"]), "case {k}: query ids (cut at 24, </s> last)");
        let rows = |v: &serde_json::Value| v.as_array().unwrap().iter().map(u32s).collect::<Vec<_>>();
        assert_eq!(ids.entity_ids, rows(&c["entity_ids"]), "case {k}: entity name ids (no specials, cut at 4)");
        assert_eq!(ids.relation_ids, rows(&c["relation_ids"]), "case {k}: relation name ids");
        let want: Vec<f64> = c["fact_scores"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let got = m.score(&text).unwrap();
        assert_eq!(got.len(), want.len(), "case {k}: one score per fact");
        // Again, the names' ids now from the scorer's cache: the same bits, and those of
        // the ids tokenized afresh.
        assert_eq!(m.score(&text).unwrap(), got, "case {k}: scored again");
        assert_eq!(m.score_ids(&ids).unwrap(), got, "case {k}: from subgraph_ids");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((f64::from(*a) - b).abs() < 1e-5, "case {k} fact {i}: {a} vs PyTorch {b}");
        }
        // Twice the same fact: the same score (the duplicate of case 2).
        if k == 2 {
            assert_eq!(got[0], got[5]);
        }
    }
    // No facts: nothing run, nothing returned. A fact outside the lists: an error, not a panic.
    let empty = SubgraphText { query: "hello", ..Default::default() };
    assert!(m.score(&empty).unwrap().is_empty());
    let bad = SubgraphText { query: "x", entities: vec!["a"], mentioned: vec![false], relations: vec!["r"], facts: vec![[0, 0, 1]] };
    assert!(matches!(m.score(&bad), Err(EncoderError::Input { .. })), "{:?}", m.score(&bad));
    let short = SubgraphText { mentioned: vec![], ..bad };
    assert!(matches!(m.score(&short), Err(EncoderError::Input { .. })));
    // Ids from elsewhere are checked too: a fact index past the entities, a flag missing,
    // an id past the vocabulary.
    let good = subgraph_ids(
        m.dir(),
        &SubgraphText { query: "q", entities: vec!["a", "b"], mentioned: vec![true, false], relations: vec!["r"], facts: vec![[0, 0, 1]] },
    )
    .unwrap();
    assert_eq!(m.score_ids(&good).unwrap().len(), 1);
    let far = SubgraphIds { fact_tail: vec![2], ..good.clone() };
    assert!(matches!(m.score_ids(&far), Err(EncoderError::Input { .. })));
    let flags = SubgraphIds { entity_mentioned: vec![1], ..good.clone() };
    assert!(matches!(m.score_ids(&flags), Err(EncoderError::Input { .. })));
    let mut vocab = good.clone();
    vocab.entity_ids[0] = vec![100_000];
    assert!(matches!(m.score_ids(&vocab), Err(EncoderError::TokenOutOfRange { .. })));
}

/// `--retriever surge`: every candidate path (`--retriever all`'s), scored by the mean of
/// its facts' scores, the facts scored by the model on the candidate subgraph built here
/// from the `all` output's triples (names, the mentioned entities the output lists).
#[test]
fn surge_scores_each_candidate_by_its_facts_mean() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    let m = model();
    let surge = retrieve(&store, &input, &tmp.path().join("s.jsonl"), &["--retriever", "surge", "--surge-model", m.to_str().unwrap(), "--top", "1000"]);
    let all = retrieve(&store, &input, &tmp.path().join("a.jsonl"), &["--retriever", "all", "--top", "1000"]);
    let scorer = SubgraphScorer::open(&m, &RuntimeOptions::default()).unwrap();
    let mut scored = 0;
    for (s, a) in surge.iter().zip(&all) {
        let history = history_of(&input, s["id"].as_str().unwrap());
        let h: Vec<&str> = history.iter().map(String::as_str).collect();
        let q = query(&h, 2);
        // The subgraph: every distinct fact of the candidates, entities and relations by name.
        let rel = |t: &serde_json::Value| -> String { t["relation"].as_str().unwrap().to_lowercase().replace(['_', '-'], " ") };
        let (mut entities, mut relations, mut facts): (Vec<String>, Vec<String>, Vec<[u32; 3]>) = Default::default();
        let mut fact_of: HashMap<(String, String, String), u32> = HashMap::new();
        let index = |list: &mut Vec<String>, name: String| -> u32 {
            match list.iter().position(|x| *x == name) {
                Some(i) => i as u32,
                None => {
                    list.push(name);
                    list.len() as u32 - 1
                }
            }
        };
        let mut paths: Vec<(String, Vec<u32>)> = Vec::new();
        for p in a["paths"].as_array().unwrap() {
            let mut ids = Vec::new();
            for t in p["triples"].as_array().unwrap() {
                let key = (t["head"].as_str().unwrap().to_owned(), rel(t), t["tail"].as_str().unwrap().to_owned());
                let id = match fact_of.get(&key) {
                    Some(&i) => i,
                    None => {
                        let f = [index(&mut entities, key.0.clone()), index(&mut relations, key.1.clone()), index(&mut entities, key.2.clone())];
                        facts.push(f);
                        fact_of.insert(key, facts.len() as u32 - 1);
                        facts.len() as u32 - 1
                    }
                };
                ids.push(id);
            }
            paths.push((path_text(p), ids));
        }
        let mentioned: Vec<&str> = s["mentioned"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
        let text = SubgraphText {
            query: &q,
            entities: entities.iter().map(String::as_str).collect(),
            mentioned: entities.iter().map(|e| mentioned.contains(&e.as_str())).collect(),
            relations: relations.iter().map(String::as_str).collect(),
            facts,
        };
        let fact_scores = scorer.score(&text).unwrap();
        let want: HashMap<String, f64> =
            paths.iter().map(|(t, ids)| (t.clone(), ids.iter().map(|&i| f64::from(fact_scores[i as usize])).sum::<f64>() / ids.len() as f64)).collect();
        let got: Vec<(String, f64)> = s["paths"].as_array().unwrap().iter().map(|p| (path_text(p), p["score"].as_f64().unwrap())).collect();
        assert_eq!(got.len(), paths.len(), "every candidate, once");
        for w in got.windows(2) {
            assert!(w[0].1 >= w[1].1, "best first: {w:?}");
        }
        for (t, score) in &got {
            let w = want[t];
            assert!((score - w).abs() < 1e-5, "{t}: {score} vs {w}");
        }
        scored += got.len();
    }
    assert!(scored > 20, "the requests must reach candidates ({scored})");
    // One subgraph per run: the requests in the other order, one thread, answer the same
    // bytes.
    let text = std::fs::read_to_string(&input).unwrap();
    let lines: Vec<&str> = text.lines().rev().collect();
    let reversed = write(tmp.path(), "rev.jsonl", (lines.join("\n") + "\n").as_bytes());
    let again = retrieve(
        &store,
        &reversed,
        &tmp.path().join("r.jsonl"),
        &["--retriever", "surge", "--surge-model", m.to_str().unwrap(), "--top", "1000", "--threads", "1"],
    );
    for a in &again {
        let first = surge.iter().find(|s| s["id"] == a["id"]).unwrap();
        assert_eq!(a["paths"], first["paths"], "request {}", a["id"]);
    }
}

/// `trellis targets` with a subgraph model's spec: per turn whose gold path is a candidate,
/// the model's inputs, the candidates as fact indices and the gold one; the model run on
/// those ids gives the scores `--retriever surge` gives (the same paths, the same numbers).
#[test]
fn subgraph_targets_are_what_the_retriever_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let csv = crate::targets::dialogs_csv(tmp.path());
    // A spec directory: the model's files without its graph.
    let spec = tmp.path().join("spec");
    std::fs::create_dir(&spec).unwrap();
    for f in ["tokenizer.json", "config.json", "trellis.json"] {
        std::fs::copy(model().join(f), spec.join(f)).unwrap();
    }
    let out = tmp.path().join("t.jsonl");
    let summary =
        json_of(trellis().args(["targets", "--json", "--store"]).arg(&store).arg("--model").arg(&spec).arg("--input").arg(&csv).arg("--output").arg(&out));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(summary["turns"], lines.len());
    let skipped: Vec<&str> = lines.iter().filter_map(|t| t["skipped"].as_str()).collect();
    assert!(skipped.contains(&"unknown_name") && skipped.contains(&"not_a_fact"), "{skipped:?}");
    let with: Vec<&serde_json::Value> = lines.iter().filter(|t| t.get("skipped").is_none()).collect();
    assert!(with.len() >= 2, "{summary}");
    assert_eq!(summary["with_target"], with.len());

    let store = std::sync::Arc::new(Store::open_read_only(&store).unwrap());
    let retriever = Retriever::new(store, RetrieverConfig::new(RetrieverKind::Surge(SurgeOptions::new(model())))).unwrap();
    let scorer = SubgraphScorer::open(&model(), &RuntimeOptions::default()).unwrap();
    let dialogs = trellis::dataset::opendialkg::read(&csv).unwrap();
    for t in with {
        let dialog = &dialogs[t["dialog"].as_u64().unwrap() as usize];
        let history: Vec<Message> = dialog.messages[..t["upto"].as_u64().unwrap() as usize].to_vec();
        let rows = |k: &str| t[k].as_array().unwrap().iter().map(u32s).collect::<Vec<_>>();
        let ids = SubgraphIds {
            input_ids: u32s(&t["input_ids"]),
            entity_ids: rows("entity_ids"),
            entity_mentioned: t["entity_mentioned"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u8).collect(),
            relation_ids: rows("relation_ids"),
            fact_head: u32s(&t["fact_head"]),
            fact_relation: u32s(&t["fact_relation"]),
            fact_tail: u32s(&t["fact_tail"]),
        };
        let facts = scorer.score_ids(&ids).unwrap();
        let paths = rows("paths");
        let mut want: Vec<f64> = paths.iter().map(|p| p.iter().map(|&f| f64::from(facts[f as usize])).sum::<f64>() / p.len() as f64).collect();
        let gold = t["gold"].as_u64().unwrap() as usize;
        assert!(gold < paths.len());
        let mut got: Vec<f64> = retriever.retrieve(&history).unwrap().iter().map(|p| p.score).collect();
        want.sort_by(|a, b| b.total_cmp(a));
        got.sort_by(|a, b| b.total_cmp(a));
        assert_eq!(got, want, "dialog {} upto {}", t["dialog"], t["upto"]);
    }
}

#[test]
fn surge_errors_and_doctor() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    let run = |args: &[&str]| {
        let mut cmd = trellis();
        cmd.arg("retrieve").arg("--store").arg(&store).arg("--input").arg(&input).arg("--output").arg(tmp.path().join("o.jsonl")).args(args);
        cmd.output().unwrap()
    };
    let out = run(&["--retriever", "surge"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the surge retriever needs `surge_model`"));
    // A bi-encoder is not a subgraph model, nor the other way round.
    let out = run(&["--retriever", "surge", "--surge-model", fixture("encoders/t5-mean").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("trellis.json") && err.contains("subgraph"), "{err}");
    let out = run(&["--retriever", "dense", "--dense-model", model().to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("\"dense\""));
    // A subgraph trellis.json over a bi-encoder's graph: the missing inputs, named.
    let dir = tmp.path().join("mixed");
    std::fs::create_dir(&dir).unwrap();
    for f in ["model.onnx", "config.json", "tokenizer.json"] {
        std::fs::copy(fixture(&format!("encoders/t5-mean/{f}")), dir.join(f)).unwrap();
    }
    std::fs::copy(model().join("trellis.json"), dir.join("trellis.json")).unwrap();
    let e = SubgraphScorer::open(&dir, &RuntimeOptions::default()).unwrap_err().to_string();
    assert!(e.contains("entity_ids") && e.contains("fact_scores") && e.contains("model.onnx"), "{e}");
    // Settings out of range name the field.
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "subgraph", "subgraph": {"name_length": 0}}"#).unwrap();
    let e = EncoderDir::open(&dir, None).unwrap_err().to_string();
    assert!(e.contains("subgraph.name_length"), "{e}");
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "subgraph", "dense": {"pooling": "mean"}}"#).unwrap();
    let e = EncoderDir::open(&dir, None).unwrap_err().to_string();
    assert!(e.contains("dense") && e.contains("subgraph"), "{e}");
    // A subgraph model's targets take none of a generator's or a generative retriever's options.
    let csv = crate::targets::dialogs_csv(tmp.path());
    for extra in [&["--without-knowledge"][..], &["--scope", "uncapped"]] {
        let out = trellis()
            .args(["targets", "--store"])
            .arg(&store)
            .arg("--model")
            .arg(model())
            .arg("--input")
            .arg(&csv)
            .arg("--output")
            .arg(tmp.path().join("t.jsonl"))
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("subgraph model"), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // doctor runs a trial subgraph through the graph.
    let report = json_of(trellis().args(["doctor", "--json", "--model"]).arg(model()));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["encoder"]["task"], "subgraph");
    let bad = Path::new(&dir);
    std::fs::copy(model().join("trellis.json"), bad.join("trellis.json")).unwrap();
    let out = trellis().args(["doctor", "--model"]).arg(bad).output().unwrap();
    assert_eq!(out.status.code(), Some(65), "{}", String::from_utf8_lossy(&out.stdout));
}
