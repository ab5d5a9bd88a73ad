//! Readers and generations: a reader keeps the generation it opened while loads commit
//! new ones, a crashed reader pins nothing, a read of a removed generation says so, and
//! an IRI's entity is found by its prefixed form or local name.

use crate::common::*;
use predicates::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use trellis::ingest::{BulkLoader, InputSpec};
use trellis::store::{NameTarget, ReaderPin};
use trellis::{Direction, EntityId, ReadError, Store};

/// Entities per load.
const PER_LOAD: usize = 40;
/// Loads before the reader opens. RocksDB opens at most 16 SST files of a column family
/// when a database opens (more only with `max_open_files = -1`); each load adds one per
/// column family, so with 20 loads the reader opens some files only when it first reads them.
const BASE_LOADS: usize = 20;

fn key(load: usize, i: usize) -> String {
    format!("L{load:02} e{i:03}")
}

/// The facts of load `load`: a ring inside the load, and a link from each entity to its
/// namesake of the previous load (so later loads change earlier entities' neighbours).
fn load_facts(load: usize) -> Vec<(String, String, String)> {
    let mut facts = Vec::new();
    for i in 0..PER_LOAD {
        facts.push((key(load, i), format!("ring{}", load % 3), key(load, (i + 1) % PER_LOAD)));
        if load > 0 {
            facts.push((key(load, i), "follows".to_owned(), key(load - 1, i)));
        }
    }
    facts
}

fn load(store: &Path, scratch: &Path, load: usize) {
    let text: String = load_facts(load).iter().map(|(s, r, o)| format!("{s}\t{r}\t{o}\n")).collect();
    let input = write(scratch, &format!("load-{load}.tsv"), text.as_bytes());
    BulkLoader::new(store).load(&[InputSpec::new(&input)]).unwrap();
}

/// What a store of the first `loads` loads holds: per entity key, its (direction,
/// relation, other) edges, computed from the generated facts alone.
fn model(loads: usize) -> BTreeMap<String, BTreeSet<(Direction, String, String)>> {
    let mut m: BTreeMap<String, BTreeSet<(Direction, String, String)>> = BTreeMap::new();
    for l in 0..loads {
        for (s, r, o) in load_facts(l) {
            m.entry(s.clone()).or_default().insert((Direction::Out, r.clone(), o.clone()));
            m.entry(o).or_default().insert((Direction::In, r, s));
        }
    }
    m
}

/// Reads everything through the public API (names in one batch, keys, the name index,
/// every neighbour list) and compares it with `expected`; the first difference or error.
fn check_store(store: &Store, expected: &BTreeMap<String, BTreeSet<(Direction, String, String)>>) -> Result<(), String> {
    if store.entity_count() != expected.len() as u64 {
        return Err(format!("{} entities, expected {}", store.entity_count(), expected.len()));
    }
    let ids: Vec<EntityId> = (0..store.entity_count() as u32).map(EntityId).collect();
    let names = store.entity_names(&ids).map_err(|e| format!("entity_names: {e}"))?;
    let names: Vec<String> = names.into_iter().map(|n| n.unwrap_or_default()).collect();
    let by_name: BTreeSet<&String> = names.iter().collect();
    if by_name != expected.keys().collect() {
        return Err("the entity names differ from the model".into());
    }
    for (k, edges) in expected {
        let e = store.entity_by_key(k).map_err(|e| format!("entity_by_key({k}): {e}"))?.ok_or(format!("no entity {k}"))?;
        if names[e.0 as usize] != *k {
            return Err(format!("entity {k} has id {} named {}", e.0, names[e.0 as usize]));
        }
        let named = store.lookup_name(k).map_err(|e| format!("lookup_name({k}): {e}"))?;
        if named != vec![(NameTarget::Entity(e), false)] {
            return Err(format!("lookup_name({k}) = {named:?}"));
        }
        let mut seen = BTreeSet::new();
        let mut failed = None;
        store
            .for_each_neighbor(e, None, None, |edge| {
                match store.relation(edge.relation) {
                    Ok(Some(r)) => {
                        seen.insert((edge.direction, r.key, names[edge.other.0 as usize].clone()));
                    }
                    other => failed = Some(format!("relation {:?}: {other:?}", edge.relation)),
                }
                ControlFlow::Continue(())
            })
            .map_err(|e| format!("neighbours of {k}: {e}"))?;
        if let Some(f) = failed {
            return Err(f);
        }
        if seen != *edges {
            return Err(format!("neighbours of {k}: {seen:?}, expected {edges:?}"));
        }
    }
    Ok(())
}

fn generations(store: &Path) -> Vec<String> {
    let mut out: Vec<String> =
        std::fs::read_dir(store).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("gen-")).collect();
    out.sort();
    out
}

fn registrations(store: &Path) -> Vec<String> {
    match std::fs::read_dir(store.join("readers")) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    }
}

fn sst_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "sst")).collect()
}

fn store_of_many_loads(root: &Path) -> PathBuf {
    let store = root.join("s");
    for l in 0..BASE_LOADS {
        load(&store, root, l);
    }
    // Enough files that the reader's open leaves some unopened (see BASE_LOADS).
    let current = store.join(generations(&store).last().unwrap());
    let most = most_files_in_a_column_family(&current);
    assert!(most > 16, "at most {most} SST files in a column family");
    store
}

fn most_files_in_a_column_family(generation: &Path) -> usize {
    let opts = rocksdb::Options::default();
    let cfs = rocksdb::DB::list_cf(&opts, generation).unwrap();
    let db = rocksdb::DB::open_cf_for_read_only(&opts, generation, cfs, false).unwrap();
    let mut per_cf: BTreeMap<String, usize> = BTreeMap::new();
    for f in db.live_files().unwrap() {
        *per_cf.entry(f.column_family_name).or_default() += 1;
    }
    per_cf.into_values().max().unwrap_or(0)
}

/// Waits until `passes` exceeds `seen` or the reader thread ended (with an error).
fn wait_for_pass(passes: &AtomicUsize, seen: usize, reader: &std::thread::JoinHandle<Result<usize, String>>) -> usize {
    loop {
        let now = passes.load(Ordering::SeqCst);
        if now > seen || reader.is_finished() {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn a_reader_keeps_its_generation_across_three_loads() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_of_many_loads(dir.path());
    let expected = model(BASE_LOADS);
    let passes = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (opened_tx, opened_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let reader = {
        let (store, passes, stop) = (store.clone(), passes.clone(), stop.clone());
        std::thread::spawn(move || -> Result<usize, String> {
            let s = Store::open_read_only(&store).map_err(|e| e.to_string())?;
            let registered = matches!(s.reader_pin(), ReaderPin::Registered(_));
            opened_tx.send((s.generation_dir().to_path_buf(), registered)).unwrap();
            // The first full read comes after the first commit: the files RocksDB did not
            // open with the database are opened after that commit, as in a long-lived reader.
            go_rx.recv().unwrap();
            while !stop.load(Ordering::SeqCst) {
                check_store(&s, &expected).map_err(|e| format!("pass {}: {e}", passes.load(Ordering::SeqCst)))?;
                passes.fetch_add(1, Ordering::SeqCst);
            }
            Ok(passes.load(Ordering::SeqCst))
        })
    };
    let (reader_gen, registered) = opened_rx.recv().unwrap();
    assert!(registered, "the reader registered");
    let reader_gen_name = reader_gen.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(reader_gen_name, format!("gen-{BASE_LOADS:06}"));
    let regs = registrations(&store);
    assert_eq!(regs.len(), 1, "{regs:?}");
    assert!(regs[0].starts_with(&format!("{reader_gen_name}.{}.", std::process::id())), "{regs:?}");

    let mut seen = 0;
    let mut kept = Vec::new();
    for extra in 0..3 {
        load(&store, dir.path(), BASE_LOADS + extra);
        if extra == 0 {
            go_tx.send(()).unwrap();
        }
        kept.push(generations(&store));
        // The reader completes a whole pass after this commit before the next load.
        seen = wait_for_pass(&passes, seen, &reader);
        if reader.is_finished() {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let result = reader.join().unwrap();
    let passes = result.unwrap_or_else(|e| panic!("the reader failed: {e}"));
    assert!(passes >= 3, "{passes} passes");
    // After each load the reader's generation stayed; the one committed before that load,
    // which no reader held, was removed.
    let expected_kept: Vec<Vec<String>> = (1..=3).map(|n| vec![reader_gen_name.clone(), format!("gen-{:06}", BASE_LOADS + n)]).collect();
    assert_eq!(kept, expected_kept);

    // A new reader sees every load.
    let fresh = Store::open_read_only(&store).unwrap();
    check_store(&fresh, &model(BASE_LOADS + 3)).unwrap();
    drop(fresh);
    // With the reader gone, the next commit removes its generation and its registration.
    assert!(registrations(&store).is_empty(), "a closed reader removes its registration");
    load(&store, dir.path(), BASE_LOADS + 3);
    assert_eq!(generations(&store), vec![format!("gen-{:06}", BASE_LOADS + 4)]);
    assert_valid(&store);
}

/// Not a test on its own: the body of the child process of
/// `a_killed_reader_does_not_pin_its_generation`, which runs it with
/// `TRELLIS_TEST_READER_STORE` set. It opens the store, says where it registered, and
/// waits (holding the store open) until killed.
#[test]
fn child_reader_process() {
    let Some(store) = std::env::var_os("TRELLIS_TEST_READER_STORE") else { return };
    let s = Store::open_read_only(&store).unwrap();
    let ReaderPin::Registered(r) = s.reader_pin() else { panic!("not registered: {:?}", s.reader_pin()) };
    println!("registered {}", r.path().display());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
}

#[test]
fn a_killed_reader_does_not_pin_its_generation() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    load(&store, dir.path(), 0);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["readers::child_reader_process", "--exact", "--nocapture", "--test-threads", "1"])
        .env("TRELLIS_TEST_READER_STORE", &store)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let registration = loop {
        let line = lines.next().expect("the child reports its registration").unwrap();
        // The harness prints "test NAME ... " on the same line first.
        if let Some((_, p)) = line.split_once("registered ") {
            break PathBuf::from(p);
        }
    };
    assert!(registration.starts_with(store.join("readers")), "{}", registration.display());
    assert!(registration.file_name().unwrap().to_string_lossy().starts_with(&format!("gen-000001.{}.", child.id())));
    // While the child lives, its generation stays.
    load(&store, dir.path(), 1);
    assert_eq!(generations(&store), vec!["gen-000001", "gen-000002"]);
    // kill -9: no destructor runs, the registration file stays behind, unlocked.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(registration.exists(), "a killed reader leaves its file");
    // The next commit sees nobody holds it: the registration and the generation go.
    load(&store, dir.path(), 2);
    assert_eq!(generations(&store), vec!["gen-000003"]);
    assert!(!registration.exists());
    assert!(registrations(&store).is_empty());
    check_store(&Store::open_read_only(&store).unwrap(), &model(3)).unwrap();
}

#[test]
fn a_read_of_a_removed_generation_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_of_many_loads(dir.path());
    let s = Store::open_read_only(&store).unwrap();
    // What an older Trellis (or a user) does under a reader: remove the generation's files.
    for f in sst_files(s.generation_dir()) {
        std::fs::remove_file(f).unwrap();
    }
    let err = check_store(&s, &model(BASE_LOADS)).expect_err("some SST files were never opened, so reads fail");
    assert!(err.contains("were removed while this reader had it open") && err.contains("reopen the store"), "{err}");
    assert!(!err.contains("Corruption"), "{err}");
    // The typed error, from a read that needs files the open did not load.
    let ids: Vec<EntityId> = (0..s.entity_count() as u32).map(EntityId).collect();
    let typed = s.entity_names(&ids).expect_err("the names need unopened files");
    assert!(matches!(typed, ReadError::GenerationRemoved { .. }), "{typed:?}");
}

#[test]
fn a_store_whose_registry_cannot_be_written_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    load(&store, dir.path(), 0);
    // A file where the registry directory goes: registering fails as on a read-only
    // filesystem (which a test running as root cannot otherwise simulate).
    std::fs::write(store.join("readers"), b"").unwrap();
    let s = Store::open_read_only(&store).unwrap();
    assert!(matches!(s.reader_pin(), ReaderPin::Unregistered { .. }), "{:?}", s.reader_pin());
    check_store(&s, &model(1)).unwrap();
    let out = trellis().arg("stats").arg("--store").arg(&store).output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: cannot register as a reader in"), "{stderr}");
}

const IRIS: &str = "\
<http://rdf.freebase.com/ns/m.027rn> <http://rdf.freebase.com/ns/location.country.capital> <http://rdf.freebase.com/ns/m.0fn8f> .
<http://rdf.freebase.com/ns/m.027rn> <http://www.w3.org/2000/01/rdf-schema#label> \"Dominican Republic\"@en .
<http://www.wikidata.org/entity/Q42> <http://www.wikidata.org/prop/direct/P31> <http://www.wikidata.org/entity/Q5> .
<http://www.wikidata.org/entity/Q42> <http://www.w3.org/2000/01/rdf-schema#label> \"Douglas Adams\"@en .
<http://example.org/people/Q42> <http://example.org/sameAs> <http://www.wikidata.org/entity/Q42> .
<http://example.org/people/Q42> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <https://schema.org/Person> .
";

fn entity_json(store: &Path, text: &str) -> Vec<serde_json::Value> {
    stdout_of(trellis().arg("entity").arg("--store").arg(store).arg(text).arg("--json")).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn keys_of(found: &[serde_json::Value]) -> Vec<&str> {
    found.iter().map(|v| v["key"].as_str().unwrap()).collect()
}

#[test]
fn an_iri_entity_is_found_by_prefixed_form_and_local_name() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "iris.nt", IRIS.as_bytes());
    let store = dir.path().join("s");
    ingest(&store, &[], &[&input]);
    let dr = "http://rdf.freebase.com/ns/m.027rn";
    let q42 = "http://www.wikidata.org/entity/Q42";
    // Labelled: the name index knows "Dominican Republic", not the local name.
    for text in [dr, "<http://rdf.freebase.com/ns/m.027rn>", "fb:m.027rn", "m.027rn", "dominican republic"] {
        let found = entity_json(&store, text);
        assert_eq!(keys_of(&found), vec![dr], "{text}");
        assert_eq!(found[0]["name"], "Dominican Republic", "{text}");
    }
    // Unlabelled: named by its local name, found once (by local name and by name).
    assert_eq!(keys_of(&entity_json(&store, "m.0fn8f")), vec!["http://rdf.freebase.com/ns/m.0fn8f"]);
    assert_eq!(keys_of(&entity_json(&store, "wd:Q42")), vec![q42]);
    assert_eq!(keys_of(&entity_json(&store, "wd:Q5")), vec!["http://www.wikidata.org/entity/Q5"]);
    assert_eq!(keys_of(&entity_json(&store, "schema:Person")), vec!["https://schema.org/Person"]);
    // A bare Q42 is ambiguous: Wikidata's (by local name) and example.org's (named Q42,
    // its local name, having no label). Both are listed, the local-name match first.
    let both = entity_json(&store, "Q42");
    assert_eq!(keys_of(&both), vec![q42, "http://example.org/people/Q42"]);
    let text = stdout_of(trellis().arg("entity").arg("--store").arg(&store).arg("Q42"));
    assert!(text.starts_with("2 entities match \"Q42\":\n"), "{text}");
    assert!(text.contains("matched    by local name") && text.contains("matched    by name"), "{text}");
    // The prefixed form works wherever an entity is given.
    let out = stdout_of(trellis().arg("neighbors").arg("--store").arg(&store).arg("fb:m.027rn").arg("--json"));
    let facts: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        facts,
        vec![serde_json::json!({"head": "Dominican Republic", "relation": "location.country.capital", "tail": "m.0fn8f", "reverse": false, "hop": 1})]
    );
    // A known prefix with an unknown local name finds nothing and says what was tried.
    trellis()
        .arg("entity")
        .arg("--store")
        .arg(&store)
        .arg("wd:Q999")
        .assert()
        .code(1)
        .stderr(predicates::str::contains("no entity named \"wd:Q999\"").and(predicates::str::contains("prefixed IRI (fb: wd:")));
}

/// `validate` reads every column family with its own iterators: a removed generation found
/// there is reported as such too, not as a RocksDB corruption (it was before: only the
/// store's own reads mapped the error).
#[test]
fn validate_of_a_removed_generation_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_of_many_loads(dir.path());
    let s = Store::open_read_only(&store).unwrap();
    for f in sst_files(s.generation_dir()) {
        std::fs::remove_file(f).unwrap();
    }
    let err = s.validate().expect_err("some SST files were never opened, so the scan fails");
    assert!(matches!(err, ReadError::GenerationRemoved { .. }), "{err:?}");
    assert!(err.to_string().contains("reopen the store"), "{err}");
}
