//! Evaluations: linking, retrieval, responses and the whole chain, on the data sets of
//! `crate::dataset`.

pub mod linking;
pub mod pipeline;
pub mod queries;
pub mod responses;
pub mod retrieval;
