//! The four shared data sets, loaded by the real CLI: exact counts from the issue, each
//! computed independently of Trellis (awk over the files; see docs/testing.md,
//! "Data set counts").

use crate::common::*;
use serde_json::Value;

fn neighbors_json(store: &std::path::Path, entity: &str, extra: &[&str]) -> Vec<Value> {
    let out = stdout_of(trellis().arg("neighbors").arg("--store").arg(store).arg(entity).arg("--json").args(extra));
    out.lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
}

#[test]
fn opendialkg_counts_and_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let rejects = dir.path().join("rejects.tsv");
    let report = ingest(&store, &["--on-error", "skip", "--rejects", rejects.to_str().unwrap()], &[&shared_data("opendialkg/kg.tsv")]);
    assert_eq!(report["facts"], 217_574);
    assert_eq!(report["entities"], 71_499);
    assert_eq!(report["relations"], 590);
    assert_eq!(report["rejected"]["empty_name"], 4);
    let rejected = std::fs::read_to_string(&rejects).unwrap();
    assert_eq!(rejected.lines().count(), 1 + 4, "header and four rejected lines:\n{rejected}");
    let s = stats(&store);
    assert_eq!(s["facts"], 217_574);
    assert_eq!(s["entities"], 71_499);
    assert_eq!(s["relations"], 590);
    assert_eq!(s["format_version"], 4);
    let size = s["size_on_disk_bytes"].as_u64().unwrap();
    assert!(size > 0);
    assert_valid(&store);

    let facts = neighbors_json(&store, "Jordan Spieth", &["--limit", "1000"]);
    let has = |head: &str, rel: &str, tail: &str, reverse: bool| {
        facts.iter().any(|f| f["head"] == head && f["relation"] == rel && f["tail"] == tail && f["reverse"] == reverse)
    };
    assert!(has("Jordan Spieth", "Sport played", "Golf", false), "{facts:#?}");
    assert!(has("Dallas", "has_person", "Jordan Spieth", true), "{facts:#?}");
    // Reverse relations are folded: no `~` relation exists.
    assert!(facts.iter().all(|f| !f["relation"].as_str().unwrap().starts_with('~')));

    // Text output and name normalization.
    let text = stdout_of(trellis().arg("neighbors").arg("--store").arg(&store).arg("  jordan SPIETH "));
    assert!(text.contains("Jordan Spieth -Sport played-> Golf"), "{text}");
    assert!(text.contains("Jordan Spieth <-has_person- Dallas"), "{text}");

    // --relation restricts, 2 hops reach beyond.
    let golf_only = neighbors_json(&store, "Jordan Spieth", &["--relation", "Sport played"]);
    assert!(!golf_only.is_empty() && golf_only.iter().all(|f| f["relation"] == "Sport played"));
    let two = neighbors_json(&store, "Jordan Spieth", &["--hops", "2", "--limit", "100000"]);
    assert!(two.iter().any(|f| f["hop"] == 2));
    assert!(two.len() > facts.len());
}

#[test]
fn freebase_fb15k237_counts_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let report = ingest(&store, &[], &[&shared_data("fb15k237/freebase-fb15k237.nt.gz")]);
    assert_eq!(report["facts"], 310_116);
    assert_eq!(report["entities"], 14_541);
    assert_eq!(report["relations"], 237);
    assert_eq!(report["unused_labels"], 0);
    assert_valid(&store);
    let e = json_of(trellis().arg("entity").arg("--store").arg(&store).arg("http://rdf.freebase.com/ns/m.027rn").arg("--json"));
    assert_eq!(e["name"], "Dominican Republic");
    // Found by name too.
    let by_name = json_of(trellis().arg("entity").arg("--store").arg(&store).arg("dominican republic").arg("--json"));
    assert_eq!(by_name["key"], "http://rdf.freebase.com/ns/m.027rn");
    // Every entity is named by a label: no name is still a bare Freebase mid.
    let store_handle = trellis::Store::open_read_only(&store).unwrap();
    for id in 0..store_handle.entity_count() as u32 {
        let rec = store_handle.entity(trellis::EntityId(id)).unwrap().unwrap();
        assert!(!rec.name.starts_with("m.") && !rec.name.starts_with("g."), "entity {id} has no label: {rec:?}");
    }
}

#[test]
fn wikidata_codex_counts_and_property_labels() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let report = ingest(&store, &[], &[&shared_data("codex/wikidata-codex-m.nt.gz")]);
    assert_eq!(report["facts"], 206_205);
    assert_eq!(report["entities"], 17_050);
    assert_eq!(report["relations"], 51);
    assert_valid(&store);
    let s = trellis::Store::open_read_only(&store).unwrap();
    let r = s.relation_by_key("http://www.wikidata.org/prop/direct/P161").unwrap().expect("P161 is a relation");
    assert_eq!(s.relation(r).unwrap().unwrap().name, "cast member");
    // Unlabelled entities are named by their local name.
    let q = s.entity_by_key("http://www.wikidata.org/entity/Q108946").unwrap().expect("Q108946 is an entity");
    assert_eq!(s.entity(q).unwrap().unwrap().name, "Q108946");
}

#[test]
fn metaqa_counts() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let report = ingest(&store, &[], &[&shared_data("metaqa/kb.txt")]);
    assert_eq!(report["facts"], 129_235);
    assert_eq!(report["entities"], 42_778);
    assert_eq!(report["relations"], 9);
    assert_eq!(report["inputs"][0]["format"], "pipe");
    assert_valid(&store);
    let out = stdout_of(trellis().arg("neighbors").arg("--store").arg(&store).arg("Kismet").arg("--json").arg("--limit").arg("1000"));
    assert!(out.contains(r#""relation":"directed_by","reverse":false,"tail":"William Dieterle""#), "{out}");
}

#[test]
fn entity_by_name_key_and_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let by_name = json_of(trellis().arg("entity").arg("--store").arg(&store).arg("JORDAN SPIETH").arg("--json"));
    assert_eq!(by_name["key"], "Jordan Spieth");
    let id = by_name["id"].as_u64().unwrap().to_string();
    let by_hash = json_of(trellis().arg("entity").arg("--store").arg(&store).arg(format!("#{id}")).arg("--json"));
    let by_number = json_of(trellis().arg("entity").arg("--store").arg(&store).arg(&id).arg("--json"));
    assert_eq!(by_hash, by_name);
    assert_eq!(by_number, by_name);
    assert_eq!(by_name["out_degree"], 3);
    assert_eq!(by_name["in_degree"], 1);
    trellis()
        .arg("entity")
        .arg("--store")
        .arg(&store)
        .arg("No Such Entity")
        .assert()
        .code(1)
        .stderr(predicates::str::contains("no entity named \"No Such Entity\""));
}
