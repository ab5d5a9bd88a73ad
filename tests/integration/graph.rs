//! Informativeness against brute-force powers of the adjacency matrix, and the capped,
//! deterministic candidate subgraph.

use crate::common::*;
use std::collections::BTreeSet;
use trellis::graph::informativeness::{Depth, Informativeness, KatzConfig};
use trellis::graph::Hop;
use trellis::retrieve::{RetrievalInput, Retriever, RetrieverConfig, RetrieverKind};
use trellis::{EntityId, Store};

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A random graph as TSV, and its facts by entity index (names are `n{i}`).
fn random_graph(seed: u64, entities: u64, facts: usize) -> (String, Vec<(u64, u64)>) {
    let mut rng = Lcg(seed);
    let mut text = String::new();
    let mut pairs = Vec::new();
    // Name every entity first so entity i gets id i.
    for i in 0..entities {
        text.push_str(&format!("n{i}\tself_name\tn{i}\n"));
        pairs.push((i, i));
    }
    for _ in 0..facts {
        let (s, o, r) = (rng.below(entities), rng.below(entities), rng.below(3));
        text.push_str(&format!("n{s}\tr{r}\tn{o}\n"));
        pairs.push((s, o));
    }
    (text, pairs)
}

fn mat_mul(a: &[Vec<u64>], b: &[Vec<u64>]) -> Vec<Vec<u64>> {
    let n = a.len();
    let mut c = vec![vec![0u64; n]; n];
    for i in 0..n {
        for k in 0..n {
            if a[i][k] != 0 {
                for j in 0..n {
                    c[i][j] += a[i][k] * b[k][j];
                }
            }
        }
    }
    c
}

#[test]
fn katz_equals_brute_force_matrix_powers() {
    for seed in 1..=6u64 {
        let n = 25u64;
        let (text, pairs) = random_graph(seed, n, 60);
        let dir = tempfile::tempdir().unwrap();
        let input = write(dir.path(), "g.tsv", text.as_bytes());
        let s = dir.path().join("s");
        ingest(&s, &[], &[&input]);
        let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
        // The undirected 0/1 adjacency, self-loops included (every entity has one here).
        let mut a = vec![vec![0u64; n as usize]; n as usize];
        for &(x, y) in &pairs {
            a[x as usize][y as usize] = 1;
            a[y as usize][x as usize] = 1;
        }
        let a2 = mat_mul(&a, &a);
        let a3 = mat_mul(&a2, &a);
        let mut rng = Lcg(seed * 97);
        let mentioned: Vec<u64> = (0..3).map(|_| rng.below(n)).collect::<BTreeSet<_>>().into_iter().collect();
        let ids: Vec<EntityId> = mentioned.iter().map(|&m| EntityId(m as u32)).collect();
        for (depth, k) in [(Depth::One, 1), (Depth::Two, 2), (Depth::Three, 3)] {
            let beta = 0.5;
            let mut inf = Informativeness::new(store.clone(), &ids, {
                let mut o = KatzConfig::default();
                o.k = depth;
                o.beta = beta;
                o.hub_degree = usize::MAX;
                o
            })
            .unwrap();
            // A cache that starts over at almost every list must give the same scores.
            let mut small = Informativeness::new(store.clone(), &ids, {
                let mut o = KatzConfig::default();
                o.k = depth;
                o.beta = beta;
                o.hub_degree = usize::MAX;
                o
            })
            .unwrap()
            .with_cache_budget(3);
            for e in 0..n as usize {
                let mut total = 0.0;
                for &m in &mentioned {
                    let m = m as usize;
                    let mut s = beta * a[e][m] as f64;
                    if k >= 2 {
                        s += beta * beta * a2[e][m] as f64;
                    }
                    if k >= 3 {
                        s += beta * beta * beta * a3[e][m] as f64;
                    }
                    total += s;
                }
                let expected = total / mentioned.len() as f64;
                let got = inf.score(EntityId(e as u32)).unwrap();
                assert_eq!(got.value, expected, "seed {seed}, K={k}, entity {e}");
                assert!(!got.truncated);
                assert_eq!(small.score(EntityId(e as u32)).unwrap(), got, "seed {seed}, K={k}, entity {e}: small cache");
            }
        }
    }
}

#[test]
fn hub_guard_skips_hubs_and_says_so() {
    // A star: hub h linked to 20 leaves; the mentioned leaf l0 and scored leaf l1 meet only
    // through the hub.
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!("h\tr\tl{i}\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", text.as_bytes());
    let s = dir.path().join("s");
    ingest(&s, &[], &[&input]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let l0 = store.entity_by_key("l0").unwrap().unwrap();
    let l1 = store.entity_by_key("l1").unwrap().unwrap();
    let exact = Informativeness::new(store.clone(), &[l0], {
        let mut o = KatzConfig::default();
        o.k = Depth::Three;
        o.beta = 0.5;
        o.hub_degree = usize::MAX;
        o
    })
    .unwrap()
    .score(l1)
    .unwrap();
    // l1-h-l0 is one 2-path (0.25); 3-paths l1-h-x-l0 need x adjacent to l0: only h, and h-h
    // is no edge, so A^3[l1, l0] = 0.
    assert_eq!(exact.value, 0.25);
    let star_center = store.entity_by_key("h").unwrap().unwrap();
    // Exact, for the hub itself: A = 1 (h-l0), A^2 = |N(h) ∩ N(l0)| = 0,
    // A^3 = sum over the 20 leaves x of |N(x) ∩ N(l0)| = 20: 0.5 + 20 * 0.125 = 3.
    let exact_hub = Informativeness::new(store.clone(), &[l0], {
        let mut o = KatzConfig::default();
        o.k = Depth::Three;
        o.beta = 0.5;
        o.hub_degree = usize::MAX;
        o
    })
    .unwrap()
    .score(star_center)
    .unwrap();
    assert_eq!(exact_hub.value, 3.0);
    let mut guarded = Informativeness::new(store.clone(), &[l0], {
        let mut o = KatzConfig::default();
        o.k = Depth::Three;
        o.beta = 0.5;
        o.hub_degree = 5;
        o
    })
    .unwrap();
    let g = guarded.score(star_center).unwrap();
    // The hub (20 facts > 5) keeps only its connection term, read from l0's list.
    assert!(g.truncated);
    assert_eq!(g.value, 0.5);
    let g = guarded.score(l1).unwrap();
    assert!(g.truncated, "l1's only neighbour is the hub (degree 20 > 5)");
    assert_eq!(g.value, 0.25, "the 1- and 2-hop terms need no intermediate lists");
}

#[test]
fn a_mentioned_hub_is_guarded() {
    // A star: h with 20 leaves, plus l1-l2 and l1-x. Mentioned: the hub h.
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!("h\tr\tl{i}\n"));
    }
    text.push_str("l1\tr\tl2\nl1\tr\tx\n");
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", text.as_bytes());
    let s = dir.path().join("s");
    ingest(&s, &[], &[&input]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let key = |k: &str| store.entity_by_key(k).unwrap().unwrap();
    let (h, l1, x) = (key("h"), key("l1"), key("x"));
    let cfg = |hub_degree| {
        let mut o = KatzConfig::default();
        o.k = Depth::Two;
        o.beta = 0.5;
        o.hub_degree = hub_degree;
        o
    };
    // Exact: A[l1, h] = 1, (A^2)[l1, h] = |{h, l2, x} ∩ {l0..l19}| = 1 (l2): 0.5 + 0.25.
    let exact = Informativeness::new(store.clone(), &[h], cfg(usize::MAX)).unwrap().score(l1).unwrap();
    assert_eq!(exact, trellis::graph::informativeness::Score { value: 0.75, truncated: false });
    // Guarded (21 facts at h > 5): h's list is never read; A[l1, h] comes from l1's list,
    // the 2-hop term needs h's list and is skipped.
    let mut guarded = Informativeness::new(store.clone(), &[h], cfg(5)).unwrap();
    assert_eq!(guarded.score(l1).unwrap(), trellis::graph::informativeness::Score { value: 0.5, truncated: true });
    // x is not adjacent to h: the connection term is 0 from x's own list.
    assert_eq!(guarded.score(x).unwrap(), trellis::graph::informativeness::Score { value: 0.0, truncated: true });
    // Scoring the hub itself against itself: both are hubs, nothing can be read.
    assert_eq!(guarded.score(h).unwrap(), trellis::graph::informativeness::Score { value: 0.0, truncated: true });
    // A mentioned entity under the threshold is unaffected by the guard.
    let mut small = Informativeness::new(store.clone(), &[l1], cfg(5)).unwrap();
    assert_eq!(small.score(x).unwrap(), trellis::graph::informativeness::Score { value: 0.5, truncated: false });
}

#[test]
fn candidates_are_capped_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &["--on-error", "skip"], &[&shared_data("opendialkg/kg.tsv")]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let named = |n: &str| store.entity_by_key(n).unwrap().unwrap();
    let mentioned = vec![named("Jordan Spieth"), named("Golf"), named("The Dark Knight"), named("Jordan Spieth")];
    // The `all` retriever returns the candidate subgraph as it is, in candidate order.
    let rc = RetrieverConfig::new(RetrieverKind::All);
    let cfg = rc.candidates.clone();
    let retriever = Retriever::new(store.clone(), rc).unwrap();
    let candidates = || -> Vec<Vec<Hop>> { retriever.rank(&RetrievalInput::given(&[], mentioned.clone())).unwrap().into_iter().map(|p| p.hops).collect() };
    let c = candidates();
    assert_eq!(c, candidates(), "same input, same candidates");
    // A retriever keeps each entity's candidates: one that has answered other inputs first
    // (each entity alone, in another order) answers as a fresh one does.
    let used = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::All)).unwrap();
    for m in [named("The Dark Knight"), named("Golf"), named("Jordan Spieth")] {
        used.rank(&RetrievalInput::given(&[], vec![m])).unwrap();
    }
    let from_used: Vec<Vec<Hop>> = used.rank(&RetrievalInput::given(&[], mentioned.clone())).unwrap().into_iter().map(|p| p.hops).collect();
    assert_eq!(from_used, c, "kept candidates, concatenated in the input's order");
    let first = c.iter().position(|p| p.len() == 2).unwrap_or(c.len());
    assert!(c[first..].iter().all(|p| p.len() == 2), "1-hop paths first, then 2-hop ones");
    let one_hop: Vec<Hop> = c[..first].iter().map(|p| p[0]).collect();
    let two_hop = &c[first..];
    // Jordan Spieth's 4 facts (hand-checked in real_data.rs), all of them.
    let spieth: Vec<_> = one_hop.iter().filter(|h| h.from == named("Jordan Spieth")).collect();
    assert_eq!(spieth.len(), 4);
    for m in [named("Jordan Spieth"), named("Golf"), named("The Dark Knight")] {
        let hops: Vec<_> = one_hop.iter().filter(|h| h.from == m).collect();
        assert!(hops.len() <= cfg.facts_per_entity);
        let mut per_relation = std::collections::HashMap::new();
        for h in &hops {
            *per_relation.entry((h.edge.direction, h.edge.relation)).or_insert(0) += 1;
            // Every candidate is a stored fact.
            let (s, r, o) = h.fact();
            assert!(store.neighbors_via(s, trellis::Direction::Out, r).unwrap().contains(&o));
        }
        assert!(per_relation.values().all(|&n| n <= cfg.tails_per_relation));
        let paths: Vec<_> = two_hop.iter().filter(|p| p[0].from == m).collect();
        assert!(paths.len() <= cfg.paths_per_entity);
        for p in paths {
            assert_eq!(p[1].from, p[0].edge.other);
            assert_ne!(p[1].edge.other, m, "never back to the start entity");
        }
    }
    // Golf has hundreds of facts through few relations: the per-relation cap binds, and the
    // count is what the relation counts say it must be.
    let golf = named("Golf");
    let mut expected = 0;
    for dir in [trellis::Direction::Out, trellis::Direction::In] {
        for (_, n) in store.relations_at(golf, dir).unwrap() {
            expected += (n as usize).min(cfg.tails_per_relation);
        }
    }
    let stored = store.degree(golf, trellis::Direction::Out).unwrap() + store.degree(golf, trellis::Direction::In).unwrap();
    assert!(stored as usize > expected, "Golf has {stored} facts");
    assert_eq!(one_hop.iter().filter(|h| h.from == golf).count(), expected.min(cfg.facts_per_entity));
}

#[test]
fn a_second_hop_passes_over_the_start_entity_without_losing_its_cap() {
    // B r A, B r C, B r D, E s B; ids in input order: B 0, A 1, C 2, D 3, E 4. From A
    // (mentioned), the one fact is A <-r- B; B's lists are Out r [A, C, D] and In s [E].
    // With two tails a relation, the walk back to A is passed over and not counted, so
    // B's r list still gives C and D (not C alone), then E: three 2-hop paths, in store
    // order (direction Out first, then relation, then neighbour id).
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", b"B\tr\tA\nB\tr\tC\nB\tr\tD\nE\ts\tB\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&input]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let key = |k: &str| store.entity_by_key(k).unwrap().unwrap();
    let mut rc = RetrieverConfig::new(RetrieverKind::All);
    rc.candidates.tails_per_relation = 2;
    let retriever = Retriever::new(store.clone(), rc).unwrap();
    let paths: Vec<Vec<(String, String, String)>> = retriever
        .rank(&RetrievalInput::given(&[], vec![key("A")]))
        .unwrap()
        .into_iter()
        .map(|p| {
            p.hops
                .iter()
                .map(|h| {
                    let (s, r, o) = h.fact();
                    let name = |e: EntityId| store.entity_info(e).unwrap().unwrap().key;
                    (name(s), store.relation(r).unwrap().unwrap().key, name(o))
                })
                .collect()
        })
        .collect();
    let f = |s: &str, r: &str, o: &str| (s.to_string(), r.to_string(), o.to_string());
    assert_eq!(
        paths,
        vec![
            vec![f("B", "r", "A")],
            vec![f("B", "r", "A"), f("B", "r", "C")],
            vec![f("B", "r", "A"), f("B", "r", "D")],
            vec![f("B", "r", "A"), f("E", "s", "B")],
        ]
    );
}
