//! The token index: names in linearization context, the on-disk trie against an in-memory
//! one, several tokenizers side by side, refusals.

use crate::common::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use trellis::model::{NameTokenizer, Side, TokenContext};
use trellis::store::tokens::TokenIndex;
use trellis::Store;

fn tokenizer() -> NameTokenizer {
    NameTokenizer::from_file(&fixture("tokenizer.json"), TokenContext::default()).unwrap()
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
    let index = TokenIndex::open(store.clone(), tok.fingerprint()).unwrap();
    let raw = tok.tokenizer();
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
    let other = NameTokenizer::from_file(&other_path, TokenContext::default()).unwrap();
    assert_ne!(other.fingerprint(), tokenizer().fingerprint());
    {
        let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
        let err = TokenIndex::open(store.clone(), other.fingerprint()).err().expect("not indexed").to_string();
        assert!(err.contains(&format!("no token index for the tokenizer with fingerprint {:016x}", other.fingerprint())), "{err}");
        assert!(err.contains("(tokenizer.json)"), "{err}");
    }
    stdout_of(trellis().arg("index-tokens").arg("--store").arg(&s).arg("--tokenizer").arg(&other_path).arg("--name").arg("generator"));
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let names: BTreeSet<String> = store.tokenizers().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, BTreeSet::from(["generator".to_string(), "tokenizer.json".to_string()]));
    assert!(TokenIndex::open(store.clone(), tokenizer().fingerprint()).is_ok());
    assert!(TokenIndex::open(store.clone(), other.fingerprint()).is_ok());
    assert!(store.validate().unwrap().is_ok(), "{:?}", store.validate().unwrap().problems);
    drop(store);
    // A later load makes the index stale, said plainly.
    let more = write(dir.path(), "more.tsv", b"Somebody New\tknows\tJordan Spieth\n");
    ingest(&s, &[], &[&more]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let err = TokenIndex::open(store.clone(), other.fingerprint()).err().expect("stale").to_string();
    assert!(err.contains("covers 1255 entities, the store now has 1256; run `trellis index-tokens` again"), "{err}");
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
        .stderr(predicates::str::contains("the tokenizer has no token \"[Head]\""));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn on_disk_trie_matches_an_in_memory_trie(names in proptest::collection::btree_set("(golf|jordan|spieth|dallas|a|b|ab|the) (golf|ab|b|game)?", 1..25)) {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = names.into_iter().map(|n| n.trim().to_string()).collect::<BTreeSet<_>>().into_iter().collect();
        let tsv: String = names.iter().map(|n| format!("{n}\tr\thub\n")).collect();
        let input = write(dir.path(), "g.tsv", tsv.as_bytes());
        let s = dir.path().join("s");
        ingest(&s, &[], &[&input]);
        let tok = tokenizer();
        trellis::ingest::tokens::index_tokens(&s, &tok, "t", &mut |_, _, _| {}).unwrap();
        let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
        let index = TokenIndex::open(store.clone(), tok.fingerprint()).unwrap();
        // The in-memory trie: prefix -> (children, terms ending there), from the encodings.
        let mut all: Vec<(u32, String)> = vec![];
        for id in 0..store.entity_count() as u32 {
            all.push((id, store.entity(trellis::EntityId(id)).unwrap().unwrap().name));
        }
        let refs: Vec<&str> = all.iter().map(|(_, n)| n.as_str()).collect();
        let encoded = tok.encode(Side::Entity, &refs).unwrap();
        let mut model: BTreeMap<Vec<u32>, (BTreeSet<u32>, BTreeSet<u32>)> = BTreeMap::new();
        for ((id, _), tokens) in all.iter().zip(&encoded) {
            for n in 0..=tokens.len() {
                let node = model.entry(tokens[..n].to_vec()).or_default();
                if n < tokens.len() { node.0.insert(tokens[n]); } else { node.1.insert(*id); }
            }
        }
        for (prefix, (children, ending)) in &model {
            prop_assert_eq!(index.children(Side::Entity, prefix).unwrap(), children.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(index.complete(Side::Entity, prefix).unwrap(), ending.iter().copied().collect::<Vec<_>>());
            // Restricted to every entity, the walk sees the same children.
            let ids: Vec<u32> = all.iter().map(|(id, _)| *id).collect();
            let (within, ends) = index.children_within(Side::Entity, prefix, &ids).unwrap();
            prop_assert_eq!(within, children.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(ends, !ending.is_empty());
        }
        // A prefix that is no name's prefix has no children.
        prop_assert!(index.children(Side::Entity, &[u32::MAX - 1]).unwrap().is_empty());
    }
}
