//! The token index: names in linearization context (both presets, every position), the trie
//! cursor and batched reads against a brute-force model, several tokenizers side by side,
//! refusals of stale indexes and of other linearizations, the format-2 migration.

use crate::common::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::sync::Arc;
use trellis::ingest::NameTokenizer;
use trellis::linearize::{HopText, Linearization, Side};
use trellis::store::tokens::{StaleReason, TokenIndex, TokenIndexError, Within};
use trellis::Store;

fn tokenizer() -> NameTokenizer {
    tokenizer_with(Linearization::trellis())
}

fn tokenizer_with(lin: Linearization) -> NameTokenizer {
    NameTokenizer::from_file(&fixture("tokenizer.json"), lin).unwrap()
}

fn open_index(store: &Arc<Store>, tok: &NameTokenizer) -> TokenIndex {
    TokenIndex::open(store.clone(), tok.fingerprint(), tok.linearization()).unwrap()
}

fn open_err(store: &Arc<Store>, tok: &NameTokenizer) -> String {
    TokenIndex::open(store.clone(), tok.fingerprint(), tok.linearization()).err().expect("refused").to_string()
}

fn index_tokens_cli(store: &std::path::Path, linearization: &str) -> String {
    stdout_of(
        trellis().arg("index-tokens").arg("--store").arg(store).arg("--tokenizer").arg(fixture("tokenizer.json")).arg("--linearization").arg(linearization),
    )
}

fn indexed_sample(dir: &std::path::Path) -> std::path::PathBuf {
    let s = dir.join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let out = stdout_of(trellis().arg("index-tokens").arg("--store").arg(&s).arg("--tokenizer").arg(fixture("tokenizer.json")));
    assert!(out.contains("indexed 1255 entity and 66 relation names"), "{out}");
    s
}

/// Ids strictly between the first `open` and the next `close` special token.
fn between(ids: &[u32], open: u32, close: u32) -> Vec<u32> {
    let s = ids.iter().position(|&t| t == open).unwrap();
    let e = s + 1 + ids[s + 1..].iter().position(|&t| t == close).unwrap();
    ids[s + 1..e].to_vec()
}

#[test]
fn names_have_the_ids_they_have_inside_a_linearized_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = indexed_sample(dir.path());
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let tok = tokenizer();
    let index = open_index(&store, &tok);
    // The tokenizer itself, loaded apart from Trellis.
    let raw = tokenizers::Tokenizer::from_file(fixture("tokenizer.json")).unwrap();
    let id = |t: &str| raw.token_to_id(t).unwrap();
    // A whole two-hop path, encoded by the tokenizer itself as the retriever would write it.
    let path = "[Head] jordan spieth [Int1] sport played [Int2] golf [Int3] parent genre [Int4] sports game [Tail]";
    let ids = raw.encode(path, false).unwrap().get_ids().to_vec();
    let entity = |key: &str| index.tokens(Side::Entity, store.entity_by_key(key).unwrap().unwrap().0).unwrap().unwrap();
    let relation = |key: &str| index.tokens(Side::Relation, store.relation_by_key(key).unwrap().unwrap().0).unwrap().unwrap();
    assert_eq!(entity("Jordan Spieth"), between(&ids, id("[Head]"), id("[Int1]")));
    assert_eq!(relation("Sport played"), between(&ids, id("[Int1]"), id("[Int2]")));
    assert_eq!(entity("Golf"), between(&ids, id("[Int2]"), id("[Int3]")));
    assert_eq!(relation("Parent genre"), between(&ids, id("[Int3]"), id("[Int4]")));
    assert_eq!(entity("Sports game"), between(&ids, id("[Int4]"), id("[Tail]")));
    // Alone, this T5-style tokenizer writes the name without the `▁` that the space before
    // the next boundary token adds inside a path: the context form is the right one.
    let alone = raw.encode("jordan spieth", false).unwrap().get_ids().to_vec();
    assert_eq!(entity("Jordan Spieth")[..alone.len()], alone[..]);
    assert_eq!(entity("Jordan Spieth").len(), alone.len() + 1);
    // The trie walks from the root to the name and finds it there.
    let tokens = entity("Jordan Spieth");
    for n in 0..tokens.len() {
        assert!(index.children(Side::Entity, &tokens[..n]).unwrap().contains(&tokens[n]));
    }
    let spieth = store.entity_by_key("Jordan Spieth").unwrap().unwrap().0;
    assert!(index.complete(Side::Entity, &tokens).unwrap().contains(&spieth));
    assert!(store.validate().unwrap().is_ok());
}

#[test]
fn other_tokenizers_are_refused_then_indexed_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let s = indexed_sample(dir.path());
    // A second vocabulary: the same model with one piece's score changed.
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("tokenizer.json")).unwrap()).unwrap();
    json["model"]["vocab"][10][1] = serde_json::json!(-1.0);
    let other_path = write(dir.path(), "other.json", json.to_string().as_bytes());
    let other = NameTokenizer::from_file(&other_path, Linearization::trellis()).unwrap();
    assert_ne!(other.fingerprint(), tokenizer().fingerprint());
    {
        let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
        let err = open_err(&store, &other);
        assert!(err.contains(&format!("no token index for the tokenizer with fingerprint {:016x}", other.fingerprint())), "{err}");
        assert!(err.contains("(tokenizer.json)"), "{err}");
    }
    stdout_of(trellis().arg("index-tokens").arg("--store").arg(&s).arg("--tokenizer").arg(&other_path).arg("--name").arg("generator"));
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let names: BTreeSet<String> = store.tokenizers().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, BTreeSet::from(["generator".to_string(), "tokenizer.json".to_string()]));
    open_index(&store, &tokenizer());
    open_index(&store, &other);
    assert!(store.validate().unwrap().is_ok(), "{:?}", store.validate().unwrap().problems);
    drop(store);
    // A later load keeps both indexes current: its new names are encoded with each.
    let more = write(dir.path(), "more.tsv", b"Somebody New\tknows\tJordan Spieth\n");
    let report = ingest(&s, &[], &[&more]);
    assert_eq!(report["token_indexes"]["updated"].as_array().unwrap().len(), 2, "{report}");
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let index = open_index(&store, &other);
    let new = store.entity_by_key("Somebody New").unwrap().unwrap();
    assert_eq!(index.tokens(Side::Entity, new.0).unwrap(), Some(other.encode(Side::Entity, &["Somebody New"]).unwrap().remove(0)));
    assert!(store.validate().unwrap().is_ok(), "{:?}", store.validate().unwrap().problems);
    drop(store);
    // An index without its stored tokenizer (built before format 4) goes stale, said plainly.
    forget_stored_tokenizers(&s);
    let report = ingest(&s, &[], &[&write(dir.path(), "more2.tsv", b"Somebody Else\tknows\tJordan Spieth\n")]);
    assert_eq!(report["token_indexes"]["stale"].as_array().unwrap().len(), 2, "{report}");
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let err = open_err(&store, &other);
    assert!(err.contains("it covers 1256 entities and 67 relations, the store now has 1257 and 67; it needs building again"), "{err}");
    assert!(!err.contains("trellis index-tokens"), "the library names no command: {err}");
    // A tokenizer without the boundary tokens cannot index.
    let mut plain = json.clone();
    plain["added_tokens"] = serde_json::json!([]);
    let plain_path = write(dir.path(), "plain.json", plain.to_string().as_bytes());
    trellis()
        .arg("index-tokens")
        .arg("--store")
        .arg(&s)
        .arg("--tokenizer")
        .arg(&plain_path)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("the tokenizer has no token \"[Head]\"; it is needed for the Head boundary of linearization \"trellis\""));
}

/// Ids strictly between the first occurrence of the `open` sequence and the next `close`.
fn between_seq(ids: &[u32], open: &[u32], close: &[u32]) -> Vec<u32> {
    let s = ids.windows(open.len()).position(|w| w == open).unwrap() + open.len();
    let e = s + ids[s..].windows(close.len()).position(|w| w == close).unwrap();
    ids[s..e].to_vec()
}

fn sample_names(store: &Store) -> (Vec<String>, Vec<String>) {
    let es = (0..store.entity_count() as u32).map(|i| store.entity(trellis::EntityId(i)).unwrap().unwrap().name).collect();
    let rs = (0..store.relation_count() as u32).map(|i| store.relation(trellis::RelationId(i)).unwrap().unwrap().name).collect();
    (es, rs)
}

#[test]
fn every_position_writes_a_name_with_the_same_ids_in_both_presets() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    for lin in [Linearization::trellis(), Linearization::dialoggsr()] {
        // One index per tokenizer: indexing with another linearization replaces it.
        let out = index_tokens_cli(&s, &lin.name);
        assert!(out.contains(&format!("linearization {}", lin.name)), "{out}");
        let store = Arc::new(Store::open_read_only(&s).unwrap());
        let (es, rs) = sample_names(&store);
        let tok = tokenizer_with(lin.clone());
        // Every sample name, at every entity (relation) position: 10 (4) slots each.
        tok.check_position_independent(Side::Entity, &es.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        tok.check_position_independent(Side::Relation, &rs.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        // And inside whole rendered paths, reversed hops included, the ids are the index's.
        let raw = tokenizers::Tokenizer::from_file(fixture("tokenizer.json")).unwrap();
        let ids_of = |b: &[String]| b.iter().map(|t| raw.token_to_id(t).unwrap()).collect::<Vec<u32>>();
        let hops = [HopText { relation: "Sport played", reversed: true, to: "Golf" }, HopText { relation: "Parent_genre", reversed: false, to: "Sports game" }];
        let text = lin.render_path("Jordan Spieth", &hops).unwrap();
        let ids = raw.encode(text.as_str(), false).unwrap().get_ids().to_vec();
        let index = TokenIndex::open(store.clone(), tok.fingerprint(), &lin).unwrap();
        let entity = |key: &str| index.tokens(Side::Entity, store.entity_by_key(key).unwrap().unwrap().0).unwrap().unwrap();
        let relation = |key: &str| index.tokens(Side::Relation, store.relation_by_key(key).unwrap().unwrap().0).unwrap().unwrap();
        use trellis::linearize::Position::*;
        let b = |p| ids_of(lin.boundary(p));
        assert_eq!(entity("Jordan Spieth"), between_seq(&ids, &b(Head), &b(Rev(1))), "{text}");
        assert_eq!(relation("Sport played"), between_seq(&ids, &b(Rev(1)), &b(Rev(2))), "{text}");
        assert_eq!(entity("Golf"), between_seq(&ids, &b(Rev(2)), &b(Int(3))), "{text}");
        assert_eq!(relation("Parent genre"), between_seq(&ids, &b(Int(3)), &b(Int(4))), "{text}");
        assert_eq!(entity("Sports game"), between_seq(&ids, &b(Int(4)), &b(Tail)), "{text}");
        assert_eq!(index.info().linearization, lin);
    }
}

#[test]
fn an_index_built_with_another_linearization_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = indexed_sample(dir.path());
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let err = open_err(&store, &tokenizer_with(Linearization::dialoggsr()));
    assert!(err.contains(&format!("was built with linearization trellis ({}), not dialoggsr", Linearization::trellis().fingerprint_hex())), "{err}");
    assert!(!err.contains("trellis index-tokens"), "the library names no command: {err}");
    let typed = TokenIndex::open(store.clone(), tokenizer().fingerprint(), &Linearization::dialoggsr()).err().expect("refused");
    assert!(matches!(typed, TokenIndexError::Linearization { wanted: "dialoggsr", .. }), "{typed:?}");
    drop(store);
    // A linearization from a file: case kept, so the index differs and says so.
    let mut lin = Linearization::trellis();
    lin.name = "cased".into();
    lin.lowercase = false;
    let file = write(dir.path(), "cased.json", serde_json::to_string(&lin).unwrap().as_bytes());
    let out =
        stdout_of(trellis().arg("index-tokens").arg("--store").arg(&s).arg("--tokenizer").arg(fixture("tokenizer.json")).arg("--linearization").arg(&file));
    assert!(out.contains(&format!("linearization cased ({})", lin.fingerprint_hex())), "{out}");
    // --json: the record, with what the index was built from.
    let record = json_of(
        trellis().arg("index-tokens").arg("--store").arg(&s).arg("--tokenizer").arg(fixture("tokenizer.json")).arg("--linearization").arg(&file).arg("--json"),
    );
    assert_eq!(record["linearization_fingerprint"], lin.fingerprint_hex());
    assert_eq!(record["linearization"]["lowercase"], false);
    assert_eq!((record["entities"].as_u64(), record["relations"].as_u64(), record["dictionary_epoch"].as_u64()), (Some(1255), Some(66), Some(1)));
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let err = open_err(&store, &tokenizer());
    assert!(err.ends_with(&format!("was built with linearization cased ({}), not trellis", lin.fingerprint_hex())), "{err}");
    let index = open_index(&store, &tokenizer_with(lin.clone()));
    let spieth = store.entity_by_key("Jordan Spieth").unwrap().unwrap().0;
    let cased = tokenizer_with(lin).encode(Side::Entity, &["Jordan Spieth"]).unwrap().remove(0);
    assert_eq!(index.tokens(Side::Entity, spieth).unwrap().unwrap(), cased);
    assert_ne!(cased, tokenizer().encode(Side::Entity, &["Jordan Spieth"]).unwrap().remove(0));
    // A malformed file is refused by the CLI with its path.
    let bad = write(dir.path(), "bad.json", b"{\"name\": \"x\"}");
    trellis()
        .arg("index-tokens")
        .arg("--store")
        .arg(&s)
        .arg("--tokenizer")
        .arg(fixture("tokenizer.json"))
        .arg("--linearization")
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(format!("{}: not a linearization", bad.display())));
}

const FACTS_NT: &str = "<http://x/m.1> <http://x/knows> <http://x/m.2> .\n<http://x/m.2> <http://x/plays> <http://x/golf> .\n";

/// Defect 3: a load that only adds labels renames entities, the counts stay, and the index
/// built before it was accepted with the old names' tokens.
#[test]
fn a_labels_only_load_renames_and_the_index_follows_or_says_it_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&write(dir.path(), "facts.nt", FACTS_NT.as_bytes())]);
    index_tokens_cli(&s, "trellis");
    // With the tokenizer stored (format 4), the load encodes the renamed entity again.
    let labels = write(dir.path(), "labels.nt", b"<http://x/m.1> <http://www.w3.org/2000/01/rdf-schema#label> \"Jordan Spieth\"@en .\n");
    ingest(&s, &[], &[&labels]);
    {
        let store = Arc::new(Store::open_read_only(&s).unwrap());
        let m1 = store.entity_by_key("http://x/m.1").unwrap().unwrap();
        let index = open_index(&store, &tokenizer());
        assert_eq!(index.tokens(Side::Entity, m1.0).unwrap().unwrap(), tokenizer().encode(Side::Entity, &["Jordan Spieth"]).unwrap()[0]);
    }
    // Without it (an index built before format 4), the same kind of load makes it stale.
    forget_stored_tokenizers(&s);
    let labels = write(dir.path(), "labels2.nt", b"<http://x/m.2> <http://www.w3.org/2000/01/rdf-schema#label> \"Golf\"@en .\n");
    ingest(&s, &[], &[&labels]);
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let m1 = store.entity_by_key("http://x/m.1").unwrap().unwrap();
    assert_eq!(store.entity(m1).unwrap().unwrap().name, "Jordan Spieth", "the label renamed the entity");
    assert_eq!((store.meta().entities, store.meta().relations), (3, 2), "same counts as when indexed");
    let err = open_err(&store, &tokenizer());
    assert!(err.contains("is stale: names were changed by a load since it was built"), "{err}");
    // Callers can tell why without reading the message.
    let typed = TokenIndex::open(store.clone(), tokenizer().fingerprint(), &Linearization::trellis()).err().expect("refused");
    assert!(matches!(typed, TokenIndexError::Stale { reason: StaleReason::Renamed { indexed_epoch, epoch }, .. } if epoch > indexed_epoch), "{typed:?}");
    assert!(err.ends_with("; it needs building again"), "{err}");
    // A caller that knows the tokenizer file (the retriever: its model's) records it, for the
    // command line to name in the command it suggests (gsr.rs checks that command).
    let file = std::path::Path::new("/m/it's here/tokenizer.json");
    let named = typed.with_tokenizer(file);
    assert!(matches!(&named, TokenIndexError::Stale { tokenizer: Some(t), .. } if t.as_path() == file), "{named:?}");
    drop(store);
    // Indexing again fixes it, with the new name's tokens.
    index_tokens_cli(&s, "trellis");
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let index = open_index(&store, &tokenizer());
    assert_eq!(index.tokens(Side::Entity, m1.0).unwrap().unwrap(), tokenizer().encode(Side::Entity, &["Jordan Spieth"]).unwrap()[0]);
    assert!(store.validate().unwrap().is_ok());
}

#[test]
fn a_load_of_facts_between_known_entities_keeps_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&write(dir.path(), "facts.nt", FACTS_NT.as_bytes())]);
    index_tokens_cli(&s, "trellis");
    let more = write(dir.path(), "more.nt", b"<http://x/golf> <http://x/knows> <http://x/m.1> .\n");
    let report = ingest(&s, &[], &[&more]);
    assert_eq!(report["new_facts"], 1, "{report}");
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    assert_eq!(store.meta().facts, 3);
    open_index(&store, &tokenizer());
}

#[test]
fn token_index_is_shared_by_threads() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<TokenIndex>();
}

/// `tests/fixtures/stores/v2-sample-tokens`: the sample, indexed by a format-2 build (its
/// record has no dictionary epoch, so it cannot be trusted): migration removes it.
#[test]
fn migrating_format_2_removes_its_token_index() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("v2");
    copy_dir(&fixture("stores/v2-sample-tokens"), &copy);
    let out = stdout_of(trellis().arg("migrate").arg("--store").arg(&copy));
    assert!(out.contains("step 1 of 2: add the dictionary epoch to meta; remove format-2 token indexes"), "{out}");
    let store = Arc::new(Store::open_read_only(&copy).unwrap());
    assert_eq!(store.meta().format_version, 4);
    assert_eq!(store.meta().dictionary_epoch, 0);
    assert!(store.tokenizers().unwrap().is_empty());
    assert!(store.validate().unwrap().is_ok(), "{:?}", store.validate().unwrap().problems);
    assert!(open_err(&store, &tokenizer()).contains("no token index for the tokenizer"));
    drop(store);
    index_tokens_cli(&copy, "trellis");
    let store = Arc::new(Store::open_read_only(&copy).unwrap());
    let index = open_index(&store, &tokenizer());
    let golf = store.entity_by_key("Golf").unwrap().unwrap().0;
    assert!(index.tokens(Side::Entity, golf).unwrap().is_some());
}

/// `tests/fixtures/stores/v3-sample-tokens`: the sample, indexed by a format-3 build (no stored
/// tokenizer). Migrated, its index still opens; an update that changes the dictionaries
/// leaves it stale and says so; indexed again, updates keep it current.
#[test]
fn migrating_format_3_keeps_its_token_index() {
    use trellis::ingest::{Change, Updater};
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("v3");
    copy_dir(&fixture("stores/v3-sample-tokens"), &copy);
    let out = stdout_of(trellis().arg("migrate").arg("--store").arg(&copy));
    assert!(out.contains("step 1 of 1: add the column families of live updates"), "{out}");
    let store = Arc::new(Store::open_read_only(&copy).unwrap());
    assert_eq!(store.meta().format_version, 4);
    assert!(store.validate().unwrap().is_ok(), "{:?}", store.validate().unwrap().problems);
    open_index(&store, &tokenizer());
    drop(store);
    let rename = || vec![(None, Change::Rename { key: "Golf".into(), name: "Golf (sport)".into() })];
    let report = Updater::new(&copy).apply(rename()).unwrap();
    assert_eq!(report.token_indexes.stale.len(), 1, "{:?}", report.token_indexes);
    let store = Arc::new(Store::open_read_only(&copy).unwrap());
    assert!(open_err(&store, &tokenizer()).contains("index"), "a stale index is refused");
    drop(store);
    index_tokens_cli(&copy, "trellis");
    let report = Updater::new(&copy).apply(vec![(None, Change::Rename { key: "Golf".into(), name: "Golf".into() })]).unwrap();
    assert_eq!(report.token_indexes.updated.len(), 1, "{:?}", report.token_indexes);
    let store = Arc::new(Store::open_read_only(&copy).unwrap());
    let index = open_index(&store, &tokenizer());
    let golf = store.entity_by_key("Golf").unwrap().unwrap();
    assert_eq!(index.tokens(Side::Entity, golf.0).unwrap(), Some(tokenizer().encode(Side::Entity, &["Golf"]).unwrap().remove(0)));
    assert!(store.validate().unwrap().is_ok());
}

/// The brute-force model: every (token list, id) of one side.
type Model = BTreeSet<(Vec<u32>, u32)>;

fn model_children(model: &Model, prefix: &[u32]) -> Vec<u32> {
    let set: BTreeSet<u32> = model.iter().filter(|(t, _)| t.len() > prefix.len() && t.starts_with(prefix)).map(|(t, _)| t[prefix.len()]).collect();
    set.into_iter().collect()
}

fn model_ending(model: &Model, prefix: &[u32]) -> Vec<u32> {
    model.iter().filter(|(t, _)| t == prefix).map(|&(_, id)| id).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]
    /// Names with homonyms (case differs, the linearization lowercases) and names that
    /// prefix others; the cursor, `children`, `complete`, `children_within` and `tokens_many`
    /// against a model built from the tokenizer's own encodings.
    #[test]
    fn cursor_and_batched_reads_match_a_brute_force_model(
        names in proptest::collection::btree_set("(Golf|golf|GOLF|jordan|Jordan|spieth|a|A|ab|b|the)( (golf|ab|b|game|spieth))?", 1..30),
        pick in proptest::collection::vec(0u32..40, 0..25),
        prefix_len in 0usize..4,
        stray in 0u32..1300,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let tsv: String = names.iter().map(|n| format!("{n}\tr\thub\n")).collect();
        let s = dir.path().join("s");
        ingest(&s, &[], &[&write(dir.path(), "g.tsv", tsv.as_bytes())]);
        let tok = tokenizer();
        trellis::Store::index_tokens(&s, &tok, "t", &trellis::Monitor::new()).unwrap();
        let store = Arc::new(Store::open_read_only(&s).unwrap());
        let index = open_index(&store, &tok);
        let (es, _) = sample_names(&store);
        let encoded = tok.encode(Side::Entity, &es.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        let model: Model = encoded.iter().cloned().zip(0u32..).collect();
        // Every prefix of every name: a cursor walked down to it agrees with the model there.
        let prefixes: BTreeSet<Vec<u32>> = encoded.iter().flat_map(|t| (0..=t.len()).map(move |n| t[..n].to_vec())).collect();
        for prefix in &prefixes {
            let mut cur = index.cursor(Side::Entity);
            for &t in prefix {
                prop_assert!(cur.advance(t).unwrap());
            }
            prop_assert_eq!(cur.depth(), prefix.len());
            prop_assert_eq!(&cur.tokens(), prefix);
            let children = model_children(&model, prefix);
            prop_assert_eq!(cur.children().unwrap(), &children[..]);
            prop_assert_eq!(cur.ending().unwrap(), model_ending(&model, prefix));
            prop_assert_eq!(index.children(Side::Entity, prefix).unwrap(), children.clone());
            prop_assert_eq!(index.complete(Side::Entity, prefix).unwrap(), model_ending(&model, prefix));
            // A token no name continues with is refused and the cursor stays.
            let wrong = (0..).find(|t| !children.contains(t)).unwrap();
            prop_assert!(!cur.advance(wrong).unwrap());
            prop_assert!(!cur.advance(u32::MAX).unwrap());
            prop_assert_eq!(&cur.tokens(), prefix);
            cur.reset();
            prop_assert_eq!(cur.depth(), 0);
        }
        // children_within over a random subset (with repeats and ids the index lacks).
        let ids: Vec<u32> = pick.iter().map(|&p| p % (es.len() as u32 + 3)).chain([stray]).collect();
        let first = &encoded[(pick.first().copied().unwrap_or(0) as usize) % encoded.len()];
        let prefix = &first[..prefix_len.min(first.len())];
        let within = index.children_within(Side::Entity, prefix, &ids).unwrap();
        let known: BTreeSet<u32> = ids.iter().copied().filter(|&i| (i as usize) < es.len()).collect();
        let mut want = Within::default();
        for &id in &known {
            let t = &encoded[id as usize];
            if t.starts_with(prefix) {
                match t.get(prefix.len()) {
                    Some(&n) => want.continuing.push((id, n)),
                    None => want.ending.push(id),
                }
            }
        }
        prop_assert_eq!(&within, &want);
        let sub: Model = model.iter().filter(|(_, id)| known.contains(id)).cloned().collect();
        prop_assert_eq!(within.next_tokens(), model_children(&sub, prefix));
        for t in within.next_tokens() {
            let with: Vec<u32> = sub.iter().filter(|(s, _)| s.len() > prefix.len() && s.starts_with(prefix) && s[prefix.len()] == t).map(|&(_, id)| id).collect::<BTreeSet<_>>().into_iter().collect();
            prop_assert_eq!(within.ids_with(t), with);
        }
        // tokens_many: input order, None past the dictionary.
        let many = index.tokens_many(Side::Entity, &ids).unwrap();
        for (id, got) in ids.iter().zip(&many) {
            prop_assert_eq!(got.as_ref(), encoded.get(*id as usize));
        }
        // Homonyms share a leaf: every id of a name is found at its full token list.
        for (t, id) in &model {
            prop_assert!(index.complete(Side::Entity, t).unwrap().contains(id));
        }
    }
}

/// A record whose linearization does not match its recorded fingerprint is reported by
/// `validate` (and the index is refused, since the caller's linearization cannot match both).
#[test]
fn validate_reports_a_record_whose_linearization_was_edited() {
    let dir = tempfile::tempdir().unwrap();
    let s = indexed_sample(dir.path());
    {
        let gen = std::fs::read_to_string(s.join("CURRENT")).unwrap();
        let path = s.join(gen.trim());
        let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
        let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), &path, cfs).unwrap();
        let cf = db.cf_handle("tokenizers").unwrap();
        let key = tokenizer().fingerprint().to_be_bytes();
        let mut record: serde_json::Value = serde_json::from_slice(&db.get_cf(cf, key).unwrap().unwrap()).unwrap();
        record["linearization"]["lowercase"] = serde_json::json!(false);
        db.put_cf(cf, key, serde_json::to_vec(&record).unwrap()).unwrap();
    }
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let report = store.validate().unwrap();
    assert!(!report.is_ok());
    let fp = Linearization::trellis().fingerprint_hex();
    assert!(report.problems.iter().any(|p| p.contains(&format!("says linearization fingerprint {fp}, its linearization has"))), "{:?}", report.problems);
}
