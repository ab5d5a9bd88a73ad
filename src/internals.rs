//! Unstable: the crate's internals its own benches (`benches/decode_step.rs`) and reference
//! tools (`tools/reference/pcst_solve.rs`) drive directly, behind the `internals` feature.
//! Not part of the library's API: anything here may change or go in any release.

pub use crate::decode::automaton::{Allowed, Boundaries, PathGraph, State};
pub use crate::decode::prior::PriorConfig;
pub use crate::graph::candidates::{candidate_subgraph, Candidates};

use crate::dialog::Message;
use crate::retrieve::pcst::PcstInstance;
use crate::retrieve::{RetrieveError, Retriever};

/// The PCST instance a `pcst` retriever builds for a candidate subgraph (what it solves),
/// for checking the solver against other implementations.
pub fn pcst_instance(retriever: &Retriever, cand: &Candidates, history: &[Message]) -> Result<PcstInstance, RetrieveError> {
    retriever.pcst_instance(cand, history)
}

/// The `tokenizers` tokenizer inside a name tokenizer (the automaton's bench builds its
/// boundaries from it).
pub fn backend_tokenizer(t: &crate::ingest::NameTokenizer) -> &tokenizers::Tokenizer {
    t.tokenizer()
}
