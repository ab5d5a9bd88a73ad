//! Generative subgraph retrieval's decoding side (schema/gsr-decoding.md §3-5): the constraint automaton
//! that admits exactly the candidate paths of a request ([`automaton`]), the graph prior
//! that scores its tokens ([`prior`]), and beam search over a step function ([`beam`]), with
//! transformers' logits processors for the generator ([`processors`]).

pub mod automaton;
pub mod beam;
mod boundaries;
pub mod prior;
pub mod processors;
mod softmax;

#[cfg(test)]
mod tests;

pub use automaton::{Allowed, Boundaries, CandidateMode, DecodeError, DecodedPath, PathGraph, State};
pub use prior::{PriorConfig, PriorMode, PriorNorm};

// One request's automaton may be handed to another thread (a batch worker).
const _: () = {
    const fn sendable<T: Send>() {}
    sendable::<PathGraph<'static>>();
    sendable::<State>();
};
