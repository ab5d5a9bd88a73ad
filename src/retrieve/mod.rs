//! One retriever interface and the non-neural retrievers (issue 4, first part): `all`,
//! `random`, `bm25` and `katz`, over the capped candidate subgraph of the entities linked in
//! the dialog history.

pub mod bm25;
pub mod jsonl;

use crate::error::StoreError;
use crate::graph::candidates::{candidate_subgraph, CandidateConfig, Hop};
use crate::graph::informativeness::{Informativeness, KatzConfig};
use crate::ids::EntityId;
use crate::link::{LinkConfig, Linker, Message};
use crate::model::tokenizer::fnv1a64;
use crate::store::Store;

/// A retrieved path (1 or 2 hops) with its score and a short explanation.
#[derive(Clone, Debug)]
pub struct ScoredPath {
    pub hops: Vec<Hop>,
    pub score: f64,
    pub explanation: String,
}

/// What retrievers see: the dialog history (oldest first) and the entities linked in it.
pub struct RetrievalInput<'a> {
    pub history: &'a [Message],
    pub mentioned: Vec<EntityId>,
}

/// Which retriever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RetrieverKind {
    /// Every candidate path, in candidate order.
    All,
    /// The candidates in a seeded random order.
    Random,
    /// BM25 of verbalized paths against the last 1..L messages, averaged (seed 003).
    Bm25,
    /// The informativeness of the path's entities with respect to the mentioned ones.
    Katz,
}

#[derive(Clone, Debug)]
pub struct RetrieverConfig {
    pub kind: RetrieverKind,
    pub candidates: CandidateConfig,
    pub link: LinkConfig,
    pub katz: KatzConfig,
    /// BM25: average over the last 1..=L messages.
    pub bm25_turns: usize,
    pub seed: u64,
}

impl RetrieverConfig {
    pub fn new(kind: RetrieverKind) -> RetrieverConfig {
        RetrieverConfig {
            kind,
            candidates: CandidateConfig::default(),
            link: LinkConfig::default(),
            katz: KatzConfig::default(),
            bm25_turns: 3,
            seed: 42,
        }
    }
}

pub struct Retriever<'s> {
    store: &'s Store,
    linker: Linker<'s>,
    cfg: RetrieverConfig,
}

impl<'s> Retriever<'s> {
    pub fn new(store: &'s Store, cfg: RetrieverConfig) -> Retriever<'s> {
        Retriever { store, linker: Linker::new(store, cfg.link.clone()), cfg }
    }

    pub fn linker(&self) -> &Linker<'s> {
        &self.linker
    }

    /// Links the history, then ranks its candidate paths; best first.
    pub fn retrieve(&self, history: &[Message]) -> Result<Vec<ScoredPath>, StoreError> {
        let mentions = self.linker.link_dialog(history)?;
        let mentioned = self.linker.turn_entities(&mentions, history.len()).into_iter().map(|(e, _)| e).collect();
        self.rank(&RetrievalInput { history, mentioned })
    }

    /// Ranks the candidate paths of already linked entities.
    pub fn rank(&self, input: &RetrievalInput<'_>) -> Result<Vec<ScoredPath>, StoreError> {
        let cand = candidate_subgraph(self.store, &input.mentioned, &self.cfg.candidates)?;
        let mut paths: Vec<Vec<Hop>> = cand.one_hop.iter().map(|h| vec![*h]).collect();
        paths.extend(cand.two_hop.iter().map(|p| p.to_vec()));
        let mut scored: Vec<ScoredPath> = match self.cfg.kind {
            RetrieverKind::All => paths.into_iter().map(|hops| ScoredPath { hops, score: 1.0, explanation: "candidate".into() }).collect(),
            RetrieverKind::Random => {
                let text: String = input.history.iter().map(|m| m.text.as_str()).collect();
                let mut state = self.cfg.seed ^ fnv1a64(text.as_bytes());
                paths
                    .into_iter()
                    .map(|hops| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ScoredPath { hops, score: (state >> 11) as f64 / (1u64 << 53) as f64, explanation: "seeded random".into() }
                    })
                    .collect()
            }
            RetrieverKind::Bm25 => {
                let docs: Vec<String> = paths.iter().map(|p| self.verbalize(p)).collect::<Result<_, _>>()?;
                let scores = bm25::mean_over_last_turns(&docs, input.history, self.cfg.bm25_turns);
                paths
                    .into_iter()
                    .zip(docs)
                    .zip(scores)
                    .map(|((hops, doc), score)| ScoredPath { hops, score, explanation: format!("bm25 of {doc:?}") })
                    .collect()
            }
            RetrieverKind::Katz => {
                let mut inf = Informativeness::new(self.store, &input.mentioned, self.cfg.katz.clone())?;
                let mut out = Vec::with_capacity(paths.len());
                for hops in paths {
                    // The entities the path reaches, beyond the mentioned start.
                    let reached: Vec<EntityId> = hops.iter().map(|h| h.edge.other).collect();
                    let mut total = 0.0;
                    for &e in &reached {
                        total += inf.score(e)?.value;
                    }
                    let score = total / reached.len() as f64;
                    out.push(ScoredPath { hops, score, explanation: format!("mean informativeness {score:.4}") });
                }
                out
            }
        };
        // Stable: ties keep candidate order, so results are deterministic.
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(scored)
    }

    /// "head relation tail" per hop, relation names lowercased with `_`/`-` as spaces.
    pub fn verbalize(&self, hops: &[Hop]) -> Result<String, StoreError> {
        let mut parts = Vec::new();
        for h in hops {
            let (s, r, o) = h.fact();
            let name = |e: EntityId| -> Result<String, StoreError> { Ok(self.store.entity(e)?.map(|r| r.name).unwrap_or_default()) };
            let rel = self.store.relation(r)?.map(|r| r.name).unwrap_or_default();
            parts.push(format!("{} {} {}", name(s)?, rel.to_lowercase().replace(['_', '-'], " "), name(o)?));
        }
        Ok(parts.join(" "))
    }
}
