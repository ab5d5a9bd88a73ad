//! Generative subgraph retrieval's decoding side (schema/gsr-decoding.md §3-5): the constraint automaton
//! that admits exactly the candidate paths of a request (`automaton`), the graph prior
//! that scores its tokens (`prior`), and beam search over a step function (`beam`), with
//! transformers' logits processors for the generator ([`processors`]).

pub(crate) mod automaton;
pub(crate) mod beam;
mod boundaries;
pub(crate) mod prior;
pub mod processors;
mod softmax;

#[cfg(test)]
mod real_graph_tests;
#[cfg(test)]
mod tests;

// What the generative retriever's options, results and errors name; the automaton, the
// prior and the search themselves stay inside the crate (`crate::internals` for benches).
pub use automaton::{CandidateMode, DecodeError, DecodedPath};
pub use beam::{ModelNorm, SearchConfig, SearchError, LISTED_MULTIPLE};
pub use prior::{PriorMode, PriorNorm};

// One request's automaton may be handed to another thread (a batch worker).
const _: () = {
    const fn sendable<T: Send>() {}
    sendable::<automaton::PathGraph<'static>>();
    sendable::<automaton::State>();
};
