//! What loading or running the model can fail with.

use super::options::Device;
use crate::model::cache::NotHostF32;
use crate::model::dir::ModelDirError;
use crate::model::interface::InterfaceProblem;
use crate::model::runtime::RuntimeError;
use std::path::PathBuf;

/// A call of the step API that does not fit the state (a bug of the caller, reported, never
/// a panic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    #[error("an empty batch")]
    EmptyBatch,
    #[error("input {index} has no token")]
    EmptyInput { index: usize },
    #[error("token id {token} is outside the model's vocabulary of {vocab}")]
    TokenOutOfRange { token: u32, vocab: u32 },
    #[error("row {row} names input {input}, but the batch has {batch}")]
    NoSuchInput { row: usize, input: usize, batch: usize },
    #[error("{got} tokens for {rows} rows of {per_row} each")]
    TokenCount { got: usize, rows: usize, per_row: usize },
    #[error("parent {parent} of new row {row} is not a row (the state has {rows})")]
    NoSuchParent { row: usize, parent: usize, rows: usize },
    #[error("a state with no rows")]
    NoRows,
    #[error("no logits yet: step the state first")]
    NoLogits,
}

/// Loading or running the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Seq2SeqError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Dir(#[from] ModelDirError),
    /// The CUDA provider could not be registered (no CUDA build of ONNX Runtime, no
    /// driver, no such device). Never a silent fallback to CPU.
    #[error(
        "device {device}: the CUDA execution provider could not be registered with {} ({source}); use an ONNX Runtime built with CUDA (the onnxruntime-gpu==1.31.1 wheel's library, via ORT_DYLIB_PATH) on a machine with a CUDA device, or the CPU",
        library.display()
    )]
    Device { device: Device, library: PathBuf, source: crate::BackendError },
    #[error("{}: ONNX Runtime cannot load this model: {source}", path.display())]
    Load { path: PathBuf, source: crate::BackendError },
    #[error("the model's inputs and outputs are not what the decoder needs: {}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Interface { problems: Vec<InterfaceProblem> },
    #[error("{}: running the model failed: {source}", path.display())]
    Run { path: PathBuf, source: crate::BackendError },
    /// The model ran but returned something else than its declared interface promised
    /// (a model whose shapes disagree with config.json).
    #[error("{}: output {name:?} has shape {found:?}, expected {expected:?}", path.display())]
    OutputShape { path: PathBuf, name: String, expected: Vec<i64>, found: Vec<i64> },
    #[error("{}: output {name:?} {problem}", path.display())]
    Output { path: PathBuf, name: String, problem: OutputProblem },
    #[error("building the {what} failed: {source}")]
    Internal { what: &'static str, source: crate::BackendError },
    #[error("decoder call: {0}")]
    Call(#[from] CallError),
}

/// What is wrong with an output the model returned. `found` is ONNX Runtime's type (data).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputProblem {
    #[error("was not returned")]
    NotReturned,
    #[error("is {found}, not a float32 tensor")]
    NotFloat { found: String },
    #[error("cannot be read on the host: {0}")]
    Extract(crate::BackendError),
}

pub(super) fn cache_error(e: NotHostF32) -> Seq2SeqError {
    Seq2SeqError::Output { path: PathBuf::from("<cache reorder>"), name: "kv cache".into(), problem: OutputProblem::Extract(e.0.into()) }
}
