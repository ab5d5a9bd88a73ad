//! Retrieve, then rerank (Triton's relevance step at engine size): the top N paths of each
//! pooled retriever, merged (a path found by several is scored once), scored by a
//! cross-encoder on (dialog, verbalized path) pairs plus a weight times the path's
//! reciprocal ranks in the retrievers that found it (rank fusion: the cross-encoder alone
//! ranks below gsr alone on dev, the two together above; docs/retrieval.md); that order is
//! the answer.

use super::{RetrieverKind, ScoredPath};
use crate::graph::candidates::{Fact, Hop};
use crate::model::session::RuntimeOptions;
use std::path::PathBuf;

/// Paths each pooled retriever hands the reranker by default.
pub const DEFAULT_TOP: usize = 20;

/// The default weight of the reciprocal ranks: chosen on the OpenDialKG dev split with the
/// shipped models (the gsr + pcst pool's path@1 is within 0.005 of its best for
/// weights 0.7 to 1.5; docs/results-2026-11-26.md).
pub const DEFAULT_FUSION: f64 = 1.0;

/// How to rerank.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RerankOptions {
    /// The cross-encoder's directory (`trellis.json` task `rerank`; `schema/model.md`).
    pub model: PathBuf,
    /// ONNX Runtime's device, threads and sessions.
    pub runtime: RuntimeOptions,
    /// Pairs scored together at most.
    pub batch: usize,
    /// Paths taken from each pooled retriever (the best ones).
    pub top: usize,
    /// Retrievers pooled besides the retriever itself (the pool is the union of their top
    /// paths and its own); one already in the pool is not run twice.
    pub pool: Vec<RetrieverKind>,
    /// A path's score is the cross-encoder's plus `fusion` times the sum of 1/rank over
    /// the pooled retrievers that found it (0: the cross-encoder's alone).
    pub fusion: f64,
}

impl RerankOptions {
    /// Options for the model at `model`: the top [`DEFAULT_TOP`] of the retriever alone,
    /// batches of 32, fusion weight [`DEFAULT_FUSION`].
    pub fn new(model: impl Into<PathBuf>) -> RerankOptions {
        RerankOptions {
            model: model.into(),
            runtime: RuntimeOptions::default(),
            batch: crate::model::encoder::DEFAULT_BATCH,
            top: DEFAULT_TOP,
            pool: Vec::new(),
            fusion: DEFAULT_FUSION,
        }
    }

    /// Every numeric setting within its range of `crate::limits`.
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        crate::limits::BATCH.check_usize(self.batch)?;
        crate::limits::RERANK_TOP.check_usize(self.top)?;
        crate::limits::RERANK_FUSION.check(self.fusion)?;
        crate::limits::check_runtime(self.runtime.threads, self.runtime.sessions)
    }
}

/// A pooled path: the path, and where each retriever that found it ranked it.
#[derive(Clone, Debug)]
pub(crate) struct Pooled {
    pub(crate) hops: Vec<Hop>,
    /// Each retriever that found it, in pool order.
    pub(crate) found: Vec<Found>,
}

/// Where one retriever ranked a pooled path, and its own score there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Found {
    pub(crate) retriever: &'static str,
    /// 1-based.
    pub(crate) rank: usize,
    pub(crate) score: f64,
}

/// The union of each list's first `top` paths: in order of first appearance (the first
/// list's paths first, then the new ones of the second, ...), a path found again adding
/// its rank to the first entry. Two paths are the same when their facts are, in the same
/// order: a fact walked from either end is one path, as its text (and so its score) is one.
/// The walk kept is the first one seen.
pub(crate) fn union(lists: &[(&'static str, &[ScoredPath])], top: usize) -> Vec<Pooled> {
    let mut out: Vec<Pooled> = Vec::new();
    let mut index: hashbrown::HashMap<Vec<Fact>, usize> = hashbrown::HashMap::new();
    for &(name, list) in lists {
        for (rank, p) in list.iter().take(top).enumerate() {
            let facts: Vec<Fact> = p.hops.iter().map(Hop::fact).collect();
            match index.get(&facts) {
                // One list holding a path twice (two walks of it) counts its better rank only.
                Some(&i) if out[i].found.iter().any(|f| f.retriever == name) => {}
                Some(&i) => out[i].found.push(Found { retriever: name, rank: rank + 1, score: p.score }),
                None => {
                    index.insert(facts, out.len());
                    out.push(Pooled { hops: p.hops.clone(), found: vec![Found { retriever: name, rank: rank + 1, score: p.score }] });
                }
            }
        }
    }
    out
}

/// The sum of 1/rank over the retrievers that found a path, in pool order.
pub(crate) fn reciprocal_ranks(found: &[Found]) -> f64 {
    found.iter().map(|f| 1.0 / f.rank as f64).sum()
}

/// The pooled paths with their cross-encoder scores `scores` fused with their ranks
/// (`fusion` times [`reciprocal_ranks`]), best first; ties keep pool order.
pub(crate) fn order(pooled: Vec<Pooled>, scores: &[f32], fusion: f64) -> Vec<ScoredPath> {
    let mut out: Vec<ScoredPath> = pooled
        .into_iter()
        .zip(scores)
        .map(|(p, &s)| {
            let from = p.found.iter().map(|f| format!("{} #{} ({:.4})", f.retriever, f.rank, f.score)).collect::<Vec<_>>().join(", ");
            let (score, explanation) = if fusion == 0.0 {
                (f64::from(s), format!("reranked {s:.4}; from {from}"))
            } else {
                let rr = reciprocal_ranks(&p.found);
                (f64::from(s) + fusion * rr, format!("reranked {s:.4} + {fusion} x {rr:.4} (1/rank); from {from}"))
            };
            ScoredPath { hops: p.hops, score, explanation, tokens: Vec::new() }
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Direction, EntityId, RelationId};
    use crate::store::Edge;

    fn hop(s: u32, r: u32, o: u32) -> Hop {
        Hop { from: EntityId(s), edge: Edge { direction: Direction::Out, relation: RelationId(r), other: EntityId(o) } }
    }

    fn path(hops: Vec<Hop>) -> ScoredPath {
        ScoredPath { hops, score: 0.0, explanation: String::new(), tokens: Vec::new() }
    }

    fn ranks(p: &Pooled) -> Vec<(&'static str, usize)> {
        p.found.iter().map(|f| (f.retriever, f.rank)).collect()
    }

    #[test]
    fn the_union_merges_duplicates_in_first_appearance_order() {
        let (a, b, c, d) = (vec![hop(1, 1, 2)], vec![hop(1, 2, 3)], vec![hop(1, 1, 2), hop(2, 3, 4)], vec![hop(5, 1, 6)]);
        let gsr = [path(a.clone()), path(b.clone()), path(c.clone())];
        let pcst = [path(c.clone()), path(d.clone()), path(a.clone())];
        let u = union(&[("gsr", &gsr), ("pcst", &pcst)], 3);
        let hops: Vec<_> = u.iter().map(|p| p.hops.clone()).collect();
        assert_eq!(hops, vec![a.clone(), b.clone(), c.clone(), d.clone()]);
        assert_eq!(ranks(&u[0]), vec![("gsr", 1), ("pcst", 3)]);
        assert_eq!(ranks(&u[2]), vec![("gsr", 3), ("pcst", 1)]);
        assert_eq!(ranks(&u[3]), vec![("pcst", 2)]);
        // `top` cuts each list before the union: pcst's third path (a) is not seen.
        let u = union(&[("gsr", &gsr[..1]), ("pcst", &pcst)], 2);
        assert_eq!(u.iter().map(|p| p.hops.clone()).collect::<Vec<_>>(), vec![a, c, d]);
        assert_eq!(ranks(&u[0]), vec![("gsr", 1)]);
    }

    #[test]
    fn the_order_is_by_score_and_stable_on_ties() {
        let pooled: Vec<Pooled> =
            (0..4).map(|i| Pooled { hops: vec![hop(i, 1, 9)], found: vec![Found { retriever: "bm25", rank: i as usize + 1, score: 0.25 }] }).collect();
        let out = order(pooled, &[0.5, 2.0, 0.5, -1.0], 0.0);
        let firsts: Vec<u32> = out.iter().map(|p| p.hops[0].from.0).collect();
        assert_eq!(firsts, vec![1, 0, 2, 3]);
        assert_eq!(out[0].explanation, "reranked 2.0000; from bm25 #2 (0.2500)");
    }

    /// A fact walked from either end is one path (one text, one score): the two walks
    /// merge, the first kept, both ranks counted; a list holding it twice counts once.
    #[test]
    fn the_union_merges_walks_of_the_same_facts() {
        let out_walk = vec![hop(1, 7, 2)];
        let in_walk = vec![Hop { from: EntityId(2), edge: Edge { direction: Direction::In, relation: RelationId(7), other: EntityId(1) } }];
        assert_eq!(in_walk[0].fact(), out_walk[0].fact());
        let other = vec![hop(1, 8, 3)];
        let gsr = [path(out_walk.clone()), path(other.clone())];
        let pcst = [path(in_walk.clone()), path(out_walk.clone())];
        let u = union(&[("gsr", &gsr), ("pcst", &pcst)], 5);
        assert_eq!(u.iter().map(|p| p.hops.clone()).collect::<Vec<_>>(), vec![out_walk, other]);
        assert_eq!(ranks(&u[0]), vec![("gsr", 1), ("pcst", 1)]);
        assert_eq!(ranks(&u[1]), vec![("gsr", 2)]);
    }

    /// Equal fused scores keep the pool order.
    #[test]
    fn fused_ties_keep_the_pool_order() {
        let f = |rank| Found { retriever: "gsr", rank, score: 0.0 };
        let pooled: Vec<Pooled> = (1..=3).map(|i| Pooled { hops: vec![hop(i, 1, 9)], found: vec![f(i as usize)] }).collect();
        // 0.5 + 1/1 = 1.5, 1.0 + 1/2 = 1.5, 1.25 + 1/3: the first two tie.
        let out = order(pooled, &[0.5, 1.0, 1.25], 1.0);
        assert_eq!(out.iter().map(|p| p.hops[0].from.0).collect::<Vec<_>>(), vec![3, 1, 2]);
    }

    /// Worked by hand: scores 0.5, 0.875, 0.125 and ranks gsr #1 + pcst #2, gsr #2, pcst #1:
    /// fused with weight 0.5, 0.5 + 0.5 x 1.5 = 1.25, 0.875 + 0.5 x 0.5 = 1.125, 0.125 + 0.5 x 1 = 0.625.
    #[test]
    fn fusion_adds_the_weighted_reciprocal_ranks() {
        let f = |retriever, rank| Found { retriever, rank, score: 0.0 };
        let pooled = vec![
            Pooled { hops: vec![hop(1, 1, 9)], found: vec![f("gsr", 1), f("pcst", 2)] },
            Pooled { hops: vec![hop(2, 1, 9)], found: vec![f("gsr", 2)] },
            Pooled { hops: vec![hop(3, 1, 9)], found: vec![f("pcst", 1)] },
        ];
        let out = order(pooled.clone(), &[0.5, 0.875, 0.125], 0.5);
        let got: Vec<(u32, f64)> = out.iter().map(|p| (p.hops[0].from.0, p.score)).collect();
        assert_eq!(got, vec![(1, 1.25), (2, 1.125), (3, 0.625)]);
        assert_eq!(out[0].explanation, "reranked 0.5000 + 0.5 x 1.5000 (1/rank); from gsr #1 (0.0000), pcst #2 (0.0000)");
        // The cross-encoder alone puts the second path first.
        let alone = order(pooled, &[0.5, 0.875, 0.125], 0.0);
        assert_eq!(alone.iter().map(|p| p.hops[0].from.0).collect::<Vec<_>>(), vec![2, 1, 3]);
    }
}
