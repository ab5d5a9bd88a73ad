//! The learned extractive producer: a linear scorer over a candidate's [`Features`],
//! trained listwise on the BM25++ pseudo-labels (`tools/train/query_producer.py`) and shipped
//! as a JSON file. The paper's producer is ELECTRA over the context; on this machine a
//! linear model over features that carry the same signals (where and how often a span
//! occurs, its link probability, what the engine finds for it) is what trains in minutes.

use super::candidates::{Features, FEATURE_NAMES};
use std::path::{Path, PathBuf};

/// A scorer file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScorerError {
    /// It cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// It is not a scorer.
    #[error("{path}: not a query producer scorer: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: ScorerProblem,
    },
}

/// What is wrong with a scorer's JSON.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScorerProblem {
    /// Not the expected JSON.
    #[error("{0}")]
    Json(serde_json::Error),
    /// Another format or task.
    #[error("format {format} task {task:?}; this build reads format 1, task \"query-producer\"")]
    Kind {
        /// Its format.
        format: u32,
        /// Its task.
        task: String,
    },
    /// Other features than this build computes.
    #[error("features {found:?}; this build computes {:?}", FEATURE_NAMES)]
    Features {
        /// Its feature names.
        found: Vec<String>,
    },
    /// Lists of the wrong length.
    #[error("mean, scale and weights must have {expected} numbers each")]
    Lengths {
        /// The number of features.
        expected: usize,
    },
    /// A number that is not finite, or a scale that is not positive.
    #[error("every number must be finite and every scale positive")]
    Numbers,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: u32,
    task: String,
    features: Vec<String>,
    mean: Vec<f64>,
    scale: Vec<f64>,
    weights: Vec<f64>,
    #[serde(default)]
    trained_on: Option<serde_json::Value>,
}

/// `score = Σ w_i (x_i - mean_i) / scale_i`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearScorer {
    mean: Vec<f64>,
    scale: Vec<f64>,
    weights: Vec<f64>,
}

/// The scorer file's name in a model directory.
pub const SCORER_FILE: &str = "query-producer.json";

impl LinearScorer {
    /// Reads a scorer from `path` (a `query-producer.json`, or a directory holding one).
    pub fn from_path(path: &Path) -> Result<LinearScorer, ScorerError> {
        let file = if path.is_dir() { path.join(SCORER_FILE) } else { path.to_path_buf() };
        let text = std::fs::read_to_string(&file).map_err(|source| ScorerError::Io { path: file.clone(), source })?;
        LinearScorer::from_json(&text).map_err(|problem| ScorerError::Invalid { path: file, problem })
    }

    /// Parses a scorer; the error says what is wrong.
    pub fn from_json(text: &str) -> Result<LinearScorer, ScorerProblem> {
        let f: File = serde_json::from_str(text).map_err(ScorerProblem::Json)?;
        let _ = f.trained_on;
        if f.format != 1 || f.task != "query-producer" {
            return Err(ScorerProblem::Kind { format: f.format, task: f.task });
        }
        if f.features != FEATURE_NAMES {
            return Err(ScorerProblem::Features { found: f.features });
        }
        let n = FEATURE_NAMES.len();
        if f.mean.len() != n || f.scale.len() != n || f.weights.len() != n {
            return Err(ScorerProblem::Lengths { expected: n });
        }
        if f.mean.iter().chain(&f.weights).any(|x| !x.is_finite()) || f.scale.iter().any(|x| !x.is_finite() || *x <= 0.0) {
            return Err(ScorerProblem::Numbers);
        }
        Ok(LinearScorer { mean: f.mean, scale: f.scale, weights: f.weights })
    }

    /// A candidate's score (higher: a better query).
    pub fn score(&self, features: &Features) -> f64 {
        features.vector().iter().zip(&self.mean).zip(&self.scale).zip(&self.weights).map(|(((&x, m), s), w)| w * (f64::from(x) - m) / s).sum()
    }
}
