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
    /// `encode` was given no input.
    #[error("an empty batch")]
    EmptyBatch,
    /// An input of `encode` has no token.
    #[error("input {index} has no token")]
    EmptyInput {
        /// The input's position in the batch.
        index: usize,
    },
    /// A token id at or past the vocabulary's size.
    #[error("token id {token} is outside the model's vocabulary of {vocab}")]
    TokenOutOfRange {
        /// The token id given.
        token: u32,
        /// The model's vocabulary size.
        vocab: u32,
    },
    /// A decoder row that names an input the encoded batch does not have.
    #[error("row {row} names input {input}, but the batch has {batch}")]
    NoSuchInput {
        /// The decoder row.
        row: usize,
        /// The input it names.
        input: usize,
        /// The encoded batch's size.
        batch: usize,
    },
    /// A step given a token count that is not rows times tokens per row.
    #[error("{got} tokens for {rows} rows of {per_row} each")]
    TokenCount {
        /// Tokens given.
        got: usize,
        /// The state's rows.
        rows: usize,
        /// Tokens per row the step takes.
        per_row: usize,
    },
    /// A listed step given a listed-token count that is not rows times tokens per row.
    #[error("{got} listed tokens for {rows} rows of {k} each")]
    ListedCount {
        /// Listed token ids given.
        got: usize,
        /// The state's rows.
        rows: usize,
        /// Listed tokens per row the step takes.
        k: usize,
    },
    /// A listed step whose tokens per row are not a multiple of what the listed graph
    /// computes at once.
    #[error("{k} listed tokens per row: not a multiple of {multiple}")]
    ListedWidth {
        /// Listed tokens per row given.
        k: usize,
        /// What they must be a multiple of.
        multiple: usize,
    },
    /// A listed step on a model without `decoder_listed_model.onnx` loaded.
    #[error("the model has no listed-logits decoder (decoder_listed_model.onnx) loaded")]
    NoListedGraph,
    /// A listed step before the first step (the listed graph reads the KV cache).
    #[error("a listed-logits step needs a state past its first step")]
    ListedFirstStep,
    /// A reorder whose parent is not a row of the state.
    #[error("parent {parent} of new row {row} is not a row (the state has {rows})")]
    NoSuchParent {
        /// The new row.
        row: usize,
        /// The parent it names.
        parent: usize,
        /// The state's rows.
        rows: usize,
    },
    /// A reorder to no rows.
    #[error("a state with no rows")]
    NoRows,
    /// Logits asked for before the first step.
    #[error("no logits yet: step the state first")]
    NoLogits,
}

/// Loading or running the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Seq2SeqError {
    /// ONNX Runtime could not be found or loaded.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The model directory is incomplete or malformed.
    #[error(transparent)]
    Dir(#[from] ModelDirError),
    /// The CUDA provider could not be registered (no CUDA build of ONNX Runtime, no
    /// driver, no such device). Never a silent fallback to CPU.
    #[error(
        "device {device}: the CUDA execution provider could not be registered with {} ({source}); use an ONNX Runtime built with CUDA (the onnxruntime-gpu==1.31.1 wheel's library, via ORT_DYLIB_PATH) on a machine with a CUDA device, or the CPU",
        library.display()
    )]
    Device {
        /// The device asked for.
        device: Device,
        /// The ONNX Runtime library loaded.
        library: PathBuf,
        /// ONNX Runtime's refusal.
        source: crate::BackendError,
    },
    /// ONNX Runtime refused a graph file (not ONNX, an unsupported operator or opset).
    #[error("{}: ONNX Runtime cannot load this model: {source}", path.display())]
    Load {
        /// The graph file.
        path: PathBuf,
        /// ONNX Runtime's error.
        source: crate::BackendError,
    },
    /// A graph file could not be read (for the listed step's record of its decoder).
    #[error("{}: cannot read: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `decoder_listed_model.onnx` does not record the decoder file beside it: it was cut
    /// from another decoder (or by another tool), and would score with other weights.
    #[error(
        "{}: not made from {} ({problem}); `python tools/train/listed_logits.py {}` writes it again, and without it every step decodes on the full graph",
        listed.display(),
        decoder.display(),
        listed.parent().unwrap_or(listed).display()
    )]
    ListedStale {
        /// The listed step's file.
        listed: PathBuf,
        /// The cached decoder it should have been made from.
        decoder: PathBuf,
        /// What its record says.
        problem: ListedProblem,
    },
    /// The graphs' inputs and outputs are not a T5 encoder and decoder with a KV cache.
    #[error("the model's inputs and outputs are not what the decoder needs: {}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Interface {
        /// Every mismatch found.
        problems: Vec<InterfaceProblem>,
    },
    /// A model call failed inside ONNX Runtime.
    #[error("{}: running the model failed: {source}", path.display())]
    Run {
        /// The graph file run.
        path: PathBuf,
        /// ONNX Runtime's error.
        source: crate::BackendError,
    },
    /// The model ran but returned something else than its declared interface promised
    /// (a model whose shapes disagree with config.json).
    #[error("{}: output {name:?} has shape {found:?}, expected {expected:?}", path.display())]
    OutputShape {
        /// The graph file.
        path: PathBuf,
        /// The output's name.
        name: String,
        /// The shape config.json implies.
        expected: Vec<i64>,
        /// The shape returned.
        found: Vec<i64>,
    },
    /// An output missing, of another type, or unreadable on the host.
    #[error("{}: output {name:?} {problem}", path.display())]
    Output {
        /// The graph file (`<cache reorder>` for a reorder's copy).
        path: PathBuf,
        /// The output's name.
        name: String,
        /// What is wrong with it.
        problem: OutputProblem,
    },
    /// Building an input tensor or binding failed inside ONNX Runtime.
    #[error("building the {what} failed: {source}")]
    Internal {
        /// What was being built.
        what: &'static str,
        /// ONNX Runtime's error.
        source: crate::BackendError,
    },
    /// A step API call that does not fit the state.
    #[error("decoder call: {0}")]
    Call(#[from] CallError),
}

/// What is wrong with an output the model returned. `found` is ONNX Runtime's type (data).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputProblem {
    /// The run returned no output of that name.
    #[error("was not returned")]
    NotReturned,
    /// The output is not a float32 tensor.
    #[error("is {found}, not a float32 tensor")]
    NotFloat {
        /// ONNX Runtime's name of its type.
        found: String,
    },
    /// Its data could not be read on the host.
    #[error("cannot be read on the host: {0}")]
    Extract(crate::BackendError),
}

pub(super) fn cache_error(e: NotHostF32) -> Seq2SeqError {
    Seq2SeqError::Output { path: PathBuf::from("<cache reorder>"), name: "kv cache".into(), problem: OutputProblem::Extract(e.0.into()) }
}

/// How a listed step's record of its decoder fails to match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListedProblem {
    /// No `trellis.listed_source` metadata (not written by tools/train/listed_logits.py).
    #[error("it records no source decoder")]
    NoRecord,
    /// The record names another file content.
    #[error("it records {recorded} (name:size:crc32), the decoder is {found}")]
    Differs {
        /// `NAME:SIZE:CRC32` as recorded.
        recorded: String,
        /// `NAME:SIZE:CRC32` of the decoder file now.
        found: String,
    },
}
