//! Why opening the generator or generating failed.

use super::encoding::KnowledgeProblem;
use crate::decode::beam::SearchError;
use crate::ingest::tokenizer::TokenizerError;
use crate::limits::{OutOfRange, TooMuchMemory};
use crate::linearize::LinearizeError;
use crate::model::dir::ModelDirError;
use crate::model::session::Seq2SeqError;
use std::path::PathBuf;

/// Opening the generator or generating.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The model could not be loaded or run.
    #[error(transparent)]
    Model(#[from] Seq2SeqError),
    /// The model directory cannot be used.
    #[error(transparent)]
    ModelDir(#[from] ModelDirError),
    /// The tokenizer failed on an input text.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The model directory's `trellis.json` names another task.
    #[error("{}: trellis.json says the model is a {task:?}, not a generator (a generator's trellis.json has \"task\": \"generator\")", model.display())]
    NotAGenerator {
        /// The model directory.
        model: PathBuf,
        /// The task it names.
        task: String,
    },
    /// The model directory has no `trellis.json`, so no task.
    #[error("{}: no trellis.json, so not a generator (a generator's trellis.json has \"task\": \"generator\")", model.display())]
    NoTrellisFile {
        /// The model directory.
        model: PathBuf,
    },
    /// A knowledge path of a request cannot be written; `input` is the request's position
    /// in the call (0 for [`Generator::encoder_input`](super::Generator::encoder_input)).
    #[error("request {input}, knowledge path {path}: {problem}")]
    Knowledge {
        /// The request's position.
        input: usize,
        /// The path's position among its knowledge.
        path: usize,
        /// What is wrong with it.
        problem: KnowledgeProblem,
    },
    /// The knowledge cannot be written with the model's linearization.
    #[error(transparent)]
    Linearize(#[from] LinearizeError),
    /// A setting outside its range (`crate::limits`).
    #[error("{0}")]
    Setting(#[from] OutOfRange),
    /// Even one request of a call would hold more decoding memory than the budget.
    #[error("{0}")]
    Memory(#[from] TooMuchMemory),
    /// A stop text is empty.
    #[error("bad generation setting: a stop text must not be empty")]
    EmptyStop,
    /// A stop id is not a token of the model.
    #[error("bad generation setting: stop id {token} is outside the model's {vocab}-token vocabulary")]
    StopIdOutOfRange {
        /// The stop id.
        token: u32,
        /// The model's vocabulary size.
        vocab: u32,
    },
    /// Boxed: the search's error is the biggest, and every caller's `Result` carries it.
    #[error("beam search: {0}")]
    Search(#[source] Box<SearchError<Seq2SeqError, std::convert::Infallible>>),
    /// The model's logits do not have one vocabulary-wide row per sequence.
    #[error("the model returned {got} logits for {rows} rows of a {vocab}-token vocabulary")]
    LogitsShape {
        /// Logits returned.
        got: usize,
        /// Rows asked for.
        rows: usize,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The model returned a NaN logit.
    #[error("the model returned a NaN logit (row {row}, token {token})")]
    NaN {
        /// The decoder row.
        row: usize,
        /// The token whose logit is NaN.
        token: usize,
    },
    /// No token of a row can be written (every logit is -inf, or sampling's filters left none).
    #[error("the model gave no token a finite logit (row {row})")]
    NoFiniteLogit {
        /// The decoder row.
        row: usize,
    },
    /// The tokenizer cannot decode the generated ids.
    #[error("decoding the generated ids {tokens:?}: {source}")]
    Decode {
        /// The ids.
        tokens: Vec<u32>,
        /// The tokenizer's error.
        source: crate::BackendError,
    },
}

impl From<SearchError<Seq2SeqError, std::convert::Infallible>> for GenerateError {
    fn from(e: SearchError<Seq2SeqError, std::convert::Infallible>) -> GenerateError {
        GenerateError::Search(Box::new(e))
    }
}
