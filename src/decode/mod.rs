//! Generative retrieval's decoding: beam search over a step function (`beam`).

pub mod beam;
