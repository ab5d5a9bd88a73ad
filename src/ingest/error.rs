//! Ingest errors: what went wrong, in which file, on which line.

use crate::store::error::{OpenError, ReadError, WriteError};
use std::path::PathBuf;

/// Kinds of malformed input lines; `--on-error skip` counts rejects per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LineErrorKind {
    WrongColumnCount,
    EmptyName,
    InvalidUtf8,
    InvalidNtriples,
    LineTooLong,
    /// A control character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) inside a
    /// name; the field separator of TSV is no part of a name.
    ControlCharacter,
}

impl LineErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            LineErrorKind::WrongColumnCount => "wrong column count",
            LineErrorKind::EmptyName => "empty name",
            LineErrorKind::InvalidUtf8 => "invalid UTF-8",
            LineErrorKind::InvalidNtriples => "invalid N-Triples",
            LineErrorKind::LineTooLong => "line too long",
            LineErrorKind::ControlCharacter => "control character",
        }
    }
}

impl std::fmt::Display for LineErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What exactly is wrong with a rejected line (its `LineErrorKind` is the coarse class
/// counted by `--on-error skip`). Strings here are data: the configured reverse prefix.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineProblem {
    #[error("line is {bytes} bytes, the limit is {limit} bytes")]
    TooLong { bytes: u64, limit: usize },
    /// `byte`: 1-based offset of the first invalid byte.
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 { byte: usize },
    #[error("expected 3 {separator}-separated columns, found {found}")]
    Columns { separator: &'static str, found: usize },
    #[error("the {field} is empty")]
    Empty { field: &'static str },
    #[error("the relation is empty after its reverse prefix {prefix:?}")]
    EmptyAfterReversePrefix { prefix: String },
    /// `at`: 1-based byte offset in the line, when known (N-Triples names are decoded).
    #[error("the {field} contains U+{:04X}{}", u32::from(*.character), .at.map_or(String::new(), |i| format!(" at byte {i} of the line")))]
    ControlCharacter { field: &'static str, character: char, at: Option<usize> },
    /// The N-Triples parser's own error (shared: line errors are cloned).
    #[error("{} (column {})", .0.message(), .0.location().start.column + 1)]
    Ntriples(std::sync::Arc<oxttl::TurtleSyntaxError>),
    #[error("more than one triple on the line")]
    MultipleTriples,
}

/// One rejected line, before the file name is attached.
#[derive(Clone, Debug)]
pub struct LineError {
    pub line: u64,
    pub kind: LineErrorKind,
    pub detail: LineProblem,
    /// The line's bytes (at most the first 80 for over-long lines).
    pub text: Vec<u8>,
}

/// A short, printable excerpt of a line for error messages.
pub fn snippet(text: &[u8]) -> String {
    let s = String::from_utf8_lossy(text);
    let s = s.trim_end_matches(['\n', '\r']);
    // Control characters as their Unicode control pictures (NUL as ␀, tab as ␉), so the
    // snippet stays on one line and shows what is there.
    let picture = |c: char| match c {
        '\0'..='\x1f' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
        '\x7f' => '\u{2421}',
        c if c.is_control() => '\u{fffd}',
        c => c,
    };
    let mut out: String = s.chars().take(80).map(picture).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    #[error("{file}:{line}: {kind}: {detail}\n  | {snippet}")]
    BadLine { file: PathBuf, line: u64, kind: LineErrorKind, detail: LineProblem, snippet: String },
    #[error("{path}: cannot tell the input format from the file name; say which it is (tsv, pipe or ntriples)")]
    UnknownFormat { path: PathBuf },
    #[error("{file}: truncated or corrupt {codec} stream after line {line}: {source}")]
    Truncated { file: PathBuf, codec: &'static str, line: u64, source: std::io::Error },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot start the parser threads: {0}")]
    ThreadPool(#[source] rayon::ThreadPoolBuildError),
    #[error("more than {limit} {what}: ids are u32")]
    TooManyIds { what: &'static str, limit: u64 },
    #[error("cancelled; the store is unchanged")]
    Cancelled,
    #[error(transparent)]
    Tokenizer(#[from] crate::ingest::TokenizerError),
    #[error("the tokenizer wrote token id {id} for {name:?}; that id is reserved by the trie")]
    ReservedToken { id: u32, name: String },
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("rocksdb: {0}")]
    Rocks(crate::BackendError),
}

impl IngestError {
    pub(crate) fn bad_line(file: &str, e: &LineError) -> IngestError {
        IngestError::BadLine { file: file.into(), line: e.line, kind: e.kind, detail: e.detail.clone(), snippet: snippet(&e.text) }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> IngestError {
        IngestError::Io { path: path.into(), source }
    }
}

impl From<rocksdb::Error> for IngestError {
    fn from(e: rocksdb::Error) -> IngestError {
        IngestError::Rocks(e.into())
    }
}
