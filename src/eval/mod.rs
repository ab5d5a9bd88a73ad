//! Data sets and evaluations.

pub mod linking;
pub mod metaqa;
pub mod opendialkg;
pub mod retrieval;

/// Errors reading an evaluation data set.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}:{line}: {what}")]
    Bad { path: String, line: u64, what: String },
}
