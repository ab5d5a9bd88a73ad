//! Why a retrieval failed ([`RetrieveError`]).

/// Why a retrieval failed: a store read, or a PCST instance the solver refused (the
/// retrievers build only valid ones, so the second is a bug, reported rather than a panic).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetrieveError {
    /// Reading the store failed.
    #[error(transparent)]
    Read(#[from] crate::store::error::ReadError),
    /// The PCST solver refused an instance.
    #[error("prize-collecting Steiner tree: {0}")]
    Pcst(#[from] crate::graph::pcst::PcstError),
    /// The generative retriever failed.
    #[error("generative retrieval: {0}")]
    Gsr(#[from] super::gsr::GsrError),
    /// A dense retriever's or a reranker's encoder model failed (loading or running).
    #[error("encoder model: {0}")]
    Encoder(#[from] crate::model::encoder::EncoderError),
    /// A setting outside its range (`crate::limits`).
    #[error("{0}")]
    Setting(#[from] crate::limits::OutOfRange),
    /// The work's [`Monitor`](crate::progress::Monitor) was cancelled.
    #[error("retrieval cancelled")]
    Cancelled,
    /// The newest generation of the store cannot be opened (`Retriever::refreshed`).
    #[error(transparent)]
    Open(#[from] crate::store::error::OpenError),
    /// The search retriever's text index or query producer.
    #[error("search retriever: {0}")]
    Search(#[from] crate::queries::QueryError),
    /// The store's vector file (`trellis index-vectors`).
    #[error("dense vectors: {0}")]
    Vectors(#[from] crate::vectors::VectorsError),
    /// The ranking was to read the rewritten history, but the linker does not rewrite.
    #[error("`rewrite_input` needs `rewrite` (the dialog rewrite the ranking would read)")]
    RewriteInputWithoutRewrite,
    /// `rewrite_input` names a part this retriever does not have, or one that reads no text.
    #[error(
        "`rewrite_input {part}` is not a part of this ranking that reads the dialog (it has {parts}; those that can: bm25, pcst, gsr, dense, surge, rerank)"
    )]
    RewriteInputNotInPlay {
        /// The part named.
        part: String,
        /// The parts there are.
        parts: String,
    },
}

impl From<crate::progress::Cancelled> for RetrieveError {
    fn from(_: crate::progress::Cancelled) -> RetrieveError {
        RetrieveError::Cancelled
    }
}
