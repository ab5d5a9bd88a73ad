//! The dialog and question data sets Trellis trains and evaluates on, read into one shape
//! ([`opendialkg::Dialog`]): OpenDialKG's CSV and MetaQA's question files. Below the
//! retrievers and the generator, whose training targets read them, and the evaluations.

pub mod metaqa;
pub mod opendialkg;

/// Errors reading an evaluation data set: the file, or one of its lines (bad input).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    #[error("{path}: {source}")]
    Io { path: std::path::PathBuf, source: std::io::Error },
    #[error("{path}:{line}: {problem}")]
    Bad { path: std::path::PathBuf, line: u64, problem: DatasetProblem },
}

/// What is wrong with one line of a data set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetProblem {
    #[error("{0}")]
    Csv(csv::Error),
    #[error("no `Messages` column")]
    NoMessagesColumn,
    #[error("row has no Messages field")]
    NoMessagesField,
    #[error("Messages is not the expected JSON: {0}")]
    MessagesJson(serde_json::Error),
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 { byte: usize },
    #[error("not a MetaQA question: {0}")]
    NotAQuestion(serde_json::Error),
}
