//! The query producer of seed 002 ("Learning to acquire knowledge from a search engine"),
//! on the store's text index: a dialog's query *candidates* (the linker's dictionary spans
//! over all turns, content keywords, pronoun antecedents), each searched once (top
//! [`DOCUMENTS_PER_QUERY`] entity documents) and described by features; *producers* that
//! rank them (random and TF-IDF, the paper's baselines, and a learned linear scorer); and
//! the paper's cheap *labels* (BM25+ of the gold reply against each candidate's documents,
//! BM25++ with function words dropped and the reply's pronouns expanded), which supervise
//! the scorer and are rows of its evaluation.

mod candidates;
mod labels;
mod scorer;

pub use candidates::{Candidate, CandidateSource, Features, FEATURE_NAMES};
pub use labels::{bm25_query_reply, label_scores, LabelFunction};
pub use scorer::{LinearScorer, ScorerError, ScorerProblem, SCORER_FILE};

use crate::link::{Linker, Mention};
use crate::store::error::ReadError;
use crate::text::{SearchHit, SearchOptions, TextError, TextIndex};
use std::sync::Arc;

/// Documents a query retrieves (the paper keeps the search engine's top 5).
pub const DOCUMENTS_PER_QUERY: usize = 5;

/// Errors of query production.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The text index.
    #[error(transparent)]
    Text(#[from] TextError),
    /// Reading the store.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The learned scorer's file.
    #[error(transparent)]
    Scorer(#[from] ScorerError),
}

/// A dialog turn's candidates with what each retrieves.
#[derive(Clone, Debug)]
pub struct TurnQueries {
    /// Candidates: spans in order of first appearance, then keywords, rarest first.
    pub candidates: Vec<Candidate>,
    /// Each candidate's top documents, best first.
    pub results: Vec<Vec<SearchHit>>,
}

/// How candidates are ranked.
#[derive(Clone, Debug)]
pub enum Producer {
    /// A shuffle seeded by the turn (the paper's lower bound).
    Random {
        /// The seed, mixed with the turn's key.
        seed: u64,
    },
    /// The mean rarity (idf) of the candidate's words in the text index.
    TfIdf,
    /// The learned scorer.
    Learned(Arc<LinearScorer>),
}

impl Producer {
    /// Its name in tables and settings (`random`, `tfidf`, `learned`).
    pub fn name(&self) -> &'static str {
        match self {
            Producer::Random { .. } => "random",
            Producer::TfIdf => "tfidf",
            Producer::Learned(_) => "learned",
        }
    }

    /// Candidate indexes, best first (ties by first appearance). `key` varies the random
    /// producer's shuffle per turn.
    pub fn rank(&self, turn: &TurnQueries, key: u64) -> Vec<usize> {
        let scores: Vec<f64> = match self {
            Producer::Random { seed } => {
                (0..turn.candidates.len()).map(|i| unit_hash(*seed ^ key.rotate_left(17) ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect()
            }
            Producer::TfIdf => turn.candidates.iter().map(|c| f64::from(c.features.mean_idf)).collect(),
            Producer::Learned(scorer) => turn.candidates.iter().map(|c| scorer.score(&c.features)).collect(),
        };
        rank_by(&scores)
    }
}

/// Indexes of `scores`, highest first, ties by index.
pub fn rank_by(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// A number in [0, 1) from a 64-bit key (splitmix64's finalizer).
fn unit_hash(mut x: u64) -> f64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Makes a turn's candidates and searches them: the engine of the query producer.
pub struct QueryEngine {
    linker: Linker,
    index: TextIndex,
}

impl QueryEngine {
    /// An engine over `linker`'s store, whose text index `index` must be.
    pub fn new(linker: Linker, index: TextIndex) -> QueryEngine {
        QueryEngine { linker, index }
    }

    /// The linker.
    pub fn linker(&self) -> &Linker {
        &self.linker
    }

    /// The text index.
    pub fn index(&self) -> &TextIndex {
        &self.index
    }

    /// The candidates of the turn that follows `messages` (all of them are its context), each
    /// searched; `mentions` are the linker's mentions of `messages`.
    pub fn turn(&self, messages: &[crate::dialog::Message], mentions: &[Mention]) -> Result<TurnQueries, QueryError> {
        search_turn(&self.index, messages, mentions)
    }
}

/// [`QueryEngine::turn`] with the parts given apart: the candidates of the turn after
/// `messages` (whose mentions are `mentions`), each searched in `index`.
pub fn search_turn(index: &TextIndex, messages: &[crate::dialog::Message], mentions: &[Mention]) -> Result<TurnQueries, QueryError> {
    let mut candidates = candidates::candidates(index, messages, mentions)?;
    let mut results = Vec::with_capacity(candidates.len());
    for c in &candidates {
        results.push(index.search(&c.text, DOCUMENTS_PER_QUERY, SearchOptions { fuzzy: false })?);
    }
    // The search-side features: how well the engine matched it.
    let best = results.iter().filter_map(|r| r.first().map(|h| h.score)).fold(0f32, f32::max);
    for (c, r) in candidates.iter_mut().zip(&results) {
        let top = r.first().map_or(0.0, |h| h.score);
        c.features.top_score = if best > 0.0 { top / best } else { 0.0 };
        c.features.name_match = r.first().map_or(0.0, |h| {
            let name = crate::text::analyzer::words(&h.document.name);
            f32::from(name == crate::text::analyzer::words(&c.text))
        });
    }
    Ok(TurnQueries { candidates, results })
}
