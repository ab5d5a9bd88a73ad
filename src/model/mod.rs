//! Models the engine runs: the tokenizer (names as the retriever's token ids) and the T5
//! retriever on ONNX Runtime.
//!
//! - [`runtime`]: finding and loading the ONNX Runtime library, once per process.
//! - [`dir`]: a model directory (`schema/model.md`): files, `config.json`, `trellis.json`,
//!   and the encoder input of a dialog.
//! - [`session`]: [`Seq2Seq`], the encoder-decoder with a KV cache and a session pool.
//! - [`doctor`]: what `trellis doctor` checks.
//! - [`files`]: reading a model directory's files (checked before opening, size-capped).
//! - `host`: big cache reorders between decoder calls, split over the model's cores (crate-private).

pub(crate) mod cache;
pub mod dir;
pub mod doctor;
pub mod files;
pub(crate) mod host;
mod interface;
pub mod runtime;
pub mod session;
pub mod tokenizer;

pub use crate::linearize::Side;
pub use dir::{Layout, ModelDir, ModelDirError, T5Config, TrellisConfig};
pub use runtime::{Runtime, RuntimeError};
pub use session::{DecoderState, Device, Encoded, RuntimeOptions, Seq2Seq, Seq2SeqError, SessionGuard, SessionSteps, StepTimings};
pub use tokenizer::{ModelError, NameTokenizer};
