//! SURGE's context-relevant subgraph retrieval (seed 001, section 3.3): every fact of the
//! candidate subgraph scored by one model (`model::encoder::subgraph`) that embeds the
//! dialog, embeds the facts with a graph neural network over the subgraph, and takes their
//! inner product; a path scores the mean of its facts' scores. The candidates are the ones
//! every other retriever ranks (SURGE itself takes the 1-hop facts of the mentioned
//! entities; here 2-hop paths are candidates too, so that path@k compares).
//!
//! The model's training targets ([`SurgeTargetMaker`], `trellis targets`) are made by the
//! same code that builds its inputs at retrieval time.

use super::{dense, targets::resolve_gold, Names, RetrievalInput, RetrieveError, Retriever, RetrieverConfig, RetrieverKind};
use crate::dataset::opendialkg::{Dialog, Sample};
use crate::graph::candidates::{Fact, Hop};
use crate::ids::{EntityId, RelationId};
use crate::link::LinkConfig;
use crate::model::encoder::subgraph::{subgraph_ids, SubgraphIds, SubgraphText};
use crate::model::encoder::EncoderDir;
use crate::model::session::RuntimeOptions;
use crate::store::Store;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// How to build a SURGE retriever.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SurgeOptions {
    /// The subgraph model's directory (`trellis.json` task `subgraph`; `schema/model.md`).
    pub model: PathBuf,
    /// ONNX Runtime's device, threads and sessions.
    pub runtime: RuntimeOptions,
}

impl SurgeOptions {
    /// Options for the model at `model`, on the default runtime.
    pub fn new(model: impl Into<PathBuf>) -> SurgeOptions {
        SurgeOptions { model: model.into(), runtime: RuntimeOptions::default() }
    }

    /// Every numeric setting within its range of `crate::limits`.
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        crate::limits::check_runtime(self.runtime.threads, self.runtime.sessions)
    }
}

/// A candidate subgraph numbered as a subgraph model reads it: entities, relations and
/// facts in order of first appearance among the candidates' facts.
pub(crate) struct Indexed {
    entities: Vec<EntityId>,
    relations: Vec<RelationId>,
    facts: Vec<[u32; 3]>,
    index: HashMap<Fact, u32>,
}

impl Indexed {
    pub(crate) fn new(facts: impl Iterator<Item = Fact>) -> Indexed {
        let mut out = Indexed { entities: Vec::new(), relations: Vec::new(), facts: Vec::new(), index: HashMap::new() };
        let (mut es, mut rs): (HashMap<EntityId, u32>, HashMap<RelationId, u32>) = Default::default();
        for f @ (s, r, o) in facts {
            if out.index.contains_key(&f) {
                continue;
            }
            let mut entity = |e: EntityId| {
                *es.entry(e).or_insert_with(|| {
                    out.entities.push(e);
                    out.entities.len() as u32 - 1
                })
            };
            let (h, t) = (entity(s), entity(o));
            let rel = *rs.entry(r).or_insert_with(|| {
                out.relations.push(r);
                out.relations.len() as u32 - 1
            });
            out.index.insert(f, out.facts.len() as u32);
            out.facts.push([h, rel, t]);
        }
        out
    }

    /// The subgraph as the model's text input.
    fn text<'a>(&self, query: &'a str, mentioned: &[EntityId], names: &'a Names) -> SubgraphText<'a> {
        SubgraphText {
            query,
            entities: self.entities.iter().map(|&e| names.entity_text(e)).collect(),
            mentioned: self.entities.iter().map(|e| mentioned.contains(e)).collect(),
            relations: self.relations.iter().map(|&r| names.relation_text(r)).collect(),
            facts: self.facts.clone(),
        }
    }

    /// A path's facts as indices (a fact outside the subgraph: `None`).
    pub(crate) fn path_facts(&self, hops: &[Hop]) -> Option<Vec<u32>> {
        hops.iter().map(|h| self.index.get(&h.fact()).copied()).collect()
    }
}

/// A path's score: the mean of its facts' scores.
pub(crate) fn path_score(scores: &[f32], facts: &[u32]) -> f64 {
    if facts.is_empty() {
        return f64::NEG_INFINITY;
    }
    facts.iter().map(|&f| f64::from(scores[f as usize])).sum::<f64>() / facts.len() as f64
}

impl Retriever {
    /// The `surge` ranking of one input's candidates.
    pub(super) fn surge_paths(
        &self,
        scorer: &crate::model::encoder::subgraph::SubgraphScorer,
        input: &RetrievalInput<'_>,
        cand: &crate::graph::candidates::Candidates,
        paths: Vec<Vec<Hop>>,
    ) -> Result<Vec<super::ScoredPath>, RetrieveError> {
        let names = self.names_of(cand)?;
        let query = dense::query_text(input.text_history(), scorer.dir().turns());
        let sub = Indexed::new(cand.facts());
        let scores = scorer.score(&sub.text(&query, &input.mentioned, &names))?;
        let n = sub.facts.len();
        Ok(paths
            .into_iter()
            .map(|hops| {
                // Every candidate path's facts are in the subgraph built from the candidates.
                let score = sub.path_facts(&hops).map_or(f64::NEG_INFINITY, |f| path_score(&scores, &f));
                super::ScoredPath { hops, score, explanation: format!("surge {score:.4}, mean fact score over a subgraph of {n} facts"), tokens: Vec::new() }
            })
            .collect())
    }
}

/// One turn's training example for a subgraph model.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SurgeTarget {
    /// The dialog's index in the file (0-based).
    pub dialog: usize,
    /// The number of messages before the turn.
    pub upto: usize,
    /// Who took the action (`assistant` or `user`).
    pub speaker: String,
    /// The model's inputs for the turn's candidate subgraph (empty when `skipped`).
    #[serde(flatten)]
    pub ids: SubgraphIds,
    /// Each candidate path (in the order every retriever starts from) as its facts'
    /// indices.
    pub paths: Vec<Vec<u32>>,
    /// The gold path's index among `paths`.
    pub gold: Option<usize>,
    /// Why there is no example: `unknown_name`, `not_a_fact`, `not_a_path` (as a
    /// generative retriever's targets), or `not_a_candidate` (the gold path is not among
    /// the candidates, so no ranking of them can find it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
}

/// Writes the training targets of a subgraph model: per turn, exactly the inputs
/// `--retriever surge` gives the model (the dialog as written: not `rewrite_input`), the
/// candidate paths and the gold one.
pub struct SurgeTargetMaker {
    retriever: Retriever,
    dir: EncoderDir,
}

impl SurgeTargetMaker {
    /// `dir` may hold no graph yet ([`EncoderDir::open_spec`]); capped candidates with the
    /// defaults, as `--retriever surge` ranks.
    pub fn open(store: Arc<Store>, dir: EncoderDir, link: LinkConfig) -> Result<SurgeTargetMaker, RetrieveError> {
        let mut cfg = RetrieverConfig::new(RetrieverKind::All);
        cfg.link = link;
        Ok(SurgeTargetMaker { retriever: Retriever::new(store, cfg)?, dir })
    }

    /// The target of one sample of `dialog` (the dialog's `index` in its file).
    pub fn target(&self, index: usize, dialog: &Dialog, sample: &Sample) -> Result<SurgeTarget, RetrieveError> {
        let history = &dialog.messages[..sample.upto];
        let mut out = SurgeTarget {
            dialog: index,
            upto: sample.upto,
            speaker: sample.speaker.clone(),
            ids: SubgraphIds::default(),
            paths: Vec::new(),
            gold: None,
            skipped: None,
        };
        let gold = match sample.paths.first() {
            Some(p) => resolve_gold(self.retriever.store(), p)?,
            None => Err("not_a_path"),
        };
        let gold: Vec<Fact> = match gold {
            Ok(hops) => hops.iter().map(Hop::fact).collect(),
            Err(why) => {
                out.skipped = Some(why);
                return Ok(out);
            }
        };
        let input = self.retriever.input(history)?;
        let cand = self.retriever.candidates(&input.mentioned)?;
        let mut paths: Vec<Vec<Hop>> = cand.one_hop.iter().map(|h| vec![*h]).collect();
        paths.extend(cand.two_hop.iter().map(|p| p.to_vec()));
        out.gold = paths.iter().position(|p| p.iter().map(Hop::fact).eq(gold.iter().copied()));
        if out.gold.is_none() {
            out.skipped = Some("not_a_candidate");
            return Ok(out);
        }
        let names = self.retriever.names_of(&cand)?;
        let query = dense::query_text(history, self.dir.turns());
        let sub = Indexed::new(cand.facts());
        out.ids = subgraph_ids(&self.dir, &sub.text(&query, &input.mentioned, &names))?;
        out.paths = paths.iter().map(|p| sub.path_facts(p).unwrap_or_default()).collect();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Direction;
    use crate::store::Edge;

    fn hop(from: u32, rel: u32, other: u32, direction: Direction) -> Hop {
        Hop { from: EntityId(from), edge: Edge { direction, relation: RelationId(rel), other: EntityId(other) } }
    }

    #[test]
    fn facts_numbered_by_first_appearance_and_paths_scored_by_their_mean() {
        // Facts: (1 r7 2), (2 r8 3), (1 r7 2) again, (4 r7 1).
        let facts = [
            (EntityId(1), RelationId(7), EntityId(2)),
            (EntityId(2), RelationId(8), EntityId(3)),
            (EntityId(1), RelationId(7), EntityId(2)),
            (EntityId(4), RelationId(7), EntityId(1)),
        ];
        let sub = Indexed::new(facts.into_iter());
        assert_eq!(sub.entities, vec![EntityId(1), EntityId(2), EntityId(3), EntityId(4)]);
        assert_eq!(sub.relations, vec![RelationId(7), RelationId(8)]);
        assert_eq!(sub.facts, vec![[0, 0, 1], [1, 1, 2], [3, 0, 0]]);
        // Walked from 1 backwards over (4 r7 1): the stored fact, whatever the direction.
        let back = hop(1, 7, 4, Direction::In);
        assert_eq!(sub.path_facts(&[back]), Some(vec![2]));
        let two = [hop(1, 7, 2, Direction::Out), hop(2, 8, 3, Direction::Out)];
        assert_eq!(sub.path_facts(&two), Some(vec![0, 1]));
        assert_eq!(sub.path_facts(&[hop(9, 7, 2, Direction::Out)]), None);
        let scores = [0.5f32, -1.5, 2.0];
        assert_eq!(path_score(&scores, &[0, 1]), -0.5);
        assert_eq!(path_score(&scores, &[2]), 2.0);
    }
}
