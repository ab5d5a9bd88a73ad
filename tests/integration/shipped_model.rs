//! The models shipped in `models/` (trained by `tools/train/train.sh`): the retriever
//! (`gsr-opendialkg`) and the generator (`generator-opendialkg`) load, `doctor` finds nothing
//! wrong, on the bundled sample the retriever writes only real paths of the store (checked
//! against the sample's own lines), and the chain ends with a reply grounded in such paths.

use crate::common::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/gsr-opendialkg")
}

fn shipped_generator() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/generator-opendialkg")
}

#[test]
fn the_shipped_models_pass_doctor() {
    for model in [shipped(), shipped_generator()] {
        let out = trellis().args(["doctor", "--json", "--model"]).arg(&model).output().unwrap();
        assert!(out.status.success(), "{}: {}", model.display(), String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["problems"], serde_json::json!([]), "{v}");
        assert_eq!(v["ok"], true);
    }
}

#[test]
fn the_shipped_models_reply_on_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(trellis().args(["index-tokens", "--linearization", "trellis", "--store"]).arg(&store).arg("--tokenizer").arg(shipped().join("tokenizer.json")));
    let out = stdout_of(
        trellis()
            .args(["respond", "--json", "--retriever", "gsr", "--store"])
            .arg(&store)
            .arg("--model")
            .arg(shipped())
            .arg("--generator")
            .arg(shipped_generator())
            .args(["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reply = v["response"].as_str().unwrap();
    assert!(reply.split_whitespace().count() >= 2, "a reply of words: {v}");
    let facts = sample_facts();
    let paths = v["paths"].as_array().unwrap();
    assert!(!paths.is_empty(), "{v}");
    for p in paths {
        for t in p["triples"].as_array().unwrap() {
            let fact = (t["head"].as_str().unwrap().to_string(), t["relation"].as_str().unwrap().to_string(), t["tail"].as_str().unwrap().to_string());
            assert!(facts.contains(&fact), "not a fact of the sample: {t}");
        }
    }
}

/// The sample's facts in stored orientation (`~r(a, b)` is `r(b, a)`), read independently.
fn sample_facts() -> HashSet<(String, String, String)> {
    let text = std::fs::read_to_string(fixture("opendialkg-sample.tsv")).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut c = l.split('\t');
            let (s, r, o) = (c.next()?, c.next()?, c.next()?);
            Some(match r.strip_prefix('~') {
                Some(base) => (o.to_string(), base.to_string(), s.to_string()),
                None => (s.to_string(), r.to_string(), o.to_string()),
            })
        })
        .collect()
}

#[test]
fn the_shipped_model_retrieves_real_paths_on_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(trellis().args(["index-tokens", "--linearization", "trellis", "--store"]).arg(&store).arg("--tokenizer").arg(shipped().join("tokenizer.json")));
    let dialogs = [
        vec!["Do you know anything about Jordan Spieth?"],
        vec!["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"],
        vec!["Who wrote Coraline?", "Neil Gaiman did. Have you read it?", "Yes! What else did he write?"],
        vec!["I want to watch something with Will Smith in it."],
    ];
    let requests: String = dialogs.iter().enumerate().map(|(i, h)| serde_json::json!({"id": i, "history": h}).to_string() + "\n").collect();
    let input = write(dir.path(), "requests.jsonl", requests.as_bytes());
    let output = dir.path().join("answers.jsonl");
    stdout_of(
        trellis()
            .args(["retrieve", "--retriever", "gsr", "--top", "5", "--store"])
            .arg(&store)
            .arg("--model")
            .arg(shipped())
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output),
    );
    let facts = sample_facts();
    let answers: Vec<serde_json::Value> = std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), dialogs.len());
    let mut paths = 0;
    for a in &answers {
        assert!(!a["mentioned"].as_array().unwrap().is_empty(), "{a}");
        let found = a["paths"].as_array().unwrap();
        assert!(!found.is_empty(), "a dialog with linked entities gets paths: {a}");
        for p in found {
            let mut at: Option<String> = None;
            for t in p["triples"].as_array().unwrap() {
                let (h, r, o) = (t["head"].as_str().unwrap(), t["relation"].as_str().unwrap(), t["tail"].as_str().unwrap());
                assert!(facts.contains(&(h.to_string(), r.to_string(), o.to_string())), "not a fact of the sample: {t}");
                let reverse = t["reverse"].as_bool().unwrap();
                let (from, to) = if reverse { (o, h) } else { (h, o) };
                if let Some(prev) = &at {
                    assert_eq!(prev, from, "hops of a path connect: {p}");
                }
                at = Some(to.to_string());
            }
            paths += 1;
        }
    }
    assert!(paths >= dialogs.len());
}
