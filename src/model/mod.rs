//! The T5 models the engine runs on ONNX Runtime (the name tokenizer is `ingest::tokenizer`,
//! beside the token index it builds).
//!
//! - [`runtime`]: finding and loading the ONNX Runtime library, once per process.
//! - [`dir`]: a model directory (`schema/model.md`): files, `config.json`, `trellis.json`,
//!   and the encoder input of a dialog.
//! - [`session`]: [`Seq2Seq`], the encoder-decoder with a KV cache and a session pool.
//! - [`encoder`]: encoder-only models: a bi-encoder (dense retrieval) and a cross-encoder
//!   (reranking), the optimum export of a BERT-style or T5 encoder.
//! - `host`: big cache reorders between decoder calls, split over the model's cores (crate-private).

pub(crate) mod cache;
pub mod dir;
pub mod encoder;
pub(crate) mod host;
mod interface;
pub mod runtime;
pub mod session;

pub use crate::linearize::Side;
pub use dir::{Layout, ModelDir, ModelDirError, T5Config, TrellisConfig};
pub use runtime::{Runtime, RuntimeError};
pub use session::{DecoderState, Device, Encoded, RuntimeOptions, Seq2Seq, Seq2SeqError, SessionGuard, SessionSteps, StepTimings};
