//! The text index (`trellis index-text`, `search`, `trellis::text`): documents worked by
//! hand, search on the sample graph through the CLI, refusals, staleness after a load,
//! updates that keep it current (and a searcher that keeps its generation), a cancelled
//! build that leaves the store as it was, and validation of a damaged index.

use crate::common::*;
use std::path::{Path, PathBuf};
use trellis::ingest::{Change, FactKeys, Updater};
use trellis::text::{DocFact, EntityDocument, SearchOptions, TextError, TextIndex};
use trellis::{Direction, Store};

fn index_text(store: &Path) {
    stdout_of(trellis().arg("index-text").arg("--store").arg(store));
}

fn sample_store(dir: &Path) -> PathBuf {
    let store = dir.join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    index_text(&store);
    store
}

fn search_json(store: &Path, text: &str, extra: &[&str]) -> serde_json::Value {
    json_of(trellis().arg("search").arg("--store").arg(store).arg(text).args(extra).arg("--json"))
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v["hits"].as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap().to_owned()).collect()
}

fn fact(s: &str, r: &str, o: &str) -> FactKeys {
    FactKeys { subject: s.into(), relation: r.into(), object: o.into() }
}

#[test]
fn documents_hold_name_aliases_and_capped_facts_in_a_fixed_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    // Hub: 40 outgoing facts over two relations and 3 incoming ones; the cap keeps all 3
    // incoming ones and 29 outgoing, relation by relation (ids in order of first sight),
    // others by id.
    let mut tsv = String::from("In0\tpoints_to\tHub\nIn1\tpoints_to\tHub\nIn2\tnames\tHub\n");
    for i in 0..20 {
        tsv.push_str(&format!("Hub\tb_rel\tB{i:02}\nHub\ta_rel\tA{i:02}\n"));
    }
    let file = write(dir.path(), "hub.tsv", tsv.as_bytes());
    ingest(&store, &[], &[&file]);
    let changes = vec![Change::Alias { key: "Hub".into(), alias: "The Centre".into() }, Change::Alias { key: "Hub".into(), alias: "Axis".into() }];
    Updater::new(&store).apply(changes.into_iter().map(|c| (None, c)).collect()).unwrap();
    let s = Store::open_read_only(&store).unwrap();
    let hub = s.entity_by_key("Hub").unwrap().unwrap();
    let doc = trellis::text::document(&s, hub).unwrap().unwrap();
    assert_eq!((doc.name.as_str(), doc.aliases.clone()), ("Hub", vec!["Axis".to_owned(), "The Centre".to_owned()]));
    assert_eq!(doc.facts.len(), trellis::text::FACTS_PER_DOCUMENT);
    let out = |rel: &str, other: String| DocFact { direction: Direction::Out, relation: rel.into(), other };
    let inc = |rel: &str, other: &str| DocFact { direction: Direction::In, relation: rel.into(), other: other.into() };
    let mut want: Vec<DocFact> = (0..20).map(|i| out("b_rel", format!("B{i:02}"))).collect();
    want.extend((0..9).map(|i| out("a_rel", format!("A{i:02}"))));
    want.extend([inc("points_to", "In0"), inc("points_to", "In1"), inc("names", "In2")]);
    assert_eq!(doc.facts, want);
    assert_eq!(doc.facts[0].text(), "b_rel B00");
    assert_eq!(doc.facts[29].text(), "In0 points_to");
    assert_eq!(doc.facts[29].triple("Hub"), ("In0", "points_to", "Hub"));
    assert!(doc.text().starts_with("Hub\nAxis\nThe Centre\nb_rel B00\n"));
    // A leaf: its one fact, seen from it.
    let leaf = trellis::text::document(&s, s.entity_by_key("A05").unwrap().unwrap()).unwrap().unwrap();
    assert_eq!(leaf, EntityDocument { entity: leaf.entity, name: "A05".into(), aliases: vec![], facts: vec![inc("a_rel", "Hub")], text: String::new() });
}

#[test]
fn search_finds_misspelt_partial_and_described_entities_with_the_facts_that_matched() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    assert_eq!(names(&search_json(&store, "Adam Sandlr", &["--top", "1"])), ["Adam Sandler"]);
    assert_eq!(names(&search_json(&store, "happy gilmor", &["--top", "1"])), ["Happy Gilmore"]);
    // Exact matching alone does not forgive the misspelling.
    assert!(!names(&search_json(&store, "gilmor", &["--exact"])).contains(&"Happy Gilmore".to_owned()));
    // By a fact: the matched facts are the document's facts sharing a word with the query.
    let v = search_json(&store, "Happy Gilmore golf", &["--top", "3"]);
    let top = &v["hits"][0];
    assert_eq!(top["name"], "Happy Gilmore");
    assert_eq!(top["rank"], 1);
    assert!(top["matched_facts"].as_array().unwrap().iter().any(|f| f == &serde_json::json!(["Happy Gilmore", "has_genre", "Golf"])), "{top}");
    let scores: Vec<f64> = v["hits"].as_array().unwrap().iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // The text form.
    let text = stdout_of(trellis().arg("search").arg("--store").arg(&store).arg("Adam Sandlr").arg("--top").arg("2"));
    assert!(text.starts_with("  1. Adam Sandler  (score "), "{text}");
}

#[test]
fn search_refuses_what_it_cannot_do_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let out = trellis().arg("search").arg("--store").arg(&store).arg("Adam").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no text index") && err.contains("trellis index-text --store"), "{err}");
    index_text(&store);
    for (args, code, says) in [(vec!["--top", "0"], 2, "top"), (vec!["--top", "1001"], 2, "top"), (vec!["--top", "-3"], 2, "top")] {
        let out = trellis().arg("search").arg("--store").arg(&store).arg("Adam").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = trellis().arg("search").arg("--store").arg(&store).arg(" ?! ").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing to search for"), "{err}");
}

#[test]
fn a_load_leaves_the_index_stale_and_index_text_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let more = write(dir.path(), "more.tsv", b"Zanzibar Quartet\tperformed\tHappy Gilmore\n");
    let report = ingest(&store, &[], &[&more]);
    assert_eq!(report["text_index"], "stale", "{report}");
    let out = trellis().arg("search").arg("--store").arg(&store).arg("Zanzibar").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the text index is stale") && err.contains("trellis index-text"), "{err}");
    // Validation names it but a stale index is not an invalid store.
    let v = json_of(trellis().arg("validate").arg("--store").arg(&store).arg("--json"));
    assert!(v["text_index"]["status"].as_str().unwrap().starts_with("stale"), "{v}");
    // The command line's report says so too.
    let again = write(
        dir.path(),
        "again.tsv",
        b"Zanzibar Quartet	formed_in	Stone Town
",
    );
    let text = stdout_of(trellis().arg("ingest").arg("--store").arg(&store).arg(&again));
    assert!(text.contains("text index: stale after this load"), "{text}");
    index_text(&store);
    assert_eq!(names(&search_json(&store, "Zanzibar", &["--top", "1"])), ["Zanzibar Quartet"]);
    assert_valid(&store);
    // An update keeps it current and says what it wrote: two new entities, one fact each.
    let add = write(
        dir.path(),
        "add.tsv",
        b"Ola Brindle	coached	Mira Fenwick
",
    );
    let text = stdout_of(trellis().arg("update").arg("--store").arg(&store).arg("--add").arg(&add));
    assert!(text.contains("text index: 2 document(s) written, 0 deleted"), "{text}");
}

#[test]
fn updates_keep_the_index_current_and_an_open_index_keeps_its_generation() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let before = Store::open_read_only(&store).unwrap();
    let old = TextIndex::open(&before).unwrap();
    let exact = SearchOptions { fuzzy: false };
    let report = Updater::new(&store)
        .apply(
            vec![
                Change::Add(fact("Quillon Verbatim", "wrote", "Happy Gilmore")),
                Change::Retract(fact("Happy Gilmore", "has_genre", "Golf")),
                Change::Rename { key: "Adam Sandler".into(), name: "Adam Richard Sandler".into() },
                Change::DeleteEntity("Golf".into()),
            ]
            .into_iter()
            .map(|c| (None, c))
            .collect(),
        )
        .unwrap();
    assert!(matches!(report.text_index, trellis::text::TextUpkeep::Updated { deleted: 1, .. }), "{:?}", report.text_index);
    let after = Store::open_read_only(&store).unwrap();
    let new = TextIndex::open(&after).unwrap();
    let top = |index: &TextIndex, q: &str| index.search(q, 1, exact).unwrap().first().map(|h| h.document.name.clone());
    // The new generation: the added entity found, its fact in its neighbour's document.
    assert_eq!(top(&new, "Quillon").as_deref(), Some("Quillon Verbatim"));
    let gilmore = new.search("Happy Gilmore", 1, exact).unwrap().remove(0);
    assert!(gilmore.document.facts.iter().any(|f| f.other == "Quillon Verbatim"));
    assert!(!gilmore.document.facts.iter().any(|f| f.other == "Golf"), "{:?}", gilmore.document.facts);
    // Renamed: found by the new name, the neighbours' documents say it.
    assert_eq!(top(&new, "Richard").as_deref(), Some("Adam Richard Sandler"));
    // Deleted: gone.
    let golf = before.entity_by_key("Golf").unwrap().unwrap();
    assert!(new.search("Golf", 50, exact).unwrap().iter().all(|h| h.entity != golf));
    assert_eq!(new.document(golf).unwrap(), None);
    // The index opened before the update still answers from its generation.
    assert_eq!(top(&old, "Quillon"), None);
    assert!(old.search("Golf", 50, exact).unwrap().iter().any(|h| h.entity == golf));
    assert_valid(&store);
}

#[test]
fn a_cancelled_build_leaves_the_store_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let generation = stats(&store)["generation"].clone();
    let monitor = trellis::Monitor::new();
    monitor.cancel();
    assert!(matches!(Store::index_text(&store, None, &monitor), Err(TextError::Cancelled)));
    assert_eq!(stats(&store)["generation"], generation);
    let s = Store::open_read_only(&store).unwrap();
    assert!(matches!(TextIndex::open(&s), Err(TextError::Missing { .. })));
    assert_valid(&store);
}

#[test]
fn validate_fails_on_a_damaged_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let s = Store::open_read_only(&store).unwrap();
    let text_dir = s.generation_dir().join("text");
    drop(s);
    // Every segment's stored-documents file removed.
    for entry in std::fs::read_dir(&text_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "store") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let out = trellis().arg("validate").arg("--store").arg(&store).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("text index"), "{text}");
}

#[test]
fn an_index_of_an_older_format_is_refused_by_name_and_updates_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    // Rewrite the commit payload as a format-1 build wrote it (the file is replaced, not
    // changed in place: earlier generations hard-link it).
    let generation = format!("gen-{:06}", stats(&store)["generation"].as_u64().unwrap());
    let meta = store.join(generation).join("text").join("meta.json");
    let old = std::fs::read_to_string(&meta).unwrap().replace("\\\"format\\\":2", "\\\"format\\\":1");
    assert!(old.contains("\\\"format\\\":1"), "{old}");
    std::fs::remove_file(&meta).unwrap();
    std::fs::write(&meta, old).unwrap();
    let out = trellis().arg("search").arg("--store").arg(&store).arg("Adam").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("text index format 1, this build reads format 2") && err.contains("trellis index-text"), "{err}");
    let add = write(dir.path(), "add.tsv", b"Ola Brindle\tcoached\tMira Fenwick\n");
    let text = stdout_of(trellis().arg("update").arg("--store").arg(&store).arg("--add").arg(&add));
    assert!(text.contains("text index: not updated"), "{text}");
    index_text(&store);
    assert_eq!(names(&search_json(&store, "Brindle", &["--top", "1"])), ["Ola Brindle"]);
}
