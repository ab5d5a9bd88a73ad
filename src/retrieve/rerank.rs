//! Retrieve, then rerank (Triton's relevance step at engine size): the top N paths of each
//! pooled retriever, merged (a path found by several is scored once), scored by a
//! cross-encoder on (dialog, verbalized path) pairs; its order is the answer.

use super::{RetrieverKind, ScoredPath};
use crate::graph::candidates::Hop;
use crate::model::session::RuntimeOptions;
use std::path::PathBuf;

/// Paths each pooled retriever hands the reranker by default.
pub const DEFAULT_TOP: usize = 20;

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
}

impl RerankOptions {
    /// Options for the model at `model`: the top [`DEFAULT_TOP`] of the retriever alone,
    /// batches of 32.
    pub fn new(model: impl Into<PathBuf>) -> RerankOptions {
        RerankOptions {
            model: model.into(),
            runtime: RuntimeOptions::default(),
            batch: crate::model::encoder::DEFAULT_BATCH,
            top: DEFAULT_TOP,
            pool: Vec::new(),
        }
    }

    /// Every numeric setting within its range of `crate::limits`.
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        crate::limits::BATCH.check_usize(self.batch)?;
        crate::limits::RERANK_TOP.check_usize(self.top)?;
        crate::limits::check_runtime(self.runtime.threads, self.runtime.sessions)
    }
}

/// A pooled path: the path, and where each retriever that found it ranked it.
#[derive(Clone, Debug)]
pub(crate) struct Pooled {
    pub(crate) hops: Vec<Hop>,
    /// (retriever's name, 1-based rank), in pool order.
    pub(crate) found: Vec<(&'static str, usize)>,
}

/// The union of each list's first `top` paths: in order of first appearance (the first
/// list's paths first, then the new ones of the second, ...), a path found again adding
/// its rank to the first entry. Two paths are the same when their hops are (same facts,
/// walked the same way).
pub(crate) fn union(lists: &[(&'static str, &[ScoredPath])], top: usize) -> Vec<Pooled> {
    let mut out: Vec<Pooled> = Vec::new();
    let mut index: hashbrown::HashMap<Vec<Hop>, usize> = hashbrown::HashMap::new();
    for &(name, list) in lists {
        for (rank, p) in list.iter().take(top).enumerate() {
            match index.get(&p.hops) {
                Some(&i) => out[i].found.push((name, rank + 1)),
                None => {
                    index.insert(p.hops.clone(), out.len());
                    out.push(Pooled { hops: p.hops.clone(), found: vec![(name, rank + 1)] });
                }
            }
        }
    }
    out
}

/// The pooled paths with their reranker scores, best first; ties keep pool order.
pub(crate) fn order(pooled: Vec<Pooled>, scores: &[f32]) -> Vec<ScoredPath> {
    let mut out: Vec<ScoredPath> = pooled
        .into_iter()
        .zip(scores)
        .map(|(p, &s)| {
            let from = p.found.iter().map(|(n, r)| format!("{n} #{r}")).collect::<Vec<_>>().join(", ");
            ScoredPath { hops: p.hops, score: f64::from(s), explanation: format!("reranked {s:.4}; from {from}"), tokens: Vec::new() }
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

    #[test]
    fn the_union_merges_duplicates_in_first_appearance_order() {
        let (a, b, c, d) = (vec![hop(1, 1, 2)], vec![hop(1, 2, 3)], vec![hop(1, 1, 2), hop(2, 3, 4)], vec![hop(5, 1, 6)]);
        let gsr = [path(a.clone()), path(b.clone()), path(c.clone())];
        let pcst = [path(c.clone()), path(d.clone()), path(a.clone())];
        let u = union(&[("gsr", &gsr), ("pcst", &pcst)], 3);
        let hops: Vec<_> = u.iter().map(|p| p.hops.clone()).collect();
        assert_eq!(hops, vec![a.clone(), b.clone(), c.clone(), d.clone()]);
        assert_eq!(u[0].found, vec![("gsr", 1), ("pcst", 3)]);
        assert_eq!(u[2].found, vec![("gsr", 3), ("pcst", 1)]);
        assert_eq!(u[3].found, vec![("pcst", 2)]);
        // `top` cuts each list before the union: pcst's third path (a) is not seen.
        let u = union(&[("gsr", &gsr[..1]), ("pcst", &pcst)], 2);
        assert_eq!(u.iter().map(|p| p.hops.clone()).collect::<Vec<_>>(), vec![a, c, d]);
        assert_eq!(u[0].found, vec![("gsr", 1)]);
    }

    #[test]
    fn the_order_is_by_score_and_stable_on_ties() {
        let pooled: Vec<Pooled> = (0..4).map(|i| Pooled { hops: vec![hop(i, 1, 9)], found: vec![("bm25", i as usize + 1)] }).collect();
        let out = order(pooled, &[0.5, 2.0, 0.5, -1.0]);
        let firsts: Vec<u32> = out.iter().map(|p| p.hops[0].from.0).collect();
        assert_eq!(firsts, vec![1, 0, 2, 3]);
        assert_eq!(out[0].explanation, "reranked 2.0000; from bm25 #2");
    }
}
