//! Trellis: an embedded, RocksDB-backed knowledge-graph store and retrieval engine for
//! knowledge-grounded dialog.
//!
//! Modules, lowest layer first (a module imports only the ones before it; ARCHITECTURE.md's
//! "Layers", checked by a test):
//!
//! - [`ids`], [`normalize`], [`linearize`] (how a path is written as text and tokens, one
//!   definition for all), [`limits`] (the range of every numeric setting and the names of
//!   every named one), [`backend`] (the opaque errors of RocksDB, ONNX Runtime, tokenizers),
//!   [`progress`] (the [`Monitor`] every long piece of work reports to and is cancelled by).
//! - [`dialog`]: a dialog's messages (what every layer above reads). [`store`]: the on-disk store (dictionaries, name index, adjacency, token index), its
//!   format (`schema/`), validation and migrations; its error families. [`text`]: the text
//!   index of a store's entities (`trellis index-text`, `search`), BM25+.
//! - [`ingest`]: bulk loading of TSV, pipe and N-Triples dumps; the name tokenizer and the
//!   token index it builds. [`graph`]: neighbourhood walks, candidate subgraphs,
//!   informativeness, the PCST solver. [`link`]: entity linking from dialog text.
//! - [`dataset`]: the OpenDialKG and MetaQA readers. [`decode`]: the constraint automaton,
//!   the graph prior and beam search. [`check`]: the fact check of a reply against the store
//!   (claims, verdicts, the fact score).
//! - [`model`]: ONNX Runtime loading, model directories and the T5 encoder-decoder
//!   ([`model::Seq2Seq`]).
//! - [`retrieve`]: one retriever interface, the non-neural retrievers and the generative one
//!   (`retrieve::gsr`). [`generate`]: the grounded response generator (input encodings,
//!   delexicalization, greedy, beam search and seeded sampling on the same runtime).
//! - [`pipeline`]: link, retrieve, generate for a batch of requests; `trellis doctor`'s checks.
//! - [`settings`]: settings by name (what the command line's flags and Python's keyword
//!   arguments become), checked and combined into the typed configurations, one policy for
//!   every front end.
//! - [`eval`]: evaluations (linking, retrieval, responses, the whole chain).
//! - [`error`]: [`Error`], every family in one type.
//!
//! The library never prints and never installs a tracing subscriber; long work reports
//! progress to a [`Monitor`], which can also cancel it. The command line (`src/cli`, feature `cli`) is the binary's.

#![warn(missing_docs)]

pub mod backend;
pub mod check;
pub mod dataset;
pub mod decode;
pub mod dialog;
pub mod error;
pub mod eval;
pub(crate) mod files;
pub mod generate;
pub mod graph;
pub mod ids;
pub mod ingest;
#[cfg(feature = "internals")]
pub mod internals;
pub mod limits;
pub mod linearize;
pub mod link;
pub mod model;
pub mod normalize;
pub mod pipeline;
pub(crate) mod porter;
pub mod progress;
pub mod queries;
pub mod retrieve;
pub mod settings;
pub mod store;
pub mod text;
pub mod vectors;

pub use backend::BackendError;
pub use error::Error;
pub use files::FileProblem;
pub use ids::{Direction, EntityId, RelationId};
pub use ingest::{BulkLoader, IngestError, InputSpec, Updater};
pub use progress::{Cancelled, Monitor, Progress};
pub use store::{build_name, MigrateError, OpenError, ReadError, WriteError};
pub use store::{Edge, Store};

// The handles a host application builds once and shares across threads: a compile error
// here, not a surprise downstream, if one stops being `Send + Sync`.
const _: () = {
    const fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Store>();
    shareable::<link::Linker>();
    shareable::<retrieve::Retriever>();
    shareable::<store::tokens::TokenIndex>();
    shareable::<graph::informativeness::Informativeness>();
    shareable::<model::Seq2Seq>();
};

/// The README's code blocks, compiled as doctests (`cargo test --doc`), so the front
/// door's example cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
