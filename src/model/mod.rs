//! Models the engine runs. Today: the tokenizer, as the token index needs it; the ONNX
//! retriever and generator sessions come with the decoding work.

pub mod tokenizer;

pub use crate::linearize::Side;
pub use tokenizer::{ModelError, NameTokenizer};
