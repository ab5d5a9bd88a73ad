//! The dialog and question data sets Trellis trains and evaluates on, read into one shape
//! ([`opendialkg::Dialog`]): OpenDialKG's CSV, MetaQA's question files and Wizard of
//! Wikipedia's JSON. Below the
//! retrievers and the generator, whose training targets read them, and the evaluations.

pub mod metaqa;
pub mod opendialkg;
pub mod wow;

/// Errors reading an evaluation data set: the file, or one of its lines (bad input).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// The file cannot be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of the file is malformed (bad input data).
    #[error("{path}:{line}: {problem}")]
    Bad {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line number (for a CSV record, the line it starts on).
        line: u64,
        /// What is wrong.
        problem: DatasetProblem,
    },
}

/// What is wrong with one line of a data set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetProblem {
    /// The CSV itself is malformed.
    #[error("{0}")]
    Csv(csv::Error),
    /// The CSV header has no `Messages` column.
    #[error("no `Messages` column")]
    NoMessagesColumn,
    /// A row lacks the `Messages` field.
    #[error("row has no Messages field")]
    NoMessagesField,
    /// A row's `Messages` is not the expected list of actions.
    #[error("Messages is not the expected JSON: {0}")]
    MessagesJson(serde_json::Error),
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 {
        /// 0-based offset of the first invalid byte.
        byte: usize,
    },
    /// A MetaQA line that is not a `{"question", "triples"}` object.
    #[error("not a MetaQA question: {0}")]
    NotAQuestion(serde_json::Error),
    /// The file is not Wizard of Wikipedia's JSON (an array of dialogs with `dialog`
    /// turns of `speaker` and `text`).
    #[error("not Wizard of Wikipedia's JSON: {0}")]
    NotWizardOfWikipedia(serde_json::Error),
}
