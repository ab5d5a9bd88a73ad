//! The paper's own setting: a documents input for the text index (`trellis index-text
//! --documents`) and Wizard of Wikipedia dialogs for `trellis eval queries --dataset wow`,
//! on a fixture written for the test (tests/fixtures/wow: a small graph, article
//! summaries by title, two dialogs in ParlAI's JSON layout).

use crate::common::*;
use std::path::{Path, PathBuf};
use trellis::dataset::wow;

fn store(dir: &Path) -> PathBuf {
    let store = dir.join("kg");
    ingest(&store, &[], &[&fixture("wow/kg.tsv")]);
    store
}

fn search(store: &Path, text: &str) -> Vec<String> {
    let v = json_of(trellis().arg("search").arg("--store").arg(store).arg(text).arg("--exact").arg("--json"));
    v["hits"].as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap().to_owned()).collect()
}

fn index_with_documents(store: &Path, extra: &[&str]) -> std::process::Output {
    trellis().arg("index-text").arg("--store").arg(store).arg("--documents").arg(fixture("wow/documents.jsonl")).args(extra).arg("--json").output().unwrap()
}

fn texts(store: &Path) -> u64 {
    match trellis::text::status(&trellis::Store::open_read_only(store).unwrap()).unwrap() {
        trellis::text::TextIndexStatus::Current { record } => record.texts,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_wizard_of_wikipedia_reader_keeps_wizard_turns_with_a_checked_passage() {
    let dialogs = wow::read(&fixture("wow/dialogs.json")).unwrap();
    assert_eq!(dialogs.len(), 2);
    assert_eq!(dialogs[0].messages.len(), 5);
    assert_eq!(dialogs[0].messages[1].speaker, "apprentice");
    assert_eq!(dialogs[0].messages[2].speaker, "wizard");
    // The wizard's first turn has no context and the last used no passage: one sample.
    let samples: Vec<(usize, Vec<String>)> = dialogs.iter().flat_map(|d| d.samples.iter().map(|s| (s.upto, s.documents.clone()))).collect();
    assert_eq!(samples, [(2, vec!["Armadillo".to_owned()]), (1, vec!["The Magicians".to_owned()]), (3, vec!["Atlantis".to_owned()])]);
    // A file in another shape is named with its line.
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.json", b"[\n  {\"dialog\": [\n    {\"speaker\": \"0_Wizard\"}\n  ]}\n]\n");
    let err = wow::read(&bad).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}:3: not Wizard of Wikipedia's JSON", bad.display())) && err.contains("text"), "{err}");
}

#[test]
fn documents_add_their_text_to_the_entities_their_titles_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    // Nothing in the graph says "secret college".
    assert!(search(&store, "secret college").is_empty());
    let generation = stats(&store)["generation"].clone();
    // Stop (the default): Brakebills names no entity; the store is unchanged.
    let out = index_with_documents(&store, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let at = format!("{}:6: the title \"Brakebills\" names no entity of the store", fixture("wow/documents.jsonl").display());
    assert!(err.contains(&at), "{err}");
    assert_eq!(stats(&store)["generation"], generation);
    assert!(search(&store, "secret college").is_empty());
    // Skip: five documents attached (one by its normalized name: "armadillo"), one skipped.
    let out = index_with_documents(&store, &["--on-error", "skip"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["texts"], serde_json::json!({"read": 6, "matched": 5, "skipped": 1}), "{report}");
    assert_eq!(report["record"]["texts"], 5);
    assert_eq!(search(&store, "secret college")[0], "The Magicians");
    assert_eq!(search(&store, "little armoured one")[0], "Armadillo");
    let doc = json_of(trellis().arg("search").arg("--store").arg(&store).arg("primary colours").arg("--top").arg("1").arg("--json"));
    assert_eq!(doc["hits"][0]["name"], "Blue", "{doc}");
    assert!(doc["hits"][0]["text"].as_str().unwrap().starts_with("Blue is one of the three primary colours"), "{doc}");
    // An entity without a text has no "text" key.
    let plain = json_of(trellis().arg("search").arg("--store").arg(&store).arg("Color").arg("--exact").arg("--json"));
    assert!(plain["hits"].as_array().unwrap().iter().any(|h| h["name"] == "Color" && h.get("text").is_none()), "{plain}");
    assert_valid(&store);
    // An update keeps the texts of the documents it rewrites; a deleted entity takes its own.
    let add = write(dir.path(), "add.tsv", b"The Magicians\tadapted_as\tThe Magicians TV series\n");
    stdout_of(trellis().arg("update").arg("--store").arg(&store).arg("--add").arg(&add));
    assert_eq!(search(&store, "secret college")[0], "The Magicians");
    assert_eq!(texts(&store), 5);
    stdout_of(trellis().arg("update").arg("--store").arg(&store).arg("--delete-entity").arg("Blue"));
    assert_eq!(texts(&store), 4);
    assert!(search(&store, "primary colours").is_empty());
    assert_valid(&store);
    // A rebuild without the documents drops the texts.
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    assert!(search(&store, "secret college").is_empty());
    assert_eq!(texts(&store), 0);
}

#[test]
fn bad_documents_are_named_by_line_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let generation = stats(&store)["generation"].clone();
    for (name, bytes, says) in [
        ("not-json.jsonl", &b"{\"title\": \"Blue\", \"text\": \"ok\"}\n{\"title\": \"Sky\"\n"[..], ":2: not a document"),
        ("no-text.jsonl", &b"{\"title\": \"Sky\"}\n"[..], ":1: not a document"),
        ("bytes.jsonl", &b"\n\n{\"title\": \"Sky\", \"text\": \"\xff\"}\n"[..], ":3: invalid UTF-8"),
        ("twice.jsonl", &b"{\"title\": \"Sky\", \"text\": \"a\"}\n{\"title\": \"sky\", \"text\": \"b\"}\n"[..], ":2: the title \"sky\" names entity"),
    ] {
        let file = write(dir.path(), name, bytes);
        let out = trellis().arg("index-text").arg("--store").arg(&store).arg("--documents").arg(&file).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(&format!("{}{says}", file.display())), "{name}: {err}");
        assert_eq!(stats(&store)["generation"], generation, "{name}");
    }
    // A duplicate under skip is counted, the first document kept.
    let file = dir.path().join("twice.jsonl");
    let report = json_of(trellis().arg("index-text").arg("--store").arg(&store).arg("--documents").arg(&file).arg("--on-error").arg("skip").arg("--json"));
    assert_eq!(report["texts"], serde_json::json!({"read": 2, "matched": 1, "skipped": 1}));
    let out = trellis().arg("index-text").arg("--store").arg(&store).arg("--documents").arg(dir.path().join("missing.jsonl")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing.jsonl") && err.contains("No such file"), "{err}");
}

#[test]
fn eval_queries_scores_wizard_turns_against_their_checked_passage() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let out = index_with_documents(&store, &["--on-error", "skip"]);
    assert!(out.status.success());
    let features = dir.path().join("features.jsonl");
    let report = json_of(
        trellis()
            .args(["eval", "queries", "--dataset", "wow", "--json", "--store"])
            .arg(&store)
            .arg("--input")
            .arg(fixture("wow/dialogs.json"))
            .arg("--features")
            .arg(&features),
    );
    // Two turns scored; Atlantis names no entity of the store.
    assert_eq!((report["turns"].as_u64(), report["excluded_not_in_store"].as_u64()), (Some(2), Some(1)), "{report}");
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&features).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let gold: Vec<&str> = records.iter().map(|r| r["gold"][0].as_str().unwrap()).collect();
    assert_eq!(gold, ["Armadillo", "The Magicians"]);
    // The mentions of the context are candidates, and each finds its own entity.
    for (r, mention) in records.iter().zip(["armadillos", "Lev Grossman"]) {
        let candidates: Vec<&str> = r["candidates"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert!(candidates.iter().any(|c| c.eq_ignore_ascii_case(mention)), "{candidates:?}");
    }
    // The BM25 label reads the gold reply: its best candidate retrieves the gold document.
    let row = |name: &str| report["rows"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap().clone();
    assert_eq!(row("bm25 label")["recall_at"]["5"], 1.0, "{report}");
    assert_eq!(report["ceiling"], 1.0);
    // --actions picks OpenDialKG's speakers: refused for Wizard of Wikipedia.
    let out = trellis()
        .args(["eval", "queries", "--dataset", "wow", "--actions", "assistant", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(fixture("wow/dialogs.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--actions"));
}
