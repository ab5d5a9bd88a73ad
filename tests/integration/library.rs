//! The library API against brute-force models of the same input.

use crate::common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use trellis::ingest::{BulkLoader, InputSpec};
use trellis::store::NameTarget;
use trellis::{Direction, EntityId, Store};

/// A deterministic pseudo-random generator, so failures reproduce.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

type Fact = (String, String, String);

fn random_tsv(seed: u64, lines: usize, entities: u64, relations: u64) -> (String, BTreeSet<Fact>) {
    let mut rng = Lcg(seed);
    let mut text = String::new();
    let mut facts = BTreeSet::new();
    for _ in 0..lines {
        let s = format!("ent {}", rng.below(entities));
        let o = format!("ent {}", rng.below(entities));
        let r = format!("rel{}", rng.below(relations));
        if rng.below(3) == 0 {
            // Stated backwards with the reverse prefix: means r(o, s).
            text.push_str(&format!("{o}\t~{r}\t{s}\n"));
        } else {
            text.push_str(&format!("{s}\t{r}\t{o}\n"));
        }
        facts.insert((s, r, o));
    }
    (text, facts)
}

/// Every fact of the store, read through the public neighbour API from both directions.
fn store_facts(store: &Store) -> (BTreeSet<Fact>, BTreeSet<Fact>) {
    let name = |e: EntityId| store.entity(e).unwrap().unwrap().key;
    let mut out = BTreeSet::new();
    let mut inc = BTreeSet::new();
    for id in 0..store.entity_count() as u32 {
        let e = EntityId(id);
        store
            .for_each_neighbor(e, None, None, |edge| {
                let r = store.relation(edge.relation).unwrap().unwrap().key;
                match edge.direction {
                    Direction::Out => out.insert((name(e), r, name(edge.other))),
                    Direction::In => inc.insert((name(edge.other), r, name(e))),
                };
                ControlFlow::Continue(())
            })
            .unwrap();
    }
    (out, inc)
}

#[test]
fn random_graphs_match_a_brute_force_model() {
    for seed in 1..=4u64 {
        let dir = tempfile::tempdir().unwrap();
        let (text, model) = random_tsv(seed, 3_000, 300, 7);
        let input = write(dir.path(), "g.tsv", text.as_bytes());
        let store_dir = dir.path().join("s");
        // A run every 500 fact lines: the adjacency is merged from 6 sorted runs.
        let report = BulkLoader::new(&store_dir).with_sort_run_triples(500).load(&[InputSpec::new(&input)]).unwrap();
        assert_eq!(report.sort_runs, 6);
        assert_eq!(report.facts, model.len() as u64);
        let store = Store::open_read_only(&store_dir).unwrap();
        assert!(store.validate().unwrap().is_ok());
        let (out, inc) = store_facts(&store);
        assert_eq!(out, model, "seed {seed}: outgoing view");
        assert_eq!(inc, model, "seed {seed}: incoming view");
        // Degrees and relation counts against the model.
        let mut out_degree: BTreeMap<&str, u64> = BTreeMap::new();
        for (s, _, _) in &model {
            *out_degree.entry(s.as_str()).or_default() += 1;
        }
        for (name, deg) in out_degree {
            let e = store.entity_by_key(name).unwrap().unwrap();
            assert_eq!(store.degree(e, Direction::Out).unwrap(), deg, "{name}");
            let by_rel: u64 = store.relations_at(e, Direction::Out).unwrap().iter().map(|&(_, n)| n).sum();
            assert_eq!(by_rel, deg);
        }
    }
}

/// Everything a store says about its entities and relations, id by id: records, degrees,
/// and per-relation counts in both directions.
fn store_dump(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for id in 0..store.entity_count() as u32 {
        let e = EntityId(id);
        let rec = store.entity(e).unwrap().unwrap();
        for dir in [Direction::Out, Direction::In] {
            let rels = store.relations_at(e, dir).unwrap();
            out.push(format!("e{id} {:?} {:?} {dir:?} degree {} by relation {rels:?}", rec.key, rec.name, store.degree(e, dir).unwrap()));
        }
    }
    for id in 0..store.relation_count() as u32 {
        out.push(format!("r{id} {:?}", store.relation(trellis::RelationId(id)).unwrap().unwrap()));
    }
    out
}

#[test]
fn spilled_and_in_memory_loads_build_identical_stores() {
    let dir = tempfile::tempdir().unwrap();
    let (text, model) = random_tsv(9, 20_000, 2_000, 11);
    let (more, more_model) = random_tsv(10, 5_000, 2_500, 13);
    let input = write(dir.path(), "g.tsv", text.as_bytes());
    let second = write(dir.path(), "h.tsv", more.as_bytes());
    let spilled = dir.path().join("spilled");
    let in_memory = dir.path().join("in-memory");
    let rs = BulkLoader::new(&spilled).with_sort_run_triples(1_000).load(&[InputSpec::new(&input)]).unwrap();
    let rm = BulkLoader::new(&in_memory).load(&[InputSpec::new(&input)]).unwrap();
    // 20,000 fact lines, a run every 1,000: 20 runs merged; the default budget holds them all.
    assert_eq!((rs.sort_runs, rm.sort_runs), (20, 0));
    // The same cap (12,000 bytes) bounds the dictionaries' key and name sorts: they spill too.
    assert!(rs.dictionary_runs >= 3, "{}", rs.dictionary_runs);
    assert_eq!(rm.dictionary_runs, 0);
    assert_eq!((rs.facts, rm.facts), (model.len() as u64, model.len() as u64));
    // A second load merges its runs with the lists the store holds.
    let rs2 = BulkLoader::new(&spilled).with_sort_run_triples(300).load(&[InputSpec::new(&second)]).unwrap();
    let rm2 = BulkLoader::new(&in_memory).load(&[InputSpec::new(&second)]).unwrap();
    assert_eq!((rs2.sort_runs, rm2.sort_runs), (17, 0));
    assert_eq!(rs2.new_facts, rm2.new_facts);
    let (ss, sm) = (Store::open_read_only(&spilled).unwrap(), Store::open_read_only(&in_memory).unwrap());
    assert!(ss.validate().unwrap().is_ok(), "{:?}", ss.validate().unwrap().problems);
    let union: BTreeSet<Fact> = model.union(&more_model).cloned().collect();
    let facts = store_facts(&ss);
    assert_eq!(facts, (union.clone(), union), "the spilled store holds exactly the model's facts");
    assert_eq!(facts, store_facts(&sm), "fact for fact");
    // Ids are assigned in input order, whatever the sort does: the same key has the same id,
    // the same degrees and the same lists.
    assert_eq!(store_dump(&ss), store_dump(&sm));
    assert_eq!((ss.meta().facts, ss.meta().entities, ss.meta().names), (sm.meta().facts, sm.meta().entities, sm.meta().names));
}

#[test]
fn a_second_load_adds_facts_and_keeps_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (t1, m1) = random_tsv(21, 2_000, 200, 5);
    let (t2, m2) = random_tsv(22, 2_000, 260, 6);
    let f1 = write(dir.path(), "one.tsv", t1.as_bytes());
    let f2 = write(dir.path(), "two.tsv", t2.as_bytes());
    let s = dir.path().join("s");
    BulkLoader::new(&s).load(&[InputSpec::new(&f1)]).unwrap();
    let ids_before: Vec<(u32, String)> = {
        let st = Store::open_read_only(&s).unwrap();
        (0..st.entity_count() as u32).map(|i| (i, st.entity(EntityId(i)).unwrap().unwrap().key)).collect()
    };
    let report = BulkLoader::new(&s).load(&[InputSpec::new(&f2)]).unwrap();
    let union: BTreeSet<Fact> = m1.union(&m2).cloned().collect();
    assert_eq!(report.new_facts, (union.len() - m1.len()) as u64);
    let st = Store::open_read_only(&s).unwrap();
    assert!(st.validate().unwrap().is_ok(), "{:?}", st.validate().unwrap().problems);
    assert_eq!(st.meta().facts, union.len() as u64);
    assert_eq!(st.meta().loads.len(), 2);
    for (i, key) in ids_before {
        assert_eq!(st.entity(EntityId(i)).unwrap().unwrap().key, key, "id {i} changed");
    }
    let (out, inc) = store_facts(&st);
    assert_eq!(out, union);
    assert_eq!(inc, union);
    drop(st);
    // Loading the same file again is a no-op.
    let again = BulkLoader::new(&s).load(&[InputSpec::new(&f2)]).unwrap();
    assert_eq!((again.new_facts, again.new_entities, again.new_relations), (0, 0, 0));
    let st = Store::open_read_only(&s).unwrap();
    assert!(st.validate().unwrap().is_ok());
}

#[test]
fn rdf_labels_aliases_literals_across_loads() {
    let dir = tempfile::tempdir().unwrap();
    let facts = write(
        dir.path(),
        "facts.nt",
        br#"<http://ex.org/m.1> <http://ex.org/ns/people.person.place_of_birth> <http://ex.org/m.2> .
<http://ex.org/m.1> <http://ex.org/ns/people.person.date_of_birth> "1961-08-04"^^<http://www.w3.org/2001/XMLSchema#date> .
<http://ex.org/m.2> <http://www.w3.org/2000/01/rdf-schema#label> "Honolulu"@en .
<http://ex.org/m.2> <http://www.w3.org/2000/01/rdf-schema#label> "Honolulu (fr)"@fr .
<http://ex.org/m.9> <http://www.w3.org/2000/01/rdf-schema#label> "Nobody"@en .
"#,
    );
    let names = write(dir.path(), "names.nt.gz", &{
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(
            br#"<http://ex.org/m.1> <http://rdf.freebase.com/ns/type.object.name> "Barack Obama"@en .
<http://ex.org/m.1> <http://www.w3.org/2004/02/skos/core#altLabel> "Barack Hussein Obama II"@en .
<http://ex.org/m.2> <http://www.w3.org/2000/01/rdf-schema#label> "Not the first label"@en .
"#,
        )
        .unwrap();
        enc.finish().unwrap()
    });
    let s = dir.path().join("s");
    let r1 = BulkLoader::new(&s).load(&[InputSpec::new(&facts)]).unwrap();
    assert_eq!((r1.facts, r1.entities, r1.unused_labels), (2, 3, 1));
    let r2 = BulkLoader::new(&s).load(&[InputSpec::new(&names)]).unwrap();
    assert_eq!((r2.new_facts, r2.new_aliases), (0, 1));
    let st = Store::open_read_only(&s).unwrap();
    assert!(st.validate().unwrap().is_ok(), "{:?}", st.validate().unwrap().problems);
    let m1 = st.entity_by_key("http://ex.org/m.1").unwrap().unwrap();
    let m2 = st.entity_by_key("http://ex.org/m.2").unwrap().unwrap();
    assert_eq!(st.entity(m1).unwrap().unwrap().name, "Barack Obama");
    assert_eq!(st.entity(m2).unwrap().unwrap().name, "Honolulu", "the first English label wins");
    assert_eq!(st.aliases(m1).unwrap(), vec!["Barack Hussein Obama II".to_string()]);
    assert_eq!(st.entities_named("barack hussein obama ii").unwrap(), vec![m1]);
    assert_eq!(st.entities_named("BARACK  OBAMA").unwrap(), vec![m1]);
    assert!(st.entities_named("m.1").unwrap().is_empty(), "the old default name left the index");
    let date = st.entity_by_key("\"1961-08-04\"^^<http://www.w3.org/2001/XMLSchema#date>").unwrap().unwrap();
    assert_eq!(st.entity(date).unwrap().unwrap().name, "1961-08-04");
    let born = st.resolve_relation("people.person.date_of_birth").unwrap();
    assert_eq!(born.len(), 1);
    assert_eq!(st.neighbors_via(m1, Direction::Out, born[0]).unwrap(), vec![date]);
    assert_eq!(st.neighbors_via(date, Direction::In, born[0]).unwrap(), vec![m1]);
}

#[test]
fn shared_names_return_every_entity() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", "Paris\tcapital of\tFrance\nparis\tcharacter in\tIliad\nPARIS \tr\tx\n".as_bytes());
    let s = dir.path().join("s");
    BulkLoader::new(&s).load(&[InputSpec::new(&input)]).unwrap();
    let st = Store::open_read_only(&s).unwrap();
    let found = st.lookup_name("Paris").unwrap();
    assert_eq!(found, vec![(NameTarget::Entity(EntityId(0)), false), (NameTarget::Entity(EntityId(2)), false), (NameTarget::Entity(EntityId(4)), false)]);
    assert_eq!(st.entity(EntityId(4)).unwrap().unwrap().key, "PARIS ", "keys keep their exact form");
}

#[test]
fn custom_reverse_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", b"a\tinv:likes\tb\nc\t~likes\td\n");
    let s = dir.path().join("s");
    let mut cmd = trellis();
    cmd.arg("ingest").arg("--store").arg(&s).arg("--reverse-prefix").arg("inv:").arg(&input);
    stdout_of(&mut cmd);
    let st = Store::open_read_only(&s).unwrap();
    let likes = st.relation_by_key("likes").unwrap().unwrap();
    let b = st.entity_by_key("b").unwrap().unwrap();
    let a = st.entity_by_key("a").unwrap().unwrap();
    assert_eq!(st.neighbors_via(b, Direction::Out, likes).unwrap(), vec![a]);
    assert!(st.relation_by_key("~likes").unwrap().is_some(), "with another prefix, `~` is part of the name");
}

#[test]
fn many_reader_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (text, model) = random_tsv(5, 5_000, 500, 9);
    let input = write(dir.path(), "g.tsv", text.as_bytes());
    let s = dir.path().join("s");
    BulkLoader::new(&s).load(&[InputSpec::new(&input)]).unwrap();
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || store_facts(&store).0)
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), model);
    }
}

#[test]
fn committed_v1_store_is_migrated_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("v1");
    copy_dir(&fixture("stores/v1-sample"), &copy);
    // Readers do not migrate: they say what is needed, and the command line what to run.
    let err = Store::open_read_only(&copy).err().expect("a v1 store needs migrating").to_string();
    assert!(err.contains("format version 1, older than this build's 4: it needs migrating"), "{err}");
    let out = trellis().arg("stats").arg("--store").arg(&copy).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("it needs migrating; run `trellis migrate --store {}`", copy.display())), "{stderr}");
    let before = std::fs::read_to_string(copy.join("CURRENT")).unwrap();
    let out = stdout_of(trellis().arg("migrate").arg("--store").arg(&copy));
    assert!(out.contains("step 1 of 3: add folded names to the name index; add the token index column families"), "{out}");
    assert!(out.contains("step 2 of 3: add the dictionary epoch to meta"), "{out}");
    assert!(out.contains("step 3 of 3: add the column families of live updates"), "{out}");
    assert!(out.contains("migrated from format version 1 to 4"), "{out}");
    assert_ne!(std::fs::read_to_string(copy.join("CURRENT")).unwrap(), before, "a new generation");
    let st = Store::open_read_only(&copy).unwrap();
    assert_eq!(st.meta().format_version, 4);
    assert!(st.validate().unwrap().is_ok(), "{:?}", st.validate().unwrap().problems);
    let spieth = st.entity_by_key("Jordan Spieth").unwrap().expect("fixture holds Jordan Spieth");
    let golf = st.entity_by_key("Golf").unwrap().unwrap();
    let sport = st.relation_by_key("Sport played").unwrap().unwrap();
    assert!(st.neighbors_via(spieth, Direction::Out, sport).unwrap().contains(&golf));
    assert_eq!(st.meta().facts, 1465);
    // The migration added the folded names: the accent-free spelling finds her now.
    let annika = st.entity_by_key("Annika Sörenstam").unwrap().unwrap();
    assert_eq!(st.entities_named("annika sorenstam").unwrap(), vec![annika]);
    assert!(st.meta().names > 1321, "v1 held 1321 name entries, v2 adds folded ones");
    drop(st);
    // Migrating again is a no-op; a read-write open works.
    let report = trellis::store::migrate(&copy).unwrap();
    assert_eq!((report.from_version, report.to_version), (4, 4));
    assert!(Store::open(&copy).unwrap().validate().unwrap().is_ok());
}

fn set_format_version(store_dir: &std::path::Path, version: u32) {
    let gen = std::fs::read_to_string(store_dir.join("CURRENT")).unwrap();
    let path = store_dir.join(gen.trim());
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
    let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), &path, cfs).unwrap();
    db.put_cf(db.cf_handle("meta").unwrap(), b"format_version", version.to_be_bytes()).unwrap();
}

#[test]
fn newer_and_unsupported_formats_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", b"a\tr\tb\n");
    let s = dir.path().join("s");
    BulkLoader::new(&s).load(&[InputSpec::new(&input)]).unwrap();
    set_format_version(&s, 7);
    let err = Store::open_read_only(&s).err().expect("refused").to_string();
    assert!(err.contains("format version 7, written by a newer Trellis; this build reads versions up to 4"), "{err}");
    assert!(matches!(Store::open_read_only(&s), Err(trellis::OpenError::TooNew { found: 7, supported: 4, .. })));
    assert!(Store::open(&s).is_err());
    let out = trellis().arg("stats").arg("--store").arg(&s).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("written by a newer Trellis"));
    // A load refuses to write into it, and leaves it as it was.
    let err = BulkLoader::new(&s).load(&[InputSpec::new(&input)]).expect_err("refused").to_string();
    assert!(err.contains("newer Trellis"), "{err}");
    set_format_version(&s, 0);
    let err = Store::open_read_only(&s).err().expect("refused").to_string();
    assert!(err.contains("it needs migrating"), "{err}");
    let err = trellis::store::migrate(&s).expect_err("refused").to_string();
    assert!(err.contains("older than the oldest this build migrates (1)"), "{err}");
    assert!(matches!(trellis::store::migrate(&s), Err(trellis::MigrateError::TooOld { found: 0, oldest: 1, .. })));
    assert!(matches!(Store::open_read_only(&s), Err(trellis::OpenError::NeedsMigration { found: 0, current: 4, .. })));
}

#[test]
fn one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", b"a\tr\tb\n");
    let s = dir.path().join("s");
    BulkLoader::new(&s).load(&[InputSpec::new(&input)]).unwrap();
    let _writer = Store::open(&s).unwrap();
    let err = BulkLoader::new(&s).load(&[InputSpec::new(&input)]).expect_err("locked").to_string();
    assert!(err.contains("store is locked by another loader or migration"), "{err}");
    // Readers are never locked out.
    assert!(Store::open_read_only(&s).is_ok());
}

/// Opens the current generation with RocksDB directly, to damage it on purpose.
fn raw_db(store_dir: &std::path::Path) -> rocksdb::DB {
    let gen = std::fs::read_to_string(store_dir.join("CURRENT")).unwrap();
    let path = store_dir.join(gen.trim());
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
    rocksdb::DB::open_cf(&rocksdb::Options::default(), &path, cfs).unwrap()
}

#[test]
fn validate_reports_each_kind_of_damage() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", b"a\tr\tb\na\tr\tc\nb\ts\tc\n");
    let clean = dir.path().join("clean");
    BulkLoader::new(&clean).load(&[InputSpec::new(&input)]).unwrap();
    let damage = |name: &str, f: &dyn Fn(&rocksdb::DB)| -> String {
        let s = dir.path().join(name);
        BulkLoader::new(&s).load(&[InputSpec::new(&input)]).unwrap();
        f(&raw_db(&s));
        let out = trellis().arg("validate").arg("--store").arg(&s).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: validate must fail");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_valid(&clean);
    // a = e0, b = e1, c = e2; r = r0, s = r1.
    let adj_in = |e: u32, r: u32| [&[1u8][..], &e.to_be_bytes(), &r.to_be_bytes()].concat();
    let report = damage("missing-incoming", &|db| {
        db.delete_cf(db.cf_handle("adjacency").unwrap(), adj_in(1, 0)).unwrap();
    });
    assert!(report.contains("the two directions disagree (3 facts outgoing, 2 incoming)"), "{report}");
    assert!(report.contains("adjacency: e0 Out r0 lists e1, but e1 In r0 does not list e0"), "{report}");
    let report = damage("wrong-degree", &|db| {
        db.put_cf(db.cf_handle("degrees").unwrap(), [&[0u8][..], &0u32.to_be_bytes()].concat(), 7u32.to_be_bytes()).unwrap();
    });
    assert!(report.contains("degrees: e0 Out says 0x00000007, its lists hold 2"), "{report}");
    let report = damage("bad-list", &|db| {
        db.put_cf(db.cf_handle("adjacency").unwrap(), [&[0u8][..], &2u32.to_be_bytes(), &0u32.to_be_bytes()].concat(), [9u8, 9]).unwrap();
    });
    assert!(report.contains("adjacency: list under 0x000000000200000000 does not decode"), "{report}");
    let report = damage("lost-name", &|db| {
        let names = db.cf_handle("names").unwrap();
        let mut key = b"b\0\0".to_vec();
        key.extend_from_slice(&1u32.to_be_bytes());
        db.delete_cf(names, key).unwrap();
    });
    assert!(report.contains("names: no entry \"b\" for \"b\" (Entity(EntityId(1)))"), "{report}");
    assert!(report.contains("meta says 5 name entries, `names` holds 4"), "{report}");
    let report = damage("lost-key", &|db| {
        db.delete_cf(db.cf_handle("entity_keys").unwrap(), b"c").unwrap();
    });
    assert!(report.contains("entity_keys: no entry for \"c\" (id 2)"), "{report}");
}

#[test]
fn blank_nodes_are_scoped_to_their_file() {
    let dir = tempfile::tempdir().unwrap();
    let label = "<http://www.w3.org/2000/01/rdf-schema#label>";
    let a = write(dir.path(), "a.nt", format!("_:b1 <http://x/r> <http://x/o> .\n<http://x/s> <http://x/r> _:b1 .\n_:b1 {label} \"first\" .\n").as_bytes());
    let b = write(dir.path(), "b.nt", b"_:b1 <http://x/r> <http://x/o> .\n_:b2 <http://x/r> _:b1 .\n");
    let s = dir.path().join("s");
    // The same label in two files of one load: two nodes.
    let r1 = BulkLoader::new(&s).load(&[InputSpec::new(&a), InputSpec::new(&b)]).unwrap();
    assert_eq!((r1.new_entities, r1.new_facts), (5, 4));
    // And a third file's `_:b1` in a later load is a third node, labelled on its own.
    let c = write(dir.path(), "c.nt", format!("_:b1 <http://x/r> <http://x/o> .\n_:b1 {label} \"third\" .\n").as_bytes());
    let r2 = BulkLoader::new(&s).load(&[InputSpec::new(&c)]).unwrap();
    assert_eq!((r2.new_entities, r2.new_facts, r2.unused_labels), (1, 1, 0));
    let st = Store::open_read_only(&s).unwrap();
    assert!(st.validate().unwrap().is_ok(), "{:?}", st.validate().unwrap().problems);
    // Key `_:LOAD.INPUT/label`: load and input numbered from 1, as in the store's load records.
    let node = |key: &str| st.entity(st.entity_by_key(key).unwrap().unwrap_or_else(|| panic!("no {key}"))).unwrap().unwrap();
    assert_eq!(node("_:1.1/b1").name, "first");
    assert_eq!(node("_:1.2/b1").name, "_:b1");
    assert_eq!(node("_:1.2/b2").name, "_:b2");
    assert_eq!(node("_:2.1/b1").name, "third");
    assert!(st.entity_by_key("_:b1").unwrap().is_none());
    let o = st.entity_by_key("http://x/o").unwrap().unwrap();
    assert_eq!(st.degree(o, Direction::In).unwrap(), 3, "three distinct blank subjects point at o");
    let b1_of_b = st.entity_by_key("_:1.2/b1").unwrap().unwrap();
    let b2_of_b = st.entity_by_key("_:1.2/b2").unwrap().unwrap();
    let r = st.relation_by_key("http://x/r").unwrap().unwrap();
    assert_eq!(st.neighbors_via(b2_of_b, Direction::Out, r).unwrap(), vec![b1_of_b], "within a file, one label is one node");
}
