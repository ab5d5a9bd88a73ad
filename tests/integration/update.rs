//! Live updates (`trellis update`, `Updater`): a model-based test against an in-memory graph,
//! the CLI's reports and refusals, kill -9 at many moments, readers during updates, and
//! retrievers that move to the new generation and never return a retracted fact.

use crate::common::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::ingest::{Change, FactKeys, IngestError, NameTokenizer, OnError, Updater};
use trellis::linearize::{Linearization, Side};
use trellis::store::tokens::TokenIndex;
use trellis::{Direction, EntityId, Store};

fn fact(s: &str, r: &str, o: &str) -> FactKeys {
    FactKeys { subject: s.into(), relation: r.into(), object: o.into() }
}

fn update(store: &Path, policy: OnError, changes: Vec<Change>) -> Result<trellis::ingest::UpdateReport, IngestError> {
    Updater::new(store).on_error(policy).apply(changes.into_iter().map(|c| (None, c)).collect())
}

/// The in-memory model: live entities by key (name, aliases), facts by keys.
#[derive(Clone, Debug, Default)]
struct Model {
    entities: BTreeMap<String, (String, BTreeSet<String>)>,
    /// Each fact with the loads and updates that assert it (their numbers, from 1).
    facts: BTreeMap<(String, String, String), BTreeSet<u32>>,
    /// The update being applied: its number, and the sources of the committed loads.
    load: u32,
    sources: Vec<Option<String>>,
}

fn fold(s: &str) -> String {
    trellis::normalize::normalize_name(s)
}

impl Model {
    /// Applies one change as the store should; `false`: the store must refuse it.
    fn apply(&mut self, c: &Change) -> bool {
        match c {
            Change::Add(f) => {
                for k in [&f.subject, &f.object] {
                    self.entities.entry(k.clone()).or_insert_with(|| (k.clone(), BTreeSet::new()));
                }
                self.facts.entry((f.subject.clone(), f.relation.clone(), f.object.clone())).or_default().insert(self.load);
                true
            }
            Change::Retract(f) => self.facts.remove(&(f.subject.clone(), f.relation.clone(), f.object.clone())).is_some(),
            Change::RetractSource(name) => {
                let loads: BTreeSet<u32> = self.sources.iter().enumerate().filter(|(_, s)| s.as_deref() == Some(name)).map(|(i, _)| i as u32 + 1).collect();
                if loads.is_empty() {
                    return false;
                }
                for sources in self.facts.values_mut() {
                    sources.retain(|l| !loads.contains(l));
                }
                self.facts.retain(|_, sources| !sources.is_empty());
                true
            }
            Change::DeleteEntity(k) => {
                if self.entities.remove(k).is_none() {
                    return false;
                }
                self.facts.retain(|(s, _, o), _| s != k && o != k);
                true
            }
            Change::Rename { key, name } => {
                let Some(current) = self.entities.get(key).map(|e| e.0.clone()) else { return false };
                if current == *name {
                    return true;
                }
                if self.entities.iter().any(|(k, (n, _))| k != key && fold(n) == fold(name)) {
                    return false;
                }
                self.entities.get_mut(key).unwrap().0 = name.clone();
                true
            }
            Change::Alias { key, alias } => match self.entities.get_mut(key) {
                Some((_, aliases)) => aliases.insert(alias.clone()),
                None => false,
            },
            Change::Unalias { key, alias } => match self.entities.get_mut(key) {
                Some((_, aliases)) => aliases.remove(alias),
                None => false,
            },
            Change::AddFile(_) | Change::RetractFile(_) => unreachable!("not generated"),
        }
    }
}

/// Every read of the store agrees with the model: keys, names, aliases, both adjacency
/// directions, the name index (new names found, old ones not), the token index, validation.
fn check(store: &Path, model: &Model, tokenizer: &NameTokenizer, universe: &[String]) -> Result<(), String> {
    let s = Arc::new(Store::open_read_only(store).map_err(|e| e.to_string())?);
    let report = s.validate().map_err(|e| e.to_string())?;
    if !report.is_ok() {
        return Err(format!("validate: {:?}", report.problems));
    }
    if s.meta().facts != model.facts.len() as u64 {
        return Err(format!("{} facts stored, model has {}", s.meta().facts, model.facts.len()));
    }
    let index = TokenIndex::open(s.clone(), tokenizer.fingerprint(), tokenizer.linearization()).map_err(|e| format!("token index: {e}"))?;
    // The text index the updates kept holds exactly the documents a rebuild would: one per
    // live entity, each as the store now reads.
    let text = trellis::text::TextIndex::open(&s).map_err(|e| format!("text index: {e}"))?;
    let live: Vec<EntityId> = (0..s.entity_count() as u32).map(EntityId).filter(|&e| !s.is_retired(e).unwrap()).collect();
    if text.entities().map_err(|e| e.to_string())? != live {
        return Err(format!("text index documents {:?}, live entities {live:?}", text.entities()));
    }
    for &e in &live {
        let (held, now) = (text.document(e).map_err(|e| e.to_string())?, trellis::text::document(&s, e).map_err(|e| e.to_string())?);
        if held != now {
            return Err(format!("text document of {e:?}: index {held:?}, store {now:?}"));
        }
    }
    for ((subject, relation, object), loads) in &model.facts {
        let (sid, oid) = (s.entity_by_key(subject).unwrap().unwrap(), s.entity_by_key(object).unwrap().unwrap());
        let rid = s.relation_by_key(relation).unwrap().unwrap();
        let stored: BTreeSet<u32> = s.fact_sources(sid, rid, oid).unwrap().into_iter().collect();
        if stored != *loads {
            return Err(format!("{subject} {relation} {object}: asserted by {stored:?}, model {loads:?}"));
        }
    }
    let mut ids = BTreeMap::new();
    for key in universe {
        let id = s.entity_by_key(key).map_err(|e| e.to_string())?;
        match (id, model.entities.get(key)) {
            (None, None) => {}
            (Some(id), Some((name, aliases))) => {
                let rec = s.entity(id).unwrap().unwrap();
                if rec.name != *name {
                    return Err(format!("{key}: named {:?}, model {name:?}", rec.name));
                }
                let stored: BTreeSet<String> = s.aliases(id).unwrap().into_iter().collect();
                if stored != *aliases {
                    return Err(format!("{key}: aliases {stored:?}, model {aliases:?}"));
                }
                let want = tokenizer.encode(Side::Entity, &[name.as_str()]).unwrap().remove(0);
                if index.tokens(Side::Entity, id.0).unwrap() != Some(want) {
                    return Err(format!("{key}: token list is not its name's"));
                }
                ids.insert(key.clone(), id);
            }
            (id, m) => return Err(format!("{key}: store {id:?}, model {m:?}")),
        }
    }
    for (key, id) in &ids {
        let mut seen = BTreeSet::new();
        s.for_each_neighbor(*id, None, None, |edge| {
            let other = s.entity(edge.other).unwrap().unwrap().key;
            let rel = s.relation(edge.relation).unwrap().unwrap().key;
            seen.insert(match edge.direction {
                Direction::Out => (key.clone(), rel, other),
                Direction::In => (other, rel, key.clone()),
            });
            ControlFlow::Continue(())
        })
        .unwrap();
        let want: BTreeSet<_> = model.facts.keys().filter(|(a, _, b)| a == key || b == key).cloned().collect();
        if seen != want {
            return Err(format!("{key}: facts {seen:?}, model {want:?}"));
        }
    }
    // Every name the universe can hold finds exactly the live entities named or aliased so.
    let texts: BTreeSet<String> = universe.iter().cloned().chain(["N0", "N1", "n1", "N2", "A0", "a0", "A1"].map(String::from)).collect();
    for text in texts {
        let found: BTreeSet<EntityId> = s.entities_named(&text).unwrap().into_iter().collect();
        let want: BTreeSet<EntityId> =
            model.entities.iter().filter(|(_, (n, a))| fold(n) == fold(&text) || a.iter().any(|x| fold(x) == fold(&text))).map(|(k, _)| ids[k]).collect();
        if found != want {
            return Err(format!("name {text:?} finds {found:?}, model {want:?}"));
        }
    }
    Ok(())
}

fn change_strategy() -> impl Strategy<Value = Change> {
    // Few keys and relations, so adds often meet stored facts (several sources per fact).
    let key = (0usize..4).prop_map(|i| format!("E{i}"));
    let rel = (0usize..2).prop_map(|i| format!("r{i}"));
    let name = prop::sample::select(vec!["N0", "N1", "n1", "N2"]).prop_map(String::from);
    let alias = prop::sample::select(vec!["A0", "a0", "A1"]).prop_map(String::from);
    prop_oneof![
        4 => (key.clone(), rel.clone(), key.clone()).prop_map(|(s, r, o)| Change::Add(fact(&s, &r, &o))),
        3 => (key.clone(), rel, key.clone()).prop_map(|(s, r, o)| Change::Retract(fact(&s, &r, &o))),
        1 => key.clone().prop_map(Change::DeleteEntity),
        2 => (key.clone(), name).prop_map(|(key, name)| Change::Rename { key, name }),
        1 => (key.clone(), alias.clone()).prop_map(|(key, alias)| Change::Alias { key, alias }),
        1 => (key, alias).prop_map(|(key, alias)| Change::Unalias { key, alias }),
        1 => prop::sample::select(vec!["s1", "s2"]).prop_map(|s| Change::RetractSource(s.into())),
    ]
}

fn base_store(dir: &Path) -> (PathBuf, Model) {
    let store = dir.join("kg");
    let base = write(dir, "base.tsv", b"E0\tr0\tE1\nE1\tr1\tE2\nE2\tr0\tE0\n");
    ingest(&store, &[], &[&base]);
    stdout_of(trellis().arg("index-tokens").arg("--store").arg(&store).arg("--tokenizer").arg(fixture("tokenizer.json")));
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    let mut model = Model { load: 1, ..Model::default() };
    for (s, r, o) in [("E0", "r0", "E1"), ("E1", "r1", "E2"), ("E2", "r0", "E0")] {
        model.apply(&Change::Add(fact(s, r, o)));
    }
    (store, model)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// Random sequences of adds, retracts, deletions, renames and aliases, a few changes per
    /// update: each update in skip mode commits what the model accepts, in strict mode
    /// either all of it or (one refusal) nothing, also when its overlay is written to the new
    /// generation after every change; a cancelled update changes nothing. Every read is
    /// compared with the model after every commit.
    #[test]
    fn updates_match_an_in_memory_model(updates in prop::collection::vec((prop::collection::vec(change_strategy(), 1..5), any::<bool>(), 0u8..8, prop::sample::select(vec![None, Some("s1"), Some("s2")])), 1..7)) {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut model) = base_store(dir.path());
        let tokenizer = NameTokenizer::from_file(&fixture("tokenizer.json"), Linearization::trellis()).unwrap();
        let universe: Vec<String> = (0..6).map(|i| format!("E{i}")).collect();
        for (changes, strict, roll, source) in updates {
            // The update's number and the sources of the loads before it, from the store's records.
            let loads = Store::open_read_only(&store).unwrap().meta().loads.clone();
            model.load = loads.len() as u32 + 1;
            model.sources = loads.iter().map(|l| l.source.clone()).collect();
            let updater = || {
                // Odd rolls write the overlay to the new generation after every change.
                let u = Updater::new(&store);
                let u = if roll % 2 == 1 { u.with_overlay_flush_bytes(1) } else { u };
                match source {
                    Some(name) => u.with_source(name),
                    None => u,
                }
            };
            if roll == 0 {
                // Cancelled before its commit: nothing changes.
                let monitor = trellis::Monitor::new();
                monitor.cancel();
                let r = Updater::new(&store).with_monitor(monitor).apply(changes.iter().cloned().map(|c| (None, c)).collect());
                prop_assert!(matches!(r, Err(IngestError::Cancelled)), "{r:?}");
            } else if strict {
                let mut next = model.clone();
                let accepted = changes.iter().map(|c| next.apply(c)).collect::<Vec<_>>();
                let r = updater().on_error(OnError::Stop).apply(changes.iter().cloned().map(|c| (None, c)).collect());
                if accepted.iter().all(|&a| a) {
                    prop_assert!(r.is_ok(), "{changes:?}: {r:?}");
                    model = next;
                } else {
                    match r {
                        Err(IngestError::UpdateRefused { problems, .. }) => {
                            let refused: Vec<usize> = problems.iter().map(|p| p.origin.index).collect();
                            let want: Vec<usize> = accepted.iter().enumerate().filter(|(_, a)| !**a).map(|(i, _)| i + 1).collect();
                            prop_assert_eq!(refused, want);
                        }
                        other => prop_assert!(false, "{changes:?}: expected a refusal, got {other:?}"),
                    }
                }
            } else {
                let accepted: Vec<bool> = changes.iter().map(|c| model.apply(c)).collect();
                let report = updater().on_error(OnError::Skip).apply(changes.iter().cloned().map(|c| (None, c)).collect()).unwrap();
                let skipped: Vec<usize> = report.skipped.iter().map(|p| p.origin.index).collect();
                let want: Vec<usize> = accepted.iter().enumerate().filter(|(_, a)| !**a).map(|(i, _)| i + 1).collect();
                prop_assert_eq!(skipped, want, "{:?}", changes);
            }
            if let Err(e) = check(&store, &model, &tokenizer, &universe) {
                prop_assert!(false, "after {changes:?}: {e}");
            }
        }
    }
}

#[test]
fn cli_update_applies_a_change_file_and_flags_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let gen_before = stats(&store)["generation"].clone();
    let facts_before = stats(&store)["facts"].as_u64().unwrap();
    write(dir.path(), "add.tsv", b"Happy Gilmore\tstarred_actors\tA New Actor\n");
    let changes = write(
        dir.path(),
        "changes.jsonl",
        br#"{"op": "add_file", "path": "add.tsv"}
{"op": "retract", "subject": "Happy Gilmore", "relation": "has_genre", "object": "Golf"}

{"op": "alias", "entity": "Adam Sandler", "alias": "The Sandman"}
"#,
    );
    let report =
        json_of(trellis().args(["update", "--json", "--store"]).arg(&store).arg("--changes").arg(&changes).args(["--rename", "A New Actor", "Newcomer"]));
    assert_eq!(report["counts"]["applied"], 4);
    assert_eq!(report["counts"]["facts_added"], 1);
    assert_eq!(report["counts"]["facts_retracted"], 1);
    assert_eq!(report["counts"]["renamed"], 1);
    assert_eq!(stats(&store)["facts"].as_u64().unwrap(), facts_before);
    assert_valid(&store);
    let found = stdout_of(trellis().args(["entity", "--store"]).arg(&store).arg("Newcomer"));
    assert!(found.contains("A New Actor"), "{found}");

    // Strict: every refused change listed with its line, nothing committed, exit 65.
    let bad = write(
        dir.path(),
        "bad.jsonl",
        br#"{"op": "retract", "subject": "Happy Gilmore", "relation": "has_genre", "object": "Golf"}
{"op": "delete_entity", "entity": "Nobody At All"}
{"op": "add", "subject": "X", "relation": "r", "object": "Y"}
"#,
    );
    let gen = stats(&store)["generation"].clone();
    let out = trellis().args(["update", "--store"]).arg(&store).arg("--changes").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(65));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 change(s) cannot be applied; nothing was committed"), "{err}");
    assert!(err.contains("bad.jsonl:1: retract Happy Gilmore\thas_genre\tGolf: the store holds no fact"), "{err}");
    assert!(err.contains("bad.jsonl:2: delete entity \"Nobody At All\": no entity has the key \"Nobody At All\""), "{err}");
    assert_eq!(stats(&store)["generation"], gen);
    assert_ne!(gen, gen_before);

    // Skip: the rest is committed, the refused ones listed.
    let report = json_of(trellis().args(["update", "--json", "--on-error", "skip", "--store"]).arg(&store).arg("--changes").arg(&bad));
    assert_eq!(report["counts"]["applied"], 1);
    assert_eq!(report["skipped"].as_array().unwrap().len(), 2);
    assert_eq!(report["skipped"][1]["problem"]["problem"], "unknown_entity");
    assert_valid(&store);

    // A change file line that is not a change names its file and line.
    let broken = write(dir.path(), "broken.jsonl", b"{\"op\": \"rename\", \"entity\": \"X\"}\n");
    let out = trellis().args(["update", "--store"]).arg(&store).arg("--changes").arg(&broken).output().unwrap();
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.jsonl:1: op \"rename\" needs the field \"name\""));
    let typo = write(dir.path(), "typo.jsonl", b"{\"op\": \"alias\", \"entity\": \"X\", \"alais\": \"Y\"}\n");
    let out = trellis().args(["update", "--store"]).arg(&store).arg("--changes").arg(&typo).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("typo.jsonl:1: op \"alias\" has no field \"alais\""));
    // Renaming to another entity's name is refused (it would make the name ambiguous).
    let out = trellis().args(["update", "--store"]).arg(&store).args(["--rename", "A New Actor", "Adam Sandler"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("entity \"Adam Sandler\" is already named \"Adam Sandler\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_valid(&store);
}

/// Updates around one hub (thousands of facts into one entity's list in one update, then
/// retractions and a re-add of a retracted fact in the same update, repeats of stored facts,
/// then a source retracted): the store holds exactly the model's facts and provenance after
/// each; an update whose changes are all refused commits no generation, also when it writes
/// its overlay early after every change. (The speed-up this layout is for is measured by
/// tools/bench/update_hub.sh, not here.)
#[test]
fn updates_around_a_hub_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut model) = base_store(dir.path());
    let tokenizer = NameTokenizer::from_file(&fixture("tokenizer.json"), Linearization::trellis()).unwrap();
    let universe: Vec<String> = ["E0", "E1", "E2", "N0", "N1", "N2", "N3", "N2999"].map(String::from).to_vec();
    let apply = |model: &mut Model, source: Option<&str>, changes: Vec<Change>| {
        let loads = Store::open_read_only(&store).unwrap().meta().loads.clone();
        model.load = loads.len() as u32 + 1;
        model.sources = loads.iter().map(|l| l.source.clone()).collect();
        assert!(changes.iter().all(|c| model.apply(c)));
        // Writes mid-update every few hundred changes: hub lists are read back after them.
        let updater = Updater::new(&store).on_error(OnError::Stop).with_overlay_flush_bytes(64 << 10);
        let updater = match source {
            Some(name) => updater.with_source(name),
            None => updater,
        };
        let report = updater.apply(changes.into_iter().map(|c| (None, c)).collect()).unwrap();
        if let Err(e) = check(&store, model, &tokenizer, &universe) {
            panic!("{e}");
        }
        report
    };
    let mut hub: Vec<Change> = (0..3000).map(|i| Change::Add(fact(&format!("N{i}"), "r0", "E0"))).collect();
    hub.extend((0..100).map(|i| Change::Add(fact("E0", "r1", &format!("N{i}")))));
    let report = apply(&mut model, Some("s1"), hub);
    assert_eq!(report.counts.facts_added, 3100);
    let mut thin: Vec<Change> = (0..3000).step_by(3).map(|i| Change::Retract(fact(&format!("N{i}"), "r0", "E0"))).collect();
    thin.push(Change::Add(fact("N0", "r0", "E0")));
    let report = apply(&mut model, None, thin);
    assert_eq!((report.counts.facts_retracted, report.counts.facts_added), (1000, 1));
    // Repeated facts add nothing but their provenance (this update asserts them too).
    let report = apply(&mut model, None, (1..50).filter(|i| i % 3 != 0).map(|i| Change::Add(fact(&format!("N{i}"), "r0", "E0"))).collect());
    assert_eq!(report.counts.facts_added, 0);
    // Only refused changes: no generation.
    let generation = Store::open_read_only(&store).unwrap().generation();
    for flush_bytes in [256 << 20, 1] {
        // Every term exists, so the refused retraction reads the hub's lists.
        let changes = vec![Change::Retract(fact("N3", "r0", "E0")), Change::Retract(fact("N6", "r0", "E0"))];
        let report =
            Updater::new(&store).on_error(OnError::Skip).with_overlay_flush_bytes(flush_bytes).apply(changes.into_iter().map(|c| (None, c)).collect()).unwrap();
        assert_eq!((report.generation, report.skipped.len()), (None, 2));
        assert_eq!(Store::open_read_only(&store).unwrap().generation(), generation);
    }
    // N0 r0 E0 is asserted by the second update too, so it outlives s1.
    apply(&mut model, None, vec![Change::RetractSource("s1".into())]);
    assert!(model.facts.contains_key(&("N0".into(), "r0".into(), "E0".into())));
}

/// A deleted entity leaves nothing behind: not linked by name or alias, no facts, its key
/// free for a new entity (with a new id); the token index follows.
#[test]
fn a_deleted_entity_is_gone_everywhere_and_its_key_can_return() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = base_store(dir.path());
    update(&store, OnError::Stop, vec![Change::Alias { key: "E1".into(), alias: "Bee".into() }]).unwrap();
    let old = Store::open_read_only(&store).unwrap().entity_by_key("E1").unwrap().unwrap();
    let report = update(&store, OnError::Stop, vec![Change::DeleteEntity("bee".into())]).unwrap();
    assert_eq!(report.counts.entities_deleted, 1);
    assert_eq!(report.counts.facts_retracted, 2);
    let s = Store::open_read_only(&store).unwrap();
    assert!(s.is_retired(old).unwrap());
    assert!(s.entity_by_key("E1").unwrap().is_none());
    assert!(s.entities_named("Bee").unwrap().is_empty() && s.entities_named("E1").unwrap().is_empty());
    assert_eq!(s.meta().facts, 1);
    drop(s);
    update(&store, OnError::Stop, vec![Change::Add(fact("E1", "r0", "E0"))]).unwrap();
    let s = Store::open_read_only(&store).unwrap();
    let new = s.entity_by_key("E1").unwrap().unwrap();
    assert_ne!(new, old);
    assert!(s.validate().unwrap().is_ok(), "{:?}", s.validate().unwrap().problems);
}

/// kill -9 of `trellis update` at many moments: the store opens, validates and holds the
/// state before the update or after it, never between.
#[test]
fn killed_updates_leave_old_or_new_state() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    ingest(&base, &["--on-error", "skip"], &[&shared_data("opendialkg/kg.tsv")]);
    // With a text index: the update rewrites ~40,000 documents, all or none with the rest.
    stdout_of(trellis().arg("index-text").arg("--store").arg(&base));
    let before = stats(&base)["facts"].as_u64().unwrap();
    // 20,000 new facts and 2,000 retractions of stored ones in one change file.
    let mut lines = String::new();
    for i in 0..20_000 {
        lines.push_str(&format!("{{\"op\": \"add\", \"subject\": \"New {i}\", \"relation\": \"knows\", \"object\": \"New {}\"}}\n", i + 1));
    }
    let kg = std::fs::read_to_string(shared_data("opendialkg/kg.tsv")).unwrap();
    let mut retracted = BTreeSet::new();
    for line in kg.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() == 3
            && cols.iter().all(|c| !c.trim().is_empty())
            && !cols[1].starts_with('~')
            && retracted.insert((cols[0], cols[1], cols[2]))
            && retracted.len() == 2000
        {
            break;
        }
    }
    for (s, r, o) in &retracted {
        lines.push_str(&serde_json::json!({"op": "retract", "subject": s, "relation": r, "object": o}).to_string());
        lines.push('\n');
    }
    let changes = write(dir.path(), "changes.jsonl", lines.as_bytes());
    let after = before + 20_000 - 2_000;
    let mut killed = 0;
    for (i, ms) in [5u64, 40, 120, 250, 400, 700, 1000].into_iter().enumerate() {
        let store = dir.path().join(format!("s{i}"));
        copy_dir(&base, &store);
        let mut child = std::process::Command::new(bin_path())
            .args(["update", "--store"])
            .arg(&store)
            .arg("--changes")
            .arg(&changes)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(ms));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            killed += 1;
        }
        child.wait().unwrap();
        assert_valid(&store);
        let text = json_of(trellis().arg("validate").arg("--store").arg(&store).arg("--json"))["text_index"].clone();
        assert!(text["ok"] == true && text["status"].as_str().unwrap().ends_with("one per live entity"), "killed after {ms} ms: {text}");
        let facts = stats(&store)["facts"].as_u64().unwrap();
        assert!(facts == before || facts == after, "killed after {ms} ms: {facts} facts, expected {before} or {after}");
        // The update runs again (when it had not committed) and completes.
        if facts == before {
            stdout_of(trellis().args(["update", "--store"]).arg(&store).arg("--changes").arg(&changes));
        }
        assert_eq!(stats(&store)["facts"].as_u64().unwrap(), after);
        std::fs::remove_dir_all(&store).unwrap();
    }
    assert!(killed >= 2, "only {killed} updates were killed before finishing");
}

/// Readers that open the store again and again while 1,000 updates each move one fact
/// (retract `Token -at-> P(i)`, add `Token -at-> P(i+1)`) only ever see committed states:
/// exactly one position, a valid count of facts, a generation that never goes back.
#[test]
fn readers_during_a_thousand_updates_see_only_committed_states() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    let base = write(dir.path(), "base.tsv", b"Token\tat\tP0\nAnchor\tholds\tToken\n");
    ingest(&store, &[], &[&base]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || -> Result<usize, String> {
                let mut reads = 0;
                let mut last_gen = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let s = Store::open_read_only(&store).map_err(|e| e.to_string())?;
                    if s.generation() < last_gen {
                        return Err(format!("generation went back from {last_gen} to {}", s.generation()));
                    }
                    last_gen = s.generation();
                    let token = s.entity_by_key("Token").unwrap().unwrap();
                    let mut at = Vec::new();
                    s.for_each_neighbor(token, Some(Direction::Out), None, |e| {
                        at.push(e.other);
                        ControlFlow::Continue(())
                    })
                    .map_err(|e| e.to_string())?;
                    if at.len() != 1 || s.meta().facts != 2 || s.degree(token, Direction::Out).unwrap() != 1 {
                        return Err(format!("generation {}: Token at {at:?}, {} facts", s.generation(), s.meta().facts));
                    }
                    reads += 1;
                }
                Ok(reads)
            })
        })
        .collect();
    for i in 0..1000 {
        update(&store, OnError::Stop, vec![Change::Retract(fact("Token", "at", &format!("P{i}"))), Change::Add(fact("Token", "at", &format!("P{}", i + 1)))])
            .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        let reads = r.join().unwrap().unwrap();
        assert!(reads > 0);
    }
    assert_valid(&store);
    // Old generations are retired once no reader holds them: the next writer finds none held.
    update(&store, OnError::Stop, vec![Change::Alias { key: "Token".into(), alias: "The Token".into() }]).unwrap();
    let gens = std::fs::read_dir(&store).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("gen-")).count();
    assert_eq!(gens, 1);
}

type Fact = (String, String, String);

/// The facts of a retriever's answer, by key.
fn answer_facts(store: &Store, paths: &[trellis::retrieve::ScoredPath]) -> BTreeSet<Fact> {
    let key = |e: EntityId| store.entity(e).unwrap().unwrap().key;
    let mut out = BTreeSet::new();
    for p in paths {
        for h in &p.hops {
            let r = store.relation(h.edge.relation).unwrap().unwrap().key;
            out.insert(match h.edge.direction {
                Direction::Out => (key(h.from), r, key(h.edge.other)),
                Direction::In => (key(h.edge.other), r, key(h.from)),
            });
        }
    }
    out
}

type Summary = Vec<(Vec<(u32, u32, u32)>, String)>;

fn summary(paths: &[trellis::retrieve::ScoredPath]) -> Summary {
    paths.iter().map(|p| (p.hops.iter().map(|h| (h.from.0, h.edge.relation.0, h.edge.other.0)).collect(), format!("{:.6}", p.score))).collect()
}

/// Retract the facts of every retriever's top paths: a retriever keeps answering from its
/// generation until it moves (`refreshed`), and then no answer of all, bm25, pcst or gsr
/// (whose constrained decoder writes paths token by token) holds a retracted fact; added
/// back, the answers are the ones before, without retraining anything.
#[test]
fn retrievers_follow_updates_and_never_return_a_retracted_fact() {
    use trellis::link::Message;
    use trellis::retrieve::gsr::GsrOptions;
    use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
    let dir = tempfile::tempdir().unwrap();
    let path = crate::gsr::sample_store(dir.path());
    let store = Arc::new(Store::open_read_only(&path).unwrap());
    let history = vec![
        Message { speaker: "user".into(), text: "I loved Happy Gilmore.".into() },
        Message { speaker: "assistant".into(), text: "Me too, Adam Sandler is so funny. Do you like him?".into() },
    ];
    let mut gsr = GsrOptions::new(fixture("gsr/tiny-split"));
    gsr.runtime.threads = 1;
    let kinds = [RetrieverKind::All, RetrieverKind::Bm25, RetrieverKind::Pcst, RetrieverKind::Gsr(gsr)];
    let retrievers: Vec<Retriever> = kinds.into_iter().map(|k| Retriever::new(store.clone(), RetrieverConfig::new(k)).unwrap()).collect();
    let before: Vec<_> = retrievers.iter().map(|r| r.retrieve(&history).unwrap()).collect();
    let mut retract: BTreeSet<Fact> = BTreeSet::new();
    for answer in &before {
        assert!(!answer.is_empty());
        retract.extend(answer_facts(&store, &answer[..answer.len().min(3)]));
    }
    let as_changes =
        |add: bool| -> Vec<Change> { retract.iter().map(|(s, r, o)| if add { Change::Add(fact(s, r, o)) } else { Change::Retract(fact(s, r, o)) }).collect() };
    update(&path, OnError::Stop, as_changes(false)).unwrap();
    let mut moved = Vec::new();
    for (r, b) in retrievers.iter().zip(&before) {
        // Still on its generation: the same answer.
        assert_eq!(summary(&r.retrieve(&history).unwrap()), summary(b));
        let next = r.refreshed().unwrap().expect("a newer generation");
        let answer = next.retrieve(&history).unwrap();
        let held = answer_facts(&store, &answer);
        assert!(held.is_disjoint(&retract), "{}: retracted facts answered: {:?}", kind_name(r), held.intersection(&retract).collect::<Vec<_>>());
        assert!(next.refreshed().unwrap().is_none());
        moved.push(next);
    }
    update(&path, OnError::Stop, as_changes(true)).unwrap();
    for (r, b) in moved.iter().zip(&before) {
        let back = r.refreshed().unwrap().expect("a newer generation");
        assert_eq!(summary(&back.retrieve(&history).unwrap()), summary(b), "{}", kind_name(r));
    }
}

fn kind_name(r: &trellis::retrieve::Retriever) -> &'static str {
    if r.generative().is_some() {
        "gsr"
    } else {
        "a retriever"
    }
}

/// An added file's aliases and labels name the entities the file adds whatever the order of
/// its lines (as a load does); refusals of a fact file name the right line past blank
/// lines and comments.
#[test]
fn fact_files_apply_names_after_facts_and_refusals_name_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = base_store(dir.path());
    let nt = write(
        dir.path(),
        "add.nt",
        b"<http://x/n1> <http://www.w3.org/2004/02/skos/core#altLabel> \"Newish\" .\n<http://x/n1> <http://www.w3.org/2000/01/rdf-schema#label> \"New One\"@en .\n<http://x/n1> <http://x/p> <http://x/n2> .\n",
    );
    update(&store, OnError::Stop, vec![Change::AddFile(trellis::InputSpec::new(&nt))]).unwrap();
    let s = Store::open_read_only(&store).unwrap();
    let n1 = s.entity_by_key("http://x/n1").unwrap().unwrap();
    assert_eq!(s.entity(n1).unwrap().unwrap().name, "New One");
    assert_eq!(s.aliases(n1).unwrap(), vec!["Newish".to_string()]);
    assert_eq!(s.entities_named("newish").unwrap(), vec![n1]);
    drop(s);
    let retract = write(dir.path(), "retract.tsv", b"\n\nE0\tr0\tE1\n\n\nE0\tr9\tE1\n");
    let err = update(&store, OnError::Stop, vec![Change::RetractFile(trellis::InputSpec::new(&retract))]).unwrap_err().to_string();
    assert!(err.contains("retract.tsv:6: retract E0\tr9\tE1: the store holds no fact"), "{err}");
    assert!(!err.contains("retract.tsv:3"), "{err}");
    let nt =
        write(dir.path(), "retract.nt", b"# a comment\n<http://x/n1> <http://x/p> <http://x/n2> .\n\n# another\n<http://x/n1> <http://x/q> <http://x/n2> .\n");
    let err = update(&store, OnError::Stop, vec![Change::RetractFile(trellis::InputSpec::new(&nt))]).unwrap_err().to_string();
    assert!(err.contains("retract.nt:5: retract http://x/n1\thttp://x/q\thttp://x/n2: the store holds no fact"), "{err}");
}

/// A token index built before format 4 (no stored tokenizer) goes stale at the first update
/// that changes the dictionaries, and a store with retired entities and such an index still
/// validates.
#[test]
fn a_stale_token_index_and_retired_entities_validate() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = base_store(dir.path());
    forget_stored_tokenizers(&store);
    let report = update(&store, OnError::Stop, vec![Change::DeleteEntity("E2".into())]).unwrap();
    assert_eq!(report.token_indexes.stale.len(), 1);
    let s = Store::open_read_only(&store).unwrap();
    let v = s.validate().unwrap();
    assert!(v.is_ok(), "{:?}", v.problems);
    assert_eq!(v.retired, 1);
}

/// Provenance, worked by hand: a fact two sources assert survives the retraction of one;
/// a fact only the retracted source asserts goes; `fact_sources` and `source_name` say who
/// asserts what; an unknown source is refused.
#[test]
fn retracting_a_source_keeps_what_another_source_asserts() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = base_store(dir.path());
    let with = |name: &str, changes: Vec<Change>| Updater::new(&store).with_source(name).apply(changes.into_iter().map(|c| (None, c)).collect()).unwrap();
    with("feed", vec![Change::Add(fact("E0", "r0", "E1")), Change::Add(fact("E0", "r0", "E3"))]);
    let s = Store::open_read_only(&store).unwrap();
    let ids: BTreeMap<&str, EntityId> = ["E0", "E1", "E3"].into_iter().map(|k| (k, s.entity_by_key(k).unwrap().unwrap())).collect();
    let id = |k: &str| ids[k];
    let r0 = s.relation_by_key("r0").unwrap().unwrap();
    // Load 1 made the store (index-tokens commits a generation, not a load); the feed is 2.
    assert_eq!(s.fact_sources(id("E0"), r0, id("E1")).unwrap(), vec![1, 2]);
    assert_eq!(s.fact_sources(id("E0"), r0, id("E3")).unwrap(), vec![2]);
    assert_eq!((s.source_name(1), s.source_name(2), s.source_name(0)), ("load 1".to_string(), "feed".to_string(), "before format 4".to_string()));
    drop(s);
    let report = update(&store, OnError::Stop, vec![Change::RetractSource("feed".into())]).unwrap();
    assert_eq!(report.counts.facts_retracted, 1);
    let s = Store::open_read_only(&store).unwrap();
    assert_eq!(s.fact_sources(id("E0"), r0, id("E1")).unwrap(), vec![1]);
    assert!(s.fact_sources(id("E0"), r0, id("E3")).unwrap().is_empty());
    assert_eq!(s.meta().facts, 3);
    assert!(s.validate().unwrap().is_ok(), "{:?}", s.validate().unwrap().problems);
    drop(s);
    let err = update(&store, OnError::Stop, vec![Change::RetractSource("nobody".into())]).unwrap_err().to_string();
    assert!(err.contains("no load or update has the source \"nobody\""), "{err}");
}

/// `Live` under `Auto` hands out the retriever of the newest generation after a commit;
/// under `Manual` only once asked.
#[test]
fn live_handles_follow_the_store_by_their_policy() {
    use trellis::link::Message;
    use trellis::pipeline::live::{Live, RefreshPolicy};
    use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = base_store(dir.path());
    update(&store, OnError::Stop, vec![Change::Add(fact("Gamma Ray", "r0", "E0"))]).unwrap();
    let open = || Retriever::new(Arc::new(Store::open_read_only(&store).unwrap()), RetrieverConfig::new(RetrieverKind::All)).unwrap();
    let (auto, manual) = (Live::new(open(), RefreshPolicy::Auto), Live::new(open(), RefreshPolicy::Manual));
    let history = vec![Message { speaker: "user".into(), text: "Tell me about Gamma Ray".into() }];
    let count = |live: &Live<Retriever>| live.current().unwrap().retrieve(&history).unwrap().len();
    assert_eq!((count(&auto), count(&manual)), (count(&manual), count(&auto)));
    let before = count(&manual);
    assert!(before > 0);
    update(&store, OnError::Stop, vec![Change::Add(fact("Gamma Ray", "r1", "Delta Force"))]).unwrap();
    assert!(count(&auto) > before);
    assert_eq!(count(&manual), before);
    assert!(manual.refresh().unwrap());
    assert_eq!(count(&manual), count(&auto));
    assert_eq!("auto".parse::<RefreshPolicy>().unwrap(), RefreshPolicy::Auto);
    assert!("sometimes".parse::<RefreshPolicy>().unwrap_err().to_string().contains("refresh policy"));
}
