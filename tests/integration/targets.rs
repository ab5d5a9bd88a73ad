//! `trellis targets` (the generative retriever's training data) against independent
//! computations: a gold path's target ids are the tokenizer's encoding of the path as the
//! linearization renders it, and the allowed set at every step is the set of next tokens of
//! the candidate paths (every path the `all` retriever returns, each rendered and tokenized)
//! that agree with the gold path so far. The encoder input is the one `retrieve` decodes.

use crate::common::*;
use crate::gsr::sample_store;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokenizers::Tokenizer;
use trellis::graph::Hop;
use trellis::ids::Direction;
use trellis::linearize::{HopText, Linearization};
use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

const DIALOG: &[(&str, &str)] = &[
    ("chat", "Who wrote Coraline?"),
    ("path", r#"[["Coraline", "written_by", "Neil Gaiman"]]"#),
    ("chat", "Neil Gaiman did. What else did he write?"),
    ("path", r#"[["Neil Gaiman", "~written_by", "Coraline"]]"#),
    ("path", r#"[["Coraline", "written_by", "Neil Gaiman"], ["Neil Gaiman", "Influenced By", "Harlan Ellison"]]"#),
    ("path", r#"[["Coraline", "written_by", "Nobody We Know"]]"#),
    ("path", r#"[["Coraline", "has_genre", "Neil Gaiman"]]"#),
];

pub(crate) fn dialogs_csv(dir: &std::path::Path) -> std::path::PathBuf {
    let mut rows = Vec::new();
    for dialog in [DIALOG, &[("chat", "Hello there, how are you?"), ("path", r#"[["Coraline", "written_by", "Neil Gaiman"]]"#)][..]] {
        let actions: Vec<String> = dialog
            .iter()
            .map(|(kind, x)| match *kind {
                "chat" => serde_json::json!({"type": "chat", "sender": "user", "message": x}).to_string(),
                _ => format!(r#"{{"type": "action", "sender": "assistant", "metadata": {{"path": [1, {x}, "x"]}}}}"#),
            })
            .collect();
        rows.push(format!("\"[{}]\",5,5", actions.join(", ").replace('"', "\"\"")));
    }
    write(dir, "dialogs.csv", format!("Messages,User Rating,Assistant Rating\n{}\n", rows.join("\n")).as_bytes())
}

/// A path's decoder tokens, independently: rendered as text, encoded by the tokenizer (its
/// post-processor appends `</s>`, the end of sequence).
fn rendered_ids(store: &Store, tok: &Tokenizer, lin: &Linearization, hops: &[Hop]) -> Vec<u32> {
    let name = |e| store.entity_names(&[e]).unwrap()[0].clone().unwrap();
    let rel = |r| store.relation_names(&[r]).unwrap()[0].clone().unwrap();
    let texts: Vec<(String, String)> = hops.iter().map(|h| (rel(h.edge.relation), name(h.edge.other))).collect();
    let hop_texts: Vec<HopText<'_>> =
        hops.iter().zip(&texts).map(|(h, (r, to))| HopText { relation: r, reversed: h.edge.direction == Direction::In, to }).collect();
    let text = lin.render_path(&name(hops[0].from), &hop_texts).unwrap();
    tok.encode(text.as_str(), true).unwrap().get_ids().to_vec()
}

#[test]
fn targets_are_the_rendered_gold_paths_and_the_candidates_next_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = sample_store(dir.path());
    let model = fixture("gsr/tiny-split");
    let csv = dialogs_csv(dir.path());
    let out = dir.path().join("targets.jsonl");
    let summary = json_of(
        trellis()
            .args(["targets", "--json", "--threads", "2", "--store"])
            .arg(&store_dir)
            .arg("--model")
            .arg(&model)
            .arg("--input")
            .arg(&csv)
            .arg("--output")
            .arg(&out),
    );
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 6);
    assert_eq!(summary["turns"], 6);
    assert_eq!(summary["with_target"], 4);
    assert_eq!(summary["admitted"], 3, "{summary}");
    let skipped: Vec<&str> = rows.iter().map(|r| r["skipped"].as_str().unwrap_or("")).collect();
    assert_eq!(skipped, ["", "", "", "unknown_name", "not_a_fact", ""]);
    let admitted: Vec<bool> = rows.iter().map(|r| r["admitted"].as_bool().unwrap()).collect();
    assert_eq!(admitted, [true, true, true, false, false, false], "the last turn links no entity");

    let store = Arc::new(Store::open_read_only(&store_dir).unwrap());
    let tok = Tokenizer::from_file(model.join("tokenizer.json")).unwrap();
    let lin = Linearization::dialoggsr();
    let retriever = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::All)).unwrap();
    let dialogs = trellis::dataset::opendialkg::read(&csv).unwrap();
    let samples: Vec<_> = dialogs.iter().flat_map(|d| d.samples.iter().map(move |s| (d, s))).collect();
    for ((dialog, sample), row) in samples.iter().zip(&rows) {
        if !row["skipped"].is_null() {
            assert_eq!(row["target_ids"], serde_json::json!([]));
            continue;
        }
        let history = &dialog.messages[..sample.upto];
        let input = retriever.input(history).unwrap();
        // The gold path as hops, by hand from its triples.
        let hops: Vec<Hop> = sample.paths[0]
            .iter()
            .map(|(s, r, o)| {
                let (r, dir) = r.strip_prefix('~').map_or((r.as_str(), Direction::Out), |b| (b, Direction::In));
                let from = store.entity_by_key(s).unwrap().unwrap();
                let relation = store.relation_by_key(r).unwrap().unwrap();
                let other = store.entity_by_key(o).unwrap().unwrap();
                Hop { from, edge: trellis::Edge { direction: dir, relation, other } }
            })
            .collect();
        let target: Vec<u32> = serde_json::from_value(row["target_ids"].clone()).unwrap();
        assert_eq!(target, rendered_ids(&store, &tok, &lin, &hops), "{row}");
        // Every candidate path's tokens (the `all` retriever returns each path of the capped
        // candidate subgraph); the allowed set at step j is the next tokens of those that
        // agree with the gold path's first j tokens.
        let paths: Vec<Vec<u32>> = retriever.rank(&input).unwrap().iter().map(|p| rendered_ids(&store, &tok, &lin, &p.hops)).collect();
        let allowed: Vec<Vec<u32>> = serde_json::from_value(row["allowed"].clone()).unwrap();
        let mut steps = 0;
        for j in 0..target.len() {
            let want: BTreeSet<u32> = paths.iter().filter(|p| p.len() > j && p[..j] == target[..j]).map(|p| p[j]).collect();
            if !want.contains(&target[j]) {
                break;
            }
            assert_eq!(allowed[j], want.into_iter().collect::<Vec<_>>(), "step {j} of {row}");
            steps += 1;
        }
        assert_eq!(allowed.len(), steps, "allowed sets stop where the gold path leaves the candidates: {row}");
        assert_eq!(row["admitted"].as_bool().unwrap(), steps == target.len() && paths.contains(&target));
    }
    // The encoder input is the one the retriever decodes (`retrieve --explain` reports it).
    let req = write(
        dir.path(),
        "req.jsonl",
        format!("{}\n", serde_json::json!({"history": DIALOG[..3].iter().filter(|m| m.0 == "chat").map(|m| m.1).collect::<Vec<_>>()})).as_bytes(),
    );
    let answers = dir.path().join("answers.jsonl");
    stdout_of(
        trellis()
            .args(["retrieve", "--retriever", "gsr", "--explain", "--model"])
            .arg(&model)
            .arg("--store")
            .arg(&store_dir)
            .arg("--input")
            .arg(&req)
            .arg("--output")
            .arg(&answers),
    );
    let answer: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&answers).unwrap().trim()).unwrap();
    assert_eq!(answer["input_ids"], rows[1]["input_ids"]);
}
