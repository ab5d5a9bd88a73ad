//! `--retriever search`: knowledge from the query producer (seed 002) on the store's text
//! index. The turn's query candidates are ranked by a producer; the top `queries` of them
//! are searched (top 5 entity documents each); each found entity gets a relevance, the best
//! over the queries that found it of `hit score / best hit score of its query / (query rank
//! + 1)`. Two ways to turn found entities into paths:
//! - `facts`: each found entity's facts (its first [`FACTS_PER_ENTITY`] in each direction,
//!   adjacency order) as one-hop paths from it, by the entity's relevance;
//! - `paths`: the usual candidate paths from the dialog's entities, by the best relevance
//!   of an entity they reach (a path reaching no found entity scores 0, in candidate order).

use super::{RetrieveError, ScoredPath};
use crate::graph::candidates::Hop;
use crate::ids::{Direction, EntityId};
use crate::link::Mention;
use crate::queries::{search_turn, LinearScorer, Producer, QueryError};
use crate::store::Store;
use crate::text::TextIndex;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

/// Facts per direction a found entity contributes in the `facts` mode.
pub const FACTS_PER_ENTITY: usize = 16;

/// How the queries are ranked.
#[derive(Clone, Debug, PartialEq)]
pub enum SearchProducer {
    /// Seeded shuffle.
    Random,
    /// Mean idf of the query's words.
    TfIdf,
    /// The learned scorer in this file or directory (`query-producer.json`).
    Model(PathBuf),
}

/// How found entities become paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchPaths {
    /// Their facts as one-hop paths.
    Facts,
    /// The dialog's candidate paths that reach them.
    Paths,
}

impl SearchPaths {
    /// The names, as settings give them.
    pub const NAMES: &'static [&'static str] = &["facts", "paths"];
}

impl std::str::FromStr for SearchPaths {
    type Err = crate::limits::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "facts" => Ok(SearchPaths::Facts),
            "paths" => Ok(SearchPaths::Paths),
            _ => Err(crate::limits::UnknownName { what: "search paths", value: s.to_owned(), allowed: SearchPaths::NAMES }),
        }
    }
}

/// The search retriever's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOptions {
    /// The producer.
    pub producer: SearchProducer,
    /// Queries searched per turn.
    pub queries: usize,
    /// Facts or paths.
    pub paths: SearchPaths,
}

impl SearchOptions {
    /// `producer`, its top 3 queries, their entities' facts.
    pub fn new(producer: SearchProducer) -> SearchOptions {
        SearchOptions { producer, queries: 3, paths: SearchPaths::Facts }
    }

    /// Within `crate::limits`.
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        crate::limits::SEARCH_QUERIES.check_usize(self.queries)?;
        Ok(())
    }
}

/// What the retriever holds: the producer and the generation's text index.
pub(crate) struct SearchState {
    pub producer: Producer,
    pub index: TextIndex,
}

impl SearchState {
    pub(crate) fn open(store: &Store, opts: &SearchOptions, producer: Option<&Producer>) -> Result<SearchState, RetrieveError> {
        let producer = match (producer, &opts.producer) {
            (Some(p), _) => p.clone(),
            (None, SearchProducer::Random) => Producer::Random { seed: 0 },
            (None, SearchProducer::TfIdf) => Producer::TfIdf,
            (None, SearchProducer::Model(path)) => Producer::Learned(Arc::new(LinearScorer::from_path(path).map_err(QueryError::from)?)),
        };
        let index = TextIndex::open(store).map_err(QueryError::from)?;
        Ok(SearchState { producer, index })
    }

    /// Found entities with their relevance, best first (ties by id).
    pub(crate) fn found(
        &self,
        history: &[crate::dialog::Message],
        mentions: &[Mention],
        queries: usize,
    ) -> Result<Vec<(EntityId, f64, String)>, RetrieveError> {
        let turn = search_turn(&self.index, history, mentions)?;
        let text: String = history.iter().map(|m| m.text.as_str()).collect();
        let order = self.producer.rank(&turn, crate::linearize::fnv1a64(text.as_bytes()));
        let mut best: HashMap<EntityId, (f64, String)> = HashMap::new();
        for (rank, &q) in order.iter().take(queries).enumerate() {
            let hits = &turn.results[q];
            let top = hits.first().map_or(0.0, |h| f64::from(h.score));
            for h in hits {
                let relevance = if top > 0.0 { f64::from(h.score) / top / (rank + 1) as f64 } else { 0.0 };
                let why = format!("query {:?} (rank {}), hit score {:.3}", turn.candidates[q].text, rank + 1, h.score);
                let e = best.entry(h.entity).or_insert((f64::MIN, String::new()));
                if relevance > e.0 {
                    *e = (relevance, why);
                }
            }
        }
        let mut out: Vec<(EntityId, f64, String)> = best.into_iter().map(|(e, (r, w))| (e, r, w)).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(out)
    }
}

/// The `facts` mode: each found entity's facts as one-hop paths from it.
pub(crate) fn fact_paths(store: &Store, found: &[(EntityId, f64, String)]) -> Result<Vec<ScoredPath>, RetrieveError> {
    let mut out = Vec::new();
    for (e, relevance, why) in found {
        for dir in Direction::BOTH {
            let mut n = 0;
            store.for_each_neighbor(*e, Some(dir), None, |edge| {
                out.push(ScoredPath {
                    hops: vec![Hop { from: *e, edge }],
                    score: *relevance,
                    explanation: format!("search: a fact of a found entity, {why}"),
                    tokens: Vec::new(),
                });
                n += 1;
                if n >= FACTS_PER_ENTITY {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
        }
    }
    Ok(out)
}

/// The `paths` mode: candidate paths by the best relevance of an entity they reach.
pub(crate) fn candidate_paths(paths: Vec<Vec<Hop>>, found: &[(EntityId, f64, String)]) -> Vec<ScoredPath> {
    let by: HashMap<EntityId, (f64, &str)> = found.iter().map(|(e, r, w)| (*e, (*r, w.as_str()))).collect();
    paths
        .into_iter()
        .map(|hops| {
            let best = hops.iter().filter_map(|h| by.get(&h.edge.other)).max_by(|a, b| a.0.total_cmp(&b.0));
            let (score, explanation) = match best {
                Some((r, w)) => (*r, format!("search: reaches a found entity, {w}")),
                None => (0.0, "search: reaches no found entity".to_owned()),
            };
            ScoredPath { hops, score, explanation, tokens: Vec::new() }
        })
        .collect()
}
