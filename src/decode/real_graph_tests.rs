//! The constraint automaton on real neighbourhoods: every string it admits (a depth-first
//! walk over `allowed`/`advance`) against the token strings of `candidate_subgraph`'s paths
//! (capped) and of a brute-force walk of the 1- and 2-hop neighbourhood (uncapped), on the
//! sample OpenDialKG graph and on the whole shared one; every admitted string decodes to a
//! path whose facts the store holds.

use super::automaton::{Boundaries, CandidateMode, DecodedPath, PathGraph};
use super::prior::{PriorConfig, PriorMode, PriorNorm};
use crate::graph::candidates::{CandidateConfig, Hop};
use crate::ids::{Direction, EntityId};
use crate::ingest::{BulkLoader, InputSpec, NameTokenizer, OnError};
use crate::linearize::{Linearization, Side};
use crate::store::tokens::TokenIndex;
use crate::store::Store;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

/// `../shared/data/<rel>` (or under `TRELLIS_SHARED_DATA`), as the integration tests find it.
fn shared_data(rel: &str) -> PathBuf {
    let root = std::env::var_os("TRELLIS_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let p = root.join(rel);
    assert!(p.exists(), "{} is missing: these tests need the shared data sets (set TRELLIS_SHARED_DATA)", p.display());
    p
}

struct Indexed {
    store: Arc<Store>,
    index: TokenIndex,
    b: Boundaries,
}

/// A store of `kg` (bad lines skipped), token-indexed with the fixture tokenizer (`trellis`
/// linearization).
fn indexed(dir: &Path, kg: &Path) -> Indexed {
    let s = dir.join("store");
    BulkLoader::new(&s).on_error(OnError::Skip).load(&[InputSpec::new(kg)]).unwrap();
    let tok = NameTokenizer::from_file(&fixture("tokenizer.json"), Linearization::trellis()).unwrap();
    crate::ingest::tokens::index_tokens(&s, &tok, "tokenizer.json", &crate::progress::Monitor::new()).unwrap();
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let index = TokenIndex::open(store.clone(), tok.fingerprint(), &Linearization::trellis()).unwrap();
    let b = Boundaries::new(&Linearization::trellis(), tok.tokenizer(), tok.tokenizer().token_to_id("</s>").unwrap()).unwrap();
    Indexed { store, index, b }
}

/// Every admitted string with its path; on the way: no live state has an empty allowed set,
/// allowed sets ascend, and every prior (katz here) sums to 1.
fn enumerate(g: &mut PathGraph<'_>) -> BTreeMap<Vec<u32>, DecodedPath> {
    let mut out = BTreeMap::new();
    if g.is_empty().unwrap() {
        return out;
    }
    let mut stack = vec![(g.start(), Vec::new())];
    let mut allowed = Vec::new();
    while let Some((s, prefix)) = stack.pop() {
        if g.is_done(&s) {
            assert!(out.insert(prefix, g.path(&s).unwrap()).is_none());
            continue;
        }
        g.allowed(&s, &mut allowed).unwrap();
        assert!(!allowed.is_empty(), "dead end after {prefix:?}");
        assert!(allowed.windows(2).all(|w| w[0].0 < w[1].0));
        let sum: f64 = allowed.iter().map(|a| a.1.exp()).sum();
        assert!((sum - 1.0).abs() < 1e-9, "p_graph sums to {sum} after {prefix:?}");
        for &(t, _) in allowed.iter() {
            let mut p = prefix.clone();
            p.push(t);
            stack.push((g.advance(&s, t).unwrap().unwrap(), p));
        }
    }
    out
}

/// Candidate paths by brute force, grouped by string: first path, count.
fn brute(x: &Indexed, mentioned: &[EntityId], mode: &CandidateMode) -> BTreeMap<Vec<u32>, DecodedPath> {
    let paths = super::tests::candidate_paths(&x.store, mentioned, mode);
    let mut out: BTreeMap<Vec<u32>, DecodedPath> = BTreeMap::new();
    let ids = BoundaryIds::new();
    for p in paths {
        let Some(s) = ids.render(x, &p) else { continue };
        out.entry(s).and_modify(|d| d.homonyms += 1).or_insert(DecodedPath { hops: p, homonyms: 1 });
    }
    out
}

struct BoundaryIds(std::collections::HashMap<&'static str, u32>);

impl BoundaryIds {
    fn new() -> BoundaryIds {
        let tok = NameTokenizer::from_file(&fixture("tokenizer.json"), Linearization::trellis()).unwrap();
        let names = ["[Head]", "[Int1]", "[Int2]", "[Int3]", "[Int4]", "[Rev1]", "[Rev2]", "[Rev3]", "[Rev4]", "[Tail]", "</s>"];
        BoundaryIds(names.iter().map(|&n| (n, tok.tokenizer().token_to_id(n).unwrap())).collect())
    }

    fn render(&self, x: &Indexed, hops: &[Hop]) -> Option<Vec<u32>> {
        let name = |side: Side, id: u32| x.index.tokens(side, id).unwrap();
        let mut s = vec![self.0["[Head]"]];
        s.extend(name(Side::Entity, hops[0].from.0)?);
        for (i, h) in hops.iter().enumerate() {
            let (a, z) = match (i, h.edge.direction) {
                (0, Direction::Out) => ("[Int1]", "[Int2]"),
                (0, Direction::In) => ("[Rev1]", "[Rev2]"),
                (_, Direction::Out) => ("[Int3]", "[Int4]"),
                (_, Direction::In) => ("[Rev3]", "[Rev4]"),
            };
            s.push(self.0[a]);
            s.extend(name(Side::Relation, h.edge.relation.0)?);
            s.push(self.0[z]);
            s.extend(name(Side::Entity, h.edge.other.0)?);
        }
        s.push(self.0["[Tail]"]);
        s.push(self.0["</s>"]);
        Some(s)
    }
}

/// The facts of a decoded path are in the store, and it writes `string`.
fn assert_real(x: &Indexed, ids: &BoundaryIds, string: &[u32], p: &DecodedPath) {
    assert!(!p.hops.is_empty() && p.hops.len() <= 2 && p.homonyms >= 1);
    for (i, h) in p.hops.iter().enumerate() {
        if i == 1 {
            assert_eq!(h.from, p.hops[0].edge.other);
            assert_ne!(h.edge.other, p.hops[0].from, "a second hop back to the start");
        }
        let (s, r, o) = h.fact();
        assert!(x.store.neighbors_via(s, Direction::Out, r).unwrap().contains(&o), "no fact {s} {r} {o}");
    }
    assert_eq!(ids.render(x, &p.hops).as_deref(), Some(string));
}

fn katz() -> PriorConfig {
    PriorConfig::new(PriorMode::Katz, PriorNorm::Proportional, 0.001)
}

/// Admitted strings == brute-force strings (same first path, same homonym count), capped and
/// uncapped, for each mentioned set; returns how many strings were compared.
fn compare(x: &Indexed, sets: &[Vec<EntityId>], uncapped_hub: usize, uncapped_too: &dyn Fn(&[EntityId]) -> bool) -> usize {
    let ids = BoundaryIds::new();
    let mut n = 0;
    for m in sets {
        let mut modes = vec![
            CandidateMode::Capped(CandidateConfig::default()),
            CandidateMode::Capped(CandidateConfig { facts_per_entity: 7, tails_per_relation: 2, paths_per_entity: 9, hops: 2 }),
        ];
        if uncapped_too(m) {
            modes.push(CandidateMode::Uncapped { hub_degree: uncapped_hub });
        }
        for mode in modes {
            let mut g = PathGraph::new(x.store.clone(), &x.index, &x.b, m, mode.clone(), katz()).unwrap();
            let got = enumerate(&mut g);
            let want = brute(x, m, &mode);
            assert_eq!(got.len(), want.len(), "{m:?} {mode:?}");
            assert!(got == want, "{m:?} {mode:?}: the admitted strings differ from the candidate paths'");
            for (s, p) in &got {
                assert_real(x, &ids, s, p);
            }
            n += got.len();
        }
    }
    n
}

/// 2-hop paths an uncapped walk from `e` would enumerate (hubs over `hub` not expanded).
fn two_hop_count(store: &Store, e: EntityId, hub: usize) -> u64 {
    let mut n = 0;
    store
        .for_each_neighbor(e, None, None, |edge| {
            let d = store.degree(edge.other, Direction::Out).unwrap() + store.degree(edge.other, Direction::In).unwrap();
            if d as usize <= hub {
                n += d;
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    n
}

#[test]
fn automaton_language_is_the_candidate_paths_on_the_sample_graph() {
    let dir = tempfile::tempdir().unwrap();
    let x = indexed(dir.path(), &fixture("opendialkg-sample.tsv"));
    let n = x.store.entity_count() as u32;
    // Every entity alone, and sliding groups of three (their names and paths interleave).
    let mut sets: Vec<Vec<EntityId>> = (0..n).map(|e| vec![EntityId(e)]).collect();
    sets.extend((0..n.saturating_sub(2)).step_by(37).map(|e| vec![EntityId(e), EntityId(e + 1), EntityId(e + 2)]));
    let compared = compare(&x, &sets, 30, &|_| true);
    assert!(compared > 10_000, "{compared}");
    // The mentioned Jordan Spieth, by name: his candidates include the reversed has_person.
    let spieth = x.store.entity_by_key("Jordan Spieth").unwrap().unwrap();
    let mut g = PathGraph::new(x.store.clone(), &x.index, &x.b, &[spieth], CandidateMode::default(), katz()).unwrap();
    let all = enumerate(&mut g);
    let dallas = x.store.entity_by_key("Dallas").unwrap().unwrap();
    assert!(all.values().any(|p| p.hops.len() == 1 && p.hops[0].edge.other == dallas && p.hops[0].edge.direction == Direction::In));
}

#[test]
fn automaton_language_is_the_candidate_paths_on_the_opendialkg_graph() {
    let dir = tempfile::tempdir().unwrap();
    let x = indexed(dir.path(), &shared_data("opendialkg/kg.tsv"));
    let n = x.store.entity_count() as u32;
    // Entities spread over the id space, the best-connected one, and a few groups.
    let mut best = (0u64, EntityId(0));
    for e in (0..n).map(EntityId) {
        let d = x.store.degree(e, Direction::Out).unwrap() + x.store.degree(e, Direction::In).unwrap();
        best = best.max((d, e));
    }
    let mut sets: Vec<Vec<EntityId>> = (0..n).step_by(1499).map(|e| vec![EntityId(e)]).collect();
    sets.push(vec![best.1]);
    for key in ["Jordan Spieth", "Golf", "The Notebook", "Dallas"] {
        if let Some(e) = x.store.entity_by_key(key).unwrap() {
            sets.push(vec![e]);
        }
    }
    sets.extend((0..n.saturating_sub(2)).step_by(9973).map(|e| vec![EntityId(e), EntityId(e + 2), EntityId(e + 1)]));
    let hub = 10_000;
    let store = x.store.clone();
    // Uncapped only where the 2-hop neighbourhood stays enumerable in a test.
    let small = move |m: &[EntityId]| m.iter().map(|&e| two_hop_count(&store, e, hub)).sum::<u64>() <= 40_000;
    let compared = compare(&x, &sets, hub, &small);
    assert!(compared > 5_000, "{compared}");
}
