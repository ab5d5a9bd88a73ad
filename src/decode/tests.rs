//! The automaton and the prior on hand-built graphs, against hand-written expectations and
//! against an independent brute-force enumeration of the candidate paths (written from
//! `for_each_neighbor` and `candidate_subgraph`, never from the automaton's own reads).

use super::automaton::{Boundaries, CandidateMode, DecodeError, DecodedPath, PathGraph, State};
use super::prior::{PriorConfig, PriorMode, PriorNorm};
use crate::graph::candidates::{candidate_subgraph, CandidateConfig, Hop};
use crate::ids::{Direction, EntityId};
use crate::ingest::NameTokenizer;
use crate::ingest::{BulkLoader, InputSpec};
use crate::linearize::{Linearization, Position, Side};
use crate::store::tokens::TokenIndex;
use crate::store::Store;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;
use std::sync::Arc;

const SPECIALS: [&str; 3] = ["<pad>", "</s>", "<unk>"];

/// A word-level tokenizer (whitespace pre-tokenizer) over `words`, with the boundary tokens
/// of `lin` added: a name's ids are its words, so names can prefix each other at token level.
fn word_tokenizer(words: &BTreeSet<String>, lin: &Linearization) -> NameTokenizer {
    let mut vocab = serde_json::Map::new();
    for (i, w) in SPECIALS.iter().map(|s| s.to_string()).chain(words.iter().cloned()).enumerate() {
        vocab.insert(w, (i as u32).into());
    }
    let mut added = Vec::new();
    let mut next = vocab.len() as u32;
    for (_, b) in lin.boundaries() {
        for t in b {
            if !added.iter().any(|a: &serde_json::Value| a["content"] == t.as_str()) {
                added.push(
                    serde_json::json!({"id": next, "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}),
                );
                next += 1;
            }
        }
    }
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    let text = json.to_string();
    let tok: tokenizers::Tokenizer = text.parse().unwrap();
    NameTokenizer::new(tok, crate::linearize::fnv1a64(text.as_bytes()), lin.clone()).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    index: TokenIndex,
    tok: NameTokenizer,
    b: Boundaries,
    /// Every fact as (subject key, relation key, object key).
    facts: Vec<(String, String, String)>,
    lin: Linearization,
}

impl Fixture {
    /// A store of the TSV facts, token-indexed with a word tokenizer over their words.
    fn new(tsv: &str) -> Fixture {
        Fixture::with(tsv, Linearization::trellis())
    }

    fn with(tsv: &str, lin: Linearization) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("facts.tsv");
        std::fs::write(&input, tsv).unwrap();
        let mut words = BTreeSet::new();
        let mut facts = Vec::new();
        for line in tsv.lines().filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            facts.push((f[0].to_owned(), f[1].to_owned(), f[2].to_owned()));
            for (i, name) in f.iter().enumerate() {
                let text = if i == 1 { lin.relation_text(name) } else { lin.entity_text(name) };
                words.extend(text.split_whitespace().map(str::to_owned));
            }
        }
        let s = dir.path().join("store");
        BulkLoader::new(&s).load(&[InputSpec::new(&input)]).unwrap();
        let tok = word_tokenizer(&words, &lin);
        crate::ingest::tokens::index_tokens(&s, &tok, "words", &crate::progress::Monitor::new()).unwrap();
        let store = Arc::new(Store::open_read_only(&s).unwrap());
        let index = TokenIndex::open(store.clone(), tok.fingerprint(), &lin).unwrap();
        let eos = tok.tokenizer().token_to_id("</s>").unwrap();
        let b = Boundaries::new(&lin, tok.tokenizer(), eos).unwrap();
        Fixture { _dir: dir, store, index, tok, b, facts, lin }
    }

    /// The ids of a boundary.
    fn bids(&self, p: Position) -> Vec<u32> {
        self.lin.boundary(p).iter().map(|t| self.id(t)).collect()
    }

    fn e(&self, key: &str) -> EntityId {
        self.store.entity_by_key(key).unwrap().unwrap_or_else(|| panic!("no entity {key}"))
    }

    fn id(&self, token: &str) -> u32 {
        self.tok.tokenizer().token_to_id(token).unwrap_or_else(|| panic!("no token {token}"))
    }

    fn ids(&self, text: &str) -> Vec<u32> {
        text.split_whitespace().map(|t| self.id(t)).collect()
    }

    fn text(&self, ids: &[u32]) -> String {
        ids.iter().map(|&i| self.tok.tokenizer().id_to_token(i).unwrap()).collect::<Vec<_>>().join(" ")
    }

    fn graph(&self, mentioned: &[&str], mode: CandidateMode, prior: PriorConfig) -> PathGraph<'_> {
        let m: Vec<EntityId> = mentioned.iter().map(|k| self.e(k)).collect();
        PathGraph::new(self.store.clone(), &self.index, &self.b, &m, mode, prior).unwrap()
    }
}

fn uncapped() -> CandidateMode {
    CandidateMode::Uncapped { hub_degree: 10_000 }
}

fn hard() -> PriorConfig {
    PriorConfig::new(PriorMode::Hard, PriorNorm::Proportional, 0.001)
}

/// Every string the automaton admits (DFS over `allowed`/`advance`), with its path; checks on
/// the way that every live state's allowed set is non-empty and ascending and that `advance`
/// refuses what `allowed` leaves out.
fn enumerate(g: &mut PathGraph<'_>) -> BTreeMap<Vec<u32>, DecodedPath> {
    let mut out = BTreeMap::new();
    if g.is_empty().unwrap() {
        return out;
    }
    let mut stack: Vec<(State, Vec<u32>)> = vec![(g.start(), Vec::new())];
    let mut allowed = Vec::new();
    while let Some((s, prefix)) = stack.pop() {
        if g.is_done(&s) {
            let p = g.path(&s).expect("a finished state has a path");
            assert!(out.insert(prefix, p).is_none(), "two walks write the same string");
            continue;
        }
        g.allowed(&s, &mut allowed).unwrap();
        assert!(!allowed.is_empty(), "dead end after {prefix:?}");
        assert!(allowed.windows(2).all(|w| w[0].0 < w[1].0), "not ascending: {allowed:?}");
        let set: Vec<u32> = allowed.iter().map(|a| a.0).collect();
        // A token next to an allowed one (or 0) is refused unless allowed.
        for probe in [0, set[0].wrapping_add(1), set[set.len() - 1].wrapping_add(1)] {
            if !set.contains(&probe) {
                assert_eq!(g.advance(&s, probe).unwrap(), None);
            }
        }
        for t in set {
            let n = g.advance(&s, t).unwrap().expect("an allowed token advances");
            let mut p = prefix.clone();
            p.push(t);
            stack.push((n, p));
        }
    }
    out
}

/// The token string of a path, `None` when a name has no usable token list.
fn render(f: &Fixture, start: EntityId, hops: &[Hop]) -> Option<Vec<u32>> {
    let reserved: Vec<u32> = f.lin.boundaries().iter().flat_map(|(_, b)| b.iter().map(|t| f.id(t))).chain([f.b.eos()]).collect();
    let name = |side: Side, id: u32| -> Option<Vec<u32>> {
        let t = f.index.tokens(side, id).unwrap()?;
        (!t.iter().any(|x| reserved.contains(x))).then_some(t)
    };
    let mut s = f.bids(Position::Head);
    s.extend(name(Side::Entity, start.0)?);
    for (i, h) in hops.iter().enumerate() {
        let (a, z) = around(i, h.edge.direction);
        s.extend(f.bids(a));
        s.extend(name(Side::Relation, h.edge.relation.0)?);
        s.extend(f.bids(z));
        s.extend(name(Side::Entity, h.edge.other.0)?);
    }
    s.extend(f.bids(Position::Tail));
    s.push(f.b.eos());
    Some(s)
}

/// The boundaries around the relation of hop `i` walked in direction `d`.
fn around(i: usize, d: Direction) -> (Position, Position) {
    let n = 2 * i as u8 + 1;
    match d {
        Direction::Out => (Position::Int(n), Position::Int(n + 1)),
        Direction::In => (Position::Rev(n), Position::Rev(n + 1)),
    }
}

/// Brute force: every candidate path of `mentioned` in candidate order: the capped
/// subgraph's, or the whole 1- and 2-hop neighbourhood walked edge by edge, hubs (more than
/// `hub_degree` facts) not expanded. Shared with `real_graph_tests`.
pub(super) fn candidate_paths(store: &Store, mentioned: &[EntityId], mode: &CandidateMode) -> Vec<Vec<Hop>> {
    let mut paths: Vec<Vec<Hop>> = Vec::new();
    match mode {
        CandidateMode::Capped(cfg) => {
            let c = candidate_subgraph(store, mentioned, cfg).unwrap();
            paths.extend(c.one_hop.iter().map(|h| vec![*h]));
            paths.extend(c.two_hop.iter().map(|p| p.to_vec()));
        }
        CandidateMode::Uncapped { hub_degree } => {
            let mut seen = Vec::new();
            for &m in mentioned {
                if seen.contains(&m) {
                    continue;
                }
                seen.push(m);
                let mut first = Vec::new();
                store
                    .for_each_neighbor(m, None, None, |e| {
                        first.push(e);
                        ControlFlow::Continue(())
                    })
                    .unwrap();
                for e in first {
                    paths.push(vec![Hop { from: m, edge: e }]);
                    let x = e.other;
                    let facts = store.degree(x, Direction::Out).unwrap() + store.degree(x, Direction::In).unwrap();
                    if facts as usize > *hub_degree {
                        continue;
                    }
                    store
                        .for_each_neighbor(x, None, None, |e2| {
                            if e2.other != m {
                                paths.push(vec![Hop { from: m, edge: e }, Hop { from: x, edge: e2 }]);
                            }
                            ControlFlow::Continue(())
                        })
                        .unwrap();
                }
            }
        }
    }
    paths
}

/// Brute force: the candidate paths in candidate order, grouped by the string they write.
fn brute_all(f: &Fixture, mentioned: &[EntityId], mode: &CandidateMode) -> BTreeMap<Vec<u32>, Vec<Vec<Hop>>> {
    let paths = candidate_paths(&f.store, mentioned, mode);
    let mut out: BTreeMap<Vec<u32>, Vec<Vec<Hop>>> = BTreeMap::new();
    for p in paths {
        let Some(s) = render(f, p[0].from, &p) else { continue };
        out.entry(s).or_default().push(p);
    }
    out
}

/// Brute force, each string with its first path and how many paths write it.
fn brute(f: &Fixture, mentioned: &[EntityId], mode: &CandidateMode) -> BTreeMap<Vec<u32>, DecodedPath> {
    brute_all(f, mentioned, mode).into_iter().map(|(s, ps)| (s, DecodedPath { homonyms: ps.len(), hops: ps.into_iter().next().unwrap() })).collect()
}

fn texts(f: &Fixture, set: &BTreeMap<Vec<u32>, DecodedPath>) -> BTreeSet<String> {
    set.keys().map(|s| f.text(s)).collect()
}

fn walk(g: &mut PathGraph<'_>, f: &Fixture, text: &str) -> State {
    let mut s = g.start();
    for t in f.ids(text) {
        s = g.advance(&s, t).unwrap().unwrap_or_else(|| panic!("{text}: refused at {}", f.text(&[t])));
    }
    s
}

fn allowed_text(g: &mut PathGraph<'_>, f: &Fixture, text: &str) -> Vec<(String, f64)> {
    let s = walk(g, f, text);
    let mut a = Vec::new();
    g.allowed(&s, &mut a).unwrap();
    a.into_iter().map(|(t, l)| (f.text(&[t]), l)).collect()
}

const SMALL: &str = "alice\tlikes\tbob\nbob\tknows\tcarol\ndave\tlikes\talice\n";

#[test]
fn reverse_edges_two_hops_and_dead_ends() {
    let f = Fixture::new(SMALL);
    let mut g = f.graph(&["alice"], uncapped(), hard());
    let all = enumerate(&mut g);
    // bob's only other fact is carol; dave's only fact leads back to alice: no second hop.
    let expected: BTreeSet<String> = [
        "[Head] alice [Int1] likes [Int2] bob [Tail] </s>",
        "[Head] alice [Int1] likes [Int2] bob [Int3] knows [Int4] carol [Tail] </s>",
        "[Head] alice [Rev1] likes [Rev2] dave [Tail] </s>",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(texts(&f, &all), expected);
    assert_eq!(all, brute(&f, &[f.e("alice")], &uncapped()));
    // Pruned ahead: after dave only [Tail]; after bob [Tail] and [Int3], never [Rev3].
    let names = |v: Vec<(String, f64)>| v.into_iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(names(allowed_text(&mut g, &f, "[Head] alice [Rev1] likes [Rev2] dave")), ["[Tail]"]);
    let mut after_bob = names(allowed_text(&mut g, &f, "[Head] alice [Int1] likes [Int2] bob"));
    after_bob.sort();
    assert_eq!(after_bob, ["[Int3]", "[Tail]"]);
    assert_eq!(names(allowed_text(&mut g, &f, "[Head] alice [Int1] likes [Int2] bob [Tail]")), ["</s>"]);
    // The reverse edge decodes as the stored fact likes(dave, alice), walked backwards.
    let s = walk(&mut g, &f, "[Head] alice [Rev1] likes [Rev2] dave [Tail] </s>");
    let p = g.path(&s).unwrap();
    assert_eq!(p.homonyms, 1);
    assert_eq!(p.hops.len(), 1);
    assert_eq!(p.hops[0].fact(), (f.e("dave"), f.store.relation_by_key("likes").unwrap().unwrap(), f.e("alice")));
    // Not admitted: bob's reverse edge back to alice, a name cut short, EOS too early.
    for bad in ["[Head] alice [Int1] likes [Int2] bob [Rev3]", "[Head] bob", "[Head] alice [Int1] likes [Int2] bob </s>"] {
        let ids = f.ids(bad);
        let mut s = Some(g.start());
        for t in ids {
            s = s.and_then(|s| g.advance(&s, t).unwrap());
        }
        assert!(s.is_none_or(|s| !g.is_done(&s)), "{bad} admitted");
    }
    // Capped with one fact per entity: only alice's first fact in store order (Out first).
    let cfg = CandidateConfig { facts_per_entity: 1, tails_per_relation: 1, paths_per_entity: 0, hops: 2 };
    let mut g = f.graph(&["alice"], CandidateMode::Capped(cfg.clone()), hard());
    assert_eq!(texts(&f, &enumerate(&mut g)), BTreeSet::from(["[Head] alice [Int1] likes [Int2] bob [Tail] </s>".to_string()]));
}

#[test]
fn homonyms_are_one_string_and_decode_to_the_first_path() {
    // "Paris" and "paris" are two entities written alike (names are lowercased); so are
    // "Rome" and "rome".
    let f =
        Fixture::new("Paris\tcapital_of\tFrance\nparis\tlocated_in\tTexas\nParis\ttwinned_with\tRome\nParis\ttwinned_with\trome\nparis\ttwinned_with\tRome\n");
    assert_ne!(f.e("Paris"), f.e("paris"));
    let mut g = f.graph(&["Paris", "paris"], uncapped(), hard());
    let all = enumerate(&mut g);
    assert_eq!(all, brute(&f, &[f.e("Paris"), f.e("paris")], &uncapped()));
    let get = |t: &str| all.get(&f.ids(t)).unwrap_or_else(|| panic!("{t} not admitted")).clone();
    // The head "paris" stands for both; each relation leads on from the entity that has it.
    assert_eq!(get("[Head] paris [Int1] capital of [Int2] france [Tail] </s>").hops[0].from, f.e("Paris"));
    assert_eq!(get("[Head] paris [Int1] located in [Int2] texas [Tail] </s>").hops[0].from, f.e("paris"));
    // Three facts write this string: Paris-Rome, Paris-rome, paris-Rome; the first in
    // candidate order (mentioned order, then neighbour id) is Paris-Rome.
    let p = get("[Head] paris [Int1] twinned with [Int2] rome [Tail] </s>");
    assert_eq!(p.homonyms, 3);
    assert_eq!((p.hops[0].from, p.hops[0].edge.other), (f.e("Paris"), f.e("Rome").min(f.e("rome"))));
    // Mentioned the other way round, paris's path comes first.
    let mut g = f.graph(&["paris", "Paris"], uncapped(), hard());
    let s = walk(&mut g, &f, "[Head] paris [Int1] twinned with [Int2] rome [Tail] </s>");
    assert_eq!(g.path(&s).unwrap().hops[0].from, f.e("paris"));
    // Capped mode agrees with candidate_subgraph on the same strings and counts.
    let cfg = CandidateConfig::default();
    let mut g = f.graph(&["Paris", "paris"], CandidateMode::Capped(cfg.clone()), hard());
    assert_eq!(enumerate(&mut g), brute(&f, &[f.e("Paris"), f.e("paris")], &CandidateMode::Capped(cfg)));
}

#[test]
fn a_name_that_prefixes_another_allows_both_ways_on() {
    let f = Fixture::new("alice\tlives_in\tnew york\nalice\tlives_in\tnew york city\nnew york\tin\tusa\n");
    let mut g = f.graph(&["alice"], uncapped(), hard());
    let all = enumerate(&mut g);
    assert_eq!(all, brute(&f, &[f.e("alice")], &uncapped()));
    let mut a: Vec<String> = allowed_text(&mut g, &f, "[Head] alice [Int1] lives in [Int2] new york").into_iter().map(|x| x.0).collect();
    a.sort();
    assert_eq!(a, ["[Int3]", "[Tail]", "city"]);
    assert_eq!(texts(&f, &all).len(), 3);
    assert!(texts(&f, &all).contains("[Head] alice [Int1] lives in [Int2] new york city [Tail] </s>"));
    // And as the head: "new york" mentioned with "new york city"'s own (reverse) edge.
    let mut g = f.graph(&["new york", "new york city"], uncapped(), hard());
    let all = enumerate(&mut g);
    assert_eq!(all, brute(&f, &[f.e("new york"), f.e("new york city")], &uncapped()));
    let mut a: Vec<String> = allowed_text(&mut g, &f, "[Head] new york").into_iter().map(|x| x.0).collect();
    a.sort();
    assert_eq!(a, ["[Int1]", "[Rev1]", "city"]);
}

#[test]
fn an_empty_request_has_no_paths() {
    let f = Fixture::new(SMALL);
    for mentioned in [vec![], vec![f.e("alice")]] {
        let cfg = CandidateConfig { facts_per_entity: 0, ..CandidateConfig::default() };
        let mode = if mentioned.is_empty() { uncapped() } else { CandidateMode::Capped(cfg) };
        let mut g = PathGraph::new(f.store.clone(), &f.index, &f.b, &mentioned, mode, hard()).unwrap();
        assert!(g.is_empty().unwrap());
        let mut a = vec![(1, 0.0)];
        g.allowed(&g.start(), &mut a).unwrap();
        assert!(a.is_empty());
        assert_eq!(g.advance(&g.start(), f.id("[Head]")).unwrap(), None);
        assert!(enumerate_or_empty(&mut g).is_empty());
    }
    let mut g = f.graph(&["alice"], uncapped(), hard());
    assert!(!g.is_empty().unwrap());
}

fn enumerate_or_empty(g: &mut PathGraph<'_>) -> Vec<Vec<u32>> {
    let mut a = Vec::new();
    g.allowed(&g.start(), &mut a).unwrap();
    a.iter().map(|x| vec![x.0]).collect()
}

#[test]
fn a_start_entity_whose_only_second_hop_returns_is_a_dead_end_for_two_hops() {
    // x's only facts are with a: from a, the 1-hop path ends at x, no 2-hop path exists.
    let f = Fixture::new("a\tr\tx\nx\ts\ta\n");
    let mut g = f.graph(&["a"], uncapped(), hard());
    let all = enumerate(&mut g);
    assert_eq!(texts(&f, &all), BTreeSet::from(["[Head] a [Int1] r [Int2] x [Tail] </s>".to_string(), "[Head] a [Rev1] s [Rev2] x [Tail] </s>".to_string()]));
    let mut g = f.graph(&["a"], CandidateMode::Capped(CandidateConfig::default()), hard());
    assert_eq!(enumerate(&mut g), brute(&f, &[f.e("a")], &CandidateMode::Capped(CandidateConfig::default())));
}

#[test]
fn hubs_are_not_expanded_for_a_second_hop() {
    // b has 3 facts: with hub_degree 2 it still ends a path from a but is not walked through.
    let f = Fixture::new("a\tr\tb\nb\ts\tc\nb\ts\td\n");
    let mut g = f.graph(&["a"], CandidateMode::Uncapped { hub_degree: 2 }, hard());
    assert_eq!(texts(&f, &enumerate(&mut g)), BTreeSet::from(["[Head] a [Int1] r [Int2] b [Tail] </s>".to_string()]));
    let mut g = f.graph(&["a"], CandidateMode::Uncapped { hub_degree: 3 }, hard());
    assert_eq!(enumerate(&mut g).len(), 3);
}

/// The prior example of the tests below: M = {a}.
const PRIOR: &str = "a\tr\tbig cat\na\tr\tbig dog\na\tr\tsmall cat\na\tr\tbig cat fish\na\tq\tbig dog\nbig cat\ts\tsmall cat\nbig dog\ts\tz\n";

fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-12, "got {got}, want {want}");
}

fn lp(v: &[(String, f64)], token: &str) -> f64 {
    v.iter().find(|x| x.0 == token).unwrap_or_else(|| panic!("{token} not in {v:?}")).1
}

#[test]
fn prior_values_worked_by_hand() {
    // Undirected neighbours: a {big cat, big dog, small cat, big cat fish}; big cat {a, small
    // cat}; big dog {a, z}; small cat {a, big cat}; big cat fish {a}. beta = 0.5.
    // Katz S(e, {a}) = 0.5 A[e,a] + 0.25 |N(e) ∩ N(a)|:
    //   big cat 0.5 + 0.25 * 1 (small cat) = 0.75; big dog 0.5 + 0 = 0.5;
    //   small cat 0.5 + 0.25 * 1 (big cat) = 0.75; big cat fish 0.5 + 0 = 0.5.
    let f = Fixture::new(PRIOR);
    let katz = PriorConfig::new(PriorMode::Katz, PriorNorm::Proportional, 0.001);
    let mut g = f.graph(&["a"], uncapped(), katz);
    // The head: one entity, one token, forced.
    assert_eq!(allowed_text(&mut g, &f, "[Head]"), vec![("a".to_string(), 0.0)]);
    // Relations are uniform: q and r.
    let a = allowed_text(&mut g, &f, "[Head] a [Int1]");
    close(lp(&a, "q"), -(2f64.ln()));
    close(lp(&a, "r"), -(2f64.ln()));
    // After r: "big" gets big cat + big dog + big cat fish = 0.751 + 0.501 + 0.501 = 1.753,
    // "small" gets small cat 0.751; total 2.504.
    let a = allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2]");
    assert_eq!(a.len(), 2);
    close(lp(&a, "big"), (1.753f64 / 2.504).ln());
    close(lp(&a, "small"), (0.751f64 / 2.504).ln());
    // After "big": cat (big cat 0.751 + big cat fish 0.501 = 1.252), dog 0.501; total 1.753.
    let a = allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2] big");
    close(lp(&a, "cat"), (1.252f64 / 1.753).ln());
    close(lp(&a, "dog"), (0.501f64 / 1.753).ln());
    // After "big cat": fish 0.501; big cat ends here and continues with [Tail] or [Int3]
    // (its other fact is s(big cat, small cat); its reverse edge only returns to a):
    // 0.751 / 2 each. Total 1.252.
    let a = allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2] big cat");
    assert_eq!(a.len(), 3);
    close(lp(&a, "fish"), (0.501f64 / 1.252).ln());
    close(lp(&a, "[Tail]"), (0.3755f64 / 1.252).ln());
    close(lp(&a, "[Int3]"), (0.3755f64 / 1.252).ln());
    // Softmax over m = S (no epsilon): fish 0.5, [Tail] 0.375, [Int3] 0.375.
    let mut g = f.graph(&["a"], uncapped(), PriorConfig::new(PriorMode::Katz, PriorNorm::Softmax, 0.001));
    let a = allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2] big cat");
    let z = 0.5f64.exp() + 2.0 * 0.375f64.exp();
    close(lp(&a, "fish"), 0.5 - z.ln());
    close(lp(&a, "[Tail]"), 0.375 - z.ln());
    // Connection (K = 1): every neighbour of a scores 0.5, + 0.001: fish 0.501, [Tail] and
    // [Int3] 0.2505 each; total 1.002.
    let mut g = f.graph(&["a"], uncapped(), PriorConfig::new(PriorMode::Connection, PriorNorm::Proportional, 0.001));
    let a = allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2] big cat");
    close(lp(&a, "fish"), (0.501f64 / 1.002).ln());
    close(lp(&a, "[Int3]"), (0.2505f64 / 1.002).ln());
    // Second-hop entities: from big cat via s only small cat: forced.
    let a = allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2] big cat [Int3] s [Int4]");
    assert_eq!(a, vec![("small".to_string(), 0.0)]);
    // Hard: 0 everywhere.
    let mut g = f.graph(&["a"], uncapped(), hard());
    assert!(allowed_text(&mut g, &f, "[Head] a [Int1] r [Int2]").iter().all(|x| x.1 == 0.0));
}

#[test]
fn start_recency_scales_the_first_entitys_mass_by_its_age() {
    // M = {big cat, small cat}: each is the other's neighbour and both are a's, so their
    // masses are equal (connection: S = 0.5, + 0.001) and p_graph at the first entity is
    // decided by the recency factor alone. big cat was mentioned 2 messages ago, small cat
    // in the last message.
    let f = Fixture::new(PRIOR);
    let m = [f.e("big cat"), f.e("small cat")];
    let ages = [2, 0];
    let prior = |norm, gamma| {
        let mut p = PriorConfig::new(PriorMode::Connection, norm, 0.001);
        p.start_recency = gamma;
        p
    };
    // Off (gamma 0): even.
    let mut g = f.graph(&["big cat", "small cat"], uncapped(), prior(PriorNorm::Proportional, 0.0));
    g.set_ages(&m, &ages).unwrap();
    let a = allowed_text(&mut g, &f, "[Head]");
    close(lp(&a, "big"), -(2f64.ln()));
    // gamma 1.5, proportional: 0.501 e^-3 against 0.501.
    let mut g = f.graph(&["big cat", "small cat"], uncapped(), prior(PriorNorm::Proportional, 1.5));
    g.set_ages(&m, &ages).unwrap();
    let a = allowed_text(&mut g, &f, "[Head]");
    let z = (-3f64).exp() + 1.0;
    close(lp(&a, "big"), -3.0 - z.ln());
    close(lp(&a, "small"), -z.ln());
    // The factor holds only at the first entity: after "[Head] big cat [Int1]" relations
    // are uniform, and the second entity's masses carry no age.
    let b = allowed_text(&mut g, &f, "[Head] big cat [Int1]");
    assert!(b.iter().all(|x| (x.1 + (b.len() as f64).ln()).abs() < 1e-12), "{b:?}");
    // Softmax: masses S = 0.5 - 3 and 0.5.
    let mut g = f.graph(&["big cat", "small cat"], uncapped(), prior(PriorNorm::Softmax, 1.5));
    g.set_ages(&m, &ages).unwrap();
    let a = allowed_text(&mut g, &f, "[Head]");
    let z = (-2.5f64).exp() + 0.5f64.exp();
    close(lp(&a, "big"), -2.5 - z.ln());
    // A huge gamma makes an old entity unlikely, never impossible: the factor stops at e^-600.
    let mut g = f.graph(&["big cat", "small cat"], uncapped(), prior(PriorNorm::Proportional, 1e6));
    g.set_ages(&m, &ages).unwrap();
    let a = allowed_text(&mut g, &f, "[Head]");
    close(lp(&a, "big"), -600.0 - (1.0 + (-600f64).exp()).ln());
    // ... also when the old entity's tokens sort after a young one's (its mass is not lost in
    // a sum with the bigger one's).
    let mut g = f.graph(&["big cat", "small cat"], uncapped(), prior(PriorNorm::Proportional, 1e6));
    g.set_ages(&m, &[0, 2]).unwrap();
    let a = allowed_text(&mut g, &f, "[Head]");
    close(lp(&a, "small"), -600.0 - (1.0 + (-600f64).exp()).ln());
    // Ages arrive before the first step or not at all.
    let mut g = f.graph(&["big cat", "small cat"], uncapped(), prior(PriorNorm::Proportional, 1.5));
    allowed_text(&mut g, &f, "[Head]");
    assert!(matches!(g.set_ages(&m, &ages), Err(DecodeError::AgesAfterStart)));
}

#[test]
fn parse_reads_free_sequences_back_to_store_paths() {
    let f = Fixture::new(SMALL);
    let mut g = f.graph(&["alice"], uncapped(), hard());
    let p = g.parse(&f.ids("[Head] dave [Int1] likes [Int2] alice [Int3] likes [Int4] bob [Tail] </s>")).unwrap().unwrap();
    assert_eq!(p.hops.iter().map(|h| h.fact()).collect::<Vec<_>>().len(), 2);
    assert_eq!(p.hops[1].edge.other, f.e("bob"));
    // Not candidates of this request (alice), but paths of the store: parse does not care.
    assert!(g.accepts(&f.ids("[Head] dave [Int1] likes [Int2] alice [Tail] </s>")).unwrap().is_none());
    assert!(g.parse(&f.ids("[Head] dave [Int1] likes [Int2] alice [Tail] </s>")).unwrap().is_some());
    for bad in [
        "[Head] dave [Rev1] likes [Rev2] alice [Tail] </s>",                          // wrong direction
        "[Head] dave [Int1] likes [Int2] alice [Tail]",                               // no EOS
        "[Head] dave [Int1] likes [Int2] alice [Int3] likes [Int4] dave [Tail] </s>", // back to the start
        "[Head] dave [Int1] likes [Int2] alice [Tail] </s> </s>",                     // trailing tokens
        "[Head] dave [Int1] likes [Rev2] alice [Tail] </s>",                          // mixed boundary
        "[Head] alice bob [Int1] likes [Int2] bob [Tail] </s>",                       // no such name
        "[Head] [Int1] likes [Int2] bob [Tail] </s>",
    ] {
        assert_eq!(g.parse(&f.ids(bad)).unwrap(), None, "{bad}");
    }
}

#[test]
fn boundaries_must_be_told_apart() {
    let one = |i: u32| vec![i];
    let ok = Boundaries::from_ids(one(1), [one(2), one(3), one(4), one(5)], [one(6), one(7), one(8), one(9)], one(10), 11);
    assert!(ok.is_ok());
    let e = Boundaries::from_ids(one(1), [vec![2, 3], one(3), one(4), one(5)], [one(2), one(7), one(8), one(9)], one(10), 11).unwrap_err();
    assert_eq!(e.to_string(), "the boundaries Rev1 and Int1 can follow the same name but Rev1 is a prefix of Int1: a decoder could not tell them apart");
    assert!(Boundaries::from_ids(one(1), [one(2), one(3), one(4), one(5)], [one(6), one(7), one(8), one(9)], one(10), 10).is_err());
    assert!(Boundaries::from_ids(vec![], [one(2), one(3), one(4), one(5)], [one(6), one(7), one(8), one(9)], one(10), 11).is_err());
    // Shared first tokens are fine when the rest differs (two-token boundaries).
    assert!(Boundaries::from_ids(one(1), [vec![2, 3], one(3), one(4), one(5)], [vec![2, 4], one(7), one(8), one(9)], one(10), 11).is_ok());
}

// ---- property tests: random small graphs against brute force ----

const ENTITY_NAMES: [&str; 8] = ["a", "A", "a b", "a b c", "b", "c", "b a", "d"];
const RELATION_NAMES: [&str; 4] = ["r", "s", "R", "r s"];

/// S(e, M) by brute force from the facts: undirected neighbour sets, beta = 0.5.
fn brute_s(f: &Fixture, e: EntityId, mentioned: &[EntityId], k: u8) -> f64 {
    let mut adj: HashMap<EntityId, BTreeSet<EntityId>> = HashMap::new();
    for (s, _, o) in &f.facts {
        let (s, o) = (f.e(s), f.e(o));
        adj.entry(s).or_default().insert(o);
        adj.entry(o).or_default().insert(s);
    }
    let mut m: Vec<EntityId> = Vec::new();
    for &x in mentioned {
        if !m.contains(&x) {
            m.push(x);
        }
    }
    let empty = BTreeSet::new();
    let n = |x: EntityId| adj.get(&x).unwrap_or(&empty);
    let total: f64 = m
        .iter()
        .map(|&mm| {
            let a1 = if n(e).contains(&mm) { 0.5 } else { 0.0 };
            let a2 = if k >= 2 { 0.25 * n(e).intersection(n(mm)).count() as f64 } else { 0.0 };
            a1 + a2
        })
        .sum();
    total / m.len() as f64
}

/// Where each name of a rendered path lies: (start, end, side, term id).
fn segments(f: &Fixture, p: &[Hop]) -> Vec<(usize, usize, Side, u32)> {
    let mut out = Vec::new();
    let mut pos = f.lin.boundary(Position::Head).len();
    let mut push = |side: Side, id: u32, pos: &mut usize| {
        let n = f.index.tokens(side, id).unwrap().unwrap().len();
        out.push((*pos, *pos + n, side, id));
        *pos += n;
    };
    push(Side::Entity, p[0].from.0, &mut pos);
    for (i, h) in p.iter().enumerate() {
        let (a, z) = around(i, h.edge.direction);
        pos += f.lin.boundary(a).len();
        push(Side::Relation, h.edge.relation.0, &mut pos);
        pos += f.lin.boundary(z).len();
        push(Side::Entity, h.edge.other.0, &mut pos);
    }
    out
}

/// log p_graph of every allowed token at `prefix`, by brute force over the admitted strings.
fn brute_prior(f: &Fixture, all: &BTreeMap<Vec<u32>, Vec<Vec<Hop>>>, prefix: &[u32], mentioned: &[EntityId], prior: &PriorConfig) -> BTreeMap<u32, f64> {
    // Every path of every string consistent with the prefix (homonyms included).
    let consistent: Vec<(&Vec<u32>, &Vec<Hop>)> =
        all.iter().filter(|(s, _)| s.starts_with(prefix)).flat_map(|(s, ps)| ps.iter().map(move |p| (s, p))).collect();
    let tokens: BTreeSet<u32> = consistent.iter().map(|(s, _)| s[prefix.len()]).collect();
    let at = prefix.len();
    // Every consistent string shares the segmentation up to `at` (boundaries are reserved).
    let (_, p0) = consistent[0];
    let seg = segments(f, p0).into_iter().find(|&(s, e, side, _)| side == Side::Entity && s <= at && at <= e);
    let k = match prior.mode {
        PriorMode::Hard | PriorMode::None => return tokens.iter().map(|&t| (t, 0.0)).collect(),
        PriorMode::Connection => 1,
        PriorMode::Katz => 2,
    };
    let Some((start, ..)) = seg else {
        return tokens.iter().map(|&t| (t, -(tokens.len() as f64).ln())).collect();
    };
    let index = segments(f, p0).iter().position(|x| x.0 == start).unwrap();
    // Entity -> the tokens its paths continue with here.
    let mut per: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (s, p) in &consistent {
        let e = segments(f, p)[index].3;
        per.entry(e).or_default().insert(s[at]);
    }
    let mut mass: BTreeMap<u32, f64> = BTreeMap::new();
    for (e, ts) in &per {
        let s = brute_s(f, EntityId(*e), mentioned, k);
        let m = match prior.norm {
            PriorNorm::Proportional => s + prior.epsilon,
            PriorNorm::Softmax => s,
        };
        // A continuing name gives all to its one next token; an ending one shares.
        for t in ts {
            *mass.entry(*t).or_default() += m / ts.len() as f64;
        }
    }
    let total: f64 = mass.values().sum();
    let lse: f64 = mass.values().map(|m| m.exp()).sum::<f64>().ln();
    mass.into_iter()
        .map(|(t, m)| {
            (
                t,
                match prior.norm {
                    PriorNorm::Proportional => (m / total).ln(),
                    PriorNorm::Softmax => m - lse,
                },
            )
        })
        .collect()
}

/// Boundaries of two tokens whose choices share their first token: `[Int1]`/`[Rev1]` and
/// `[Tail]`/`[Int3]`/`[Rev3]` differ only in the second.
fn shared_first_tokens() -> Linearization {
    let two = |a: &str, b: &str| vec![a.to_string(), b.to_string()];
    let mut lin = Linearization::trellis();
    lin.name = "shared".into();
    lin.int[0] = two("[X]", "[A]");
    lin.rev[0] = two("[X]", "[B]");
    lin.int[2] = two("[Y]", "[A]");
    lin.rev[2] = two("[Y]", "[B]");
    lin.tail = two("[Y]", "[C]");
    lin
}

fn graph_strategy() -> impl Strategy<Value = Vec<(usize, usize, usize)>> {
    proptest::collection::vec((0..ENTITY_NAMES.len(), 0..RELATION_NAMES.len(), 0..ENTITY_NAMES.len()), 1..16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_language_is_the_candidate_paths_and_the_prior_is_exact(
        facts in graph_strategy(),
        mentioned in proptest::collection::vec(0..ENTITY_NAMES.len(), 0..4),
        caps in (0usize..4, 1usize..3, 0usize..5),
        hub in 1usize..8,
        norm in prop_oneof![Just(PriorNorm::Proportional), Just(PriorNorm::Softmax)],
        mode in prop_oneof![Just(PriorMode::Hard), Just(PriorMode::Connection), Just(PriorMode::Katz)],
        lin in 0..3usize,
    ) {
        let tsv: String = facts.iter().map(|&(s, r, o)| format!("{}\t{}\t{}\n", ENTITY_NAMES[s], RELATION_NAMES[r], ENTITY_NAMES[o])).collect();
        let lin = [Linearization::trellis(), Linearization::dialoggsr(), shared_first_tokens()][lin].clone();
        let f = Fixture::with(&tsv, lin);
        let m: Vec<EntityId> = mentioned.iter().filter_map(|&i| f.store.entity_by_key(ENTITY_NAMES[i]).unwrap()).collect();
        let prior = PriorConfig::new(mode, norm, 0.001);
        let cfg = CandidateConfig { facts_per_entity: caps.0, tails_per_relation: caps.1, paths_per_entity: caps.2, hops: 2 };
        for source in [CandidateMode::Capped(cfg), CandidateMode::Uncapped { hub_degree: hub }, CandidateMode::Uncapped { hub_degree: 10_000 }] {
            let mut g = PathGraph::new(f.store.clone(), &f.index, &f.b, &m, source.clone(), prior.clone()).unwrap();
            let all = enumerate(&mut g);
            let every = brute_all(&f, &m, &source);
            let want = brute(&f, &m, &source);
            prop_assert_eq!(&all, &want, "{:?}", source);
            prop_assert_eq!(g.is_empty().unwrap(), all.is_empty());
            // Every string walks back to its path; `parse` finds a store path writing it.
            for (s, p) in &all {
                let back = g.accepts(s).unwrap();
                prop_assert_eq!(back.as_ref(), Some(p));
                let q = g.parse(s).unwrap().expect("a candidate string is a store path");
                let again = render(&f, q.hops[0].from, &q.hops);
                prop_assert_eq!(again.as_ref(), Some(s));
            }
            // The prior at every prefix of every string, against brute force.
            let prefixes: BTreeSet<&[u32]> = all.keys().flat_map(|s| (0..s.len()).map(move |i| &s[..i])).collect();
            for prefix in prefixes {
                let mut s = g.start();
                for &t in prefix {
                    s = g.advance(&s, t).unwrap().unwrap();
                }
                let mut a = Vec::new();
                g.allowed(&s, &mut a).unwrap();
                let want = brute_prior(&f, &every, prefix, &m, &prior);
                prop_assert_eq!(a.iter().map(|x| x.0).collect::<Vec<_>>(), want.keys().copied().collect::<Vec<_>>());
                for (t, l) in &a {
                    prop_assert!((l - want[t]).abs() < 1e-9, "{:?} at {}: {} vs {}", mode, f.text(prefix), l, want[t]);
                }
                if mode != PriorMode::Hard {
                    let sum: f64 = a.iter().map(|x| x.1.exp()).sum();
                    prop_assert!((sum - 1.0).abs() < 1e-9);
                }
            }
        }
    }
}

#[test]
fn states_of_another_request_give_errors_not_panics() {
    let f = Fixture::new(PRIOR);
    // Every state of a request with many groups...
    let mut big = f.graph(&["a"], uncapped(), PriorConfig::default());
    let mut states = vec![big.start()];
    let mut i = 0;
    let mut allowed = Vec::new();
    while i < states.len() {
        let s = states[i];
        big.allowed(&s, &mut allowed).unwrap();
        for &(t, _) in &allowed {
            states.push(big.advance(&s, t).unwrap().unwrap());
        }
        i += 1;
    }
    assert!(states.len() > 50);
    // ...handed to a request with fewer groups, fresh and then walked: an error or a refusal,
    // never a panic.
    let mut small = f.graph(&["big dog"], CandidateMode::Capped(CandidateConfig::default()), PriorConfig::default());
    for round in 0..2 {
        for s in &states {
            let _ = small.allowed(s, &mut allowed);
            for t in 0..40 {
                let _ = small.advance(s, t);
            }
            let _ = small.path(s);
        }
        if round == 0 {
            enumerate(&mut small);
        }
    }
    let foreign = states.iter().find(|s| small.allowed(s, &mut allowed).is_err());
    assert!(matches!(foreign.map(|s| small.allowed(s, &mut allowed)), Some(Err(super::DecodeError::ForeignState))));
}
