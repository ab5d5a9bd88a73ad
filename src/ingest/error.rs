//! Ingest errors: what went wrong, in which file, on which line.

use crate::store::error::{OpenError, ReadError, WriteError};
use std::path::PathBuf;

/// Kinds of malformed input lines; `--on-error skip` counts rejects per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LineErrorKind {
    /// Not three columns (TSV, pipe).
    WrongColumnCount,
    /// A subject, relation or object that is empty (blank).
    EmptyName,
    /// Bytes that are not UTF-8.
    InvalidUtf8,
    /// Not one N-Triples statement.
    InvalidNtriples,
    /// Longer than the line limit (1 MiB).
    LineTooLong,
    /// A control character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) inside a
    /// name; the field separator of TSV is no part of a name.
    ControlCharacter,
}

impl LineErrorKind {
    /// The kind as messages and reject counts name it, e.g. "wrong column count".
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
    /// Longer than the line limit.
    #[error("line is {bytes} bytes, the limit is {limit} bytes")]
    TooLong {
        /// The line's length.
        bytes: u64,
        /// The limit.
        limit: usize,
    },
    /// `byte`: 1-based offset of the first invalid byte.
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 {
        /// 1-based offset of the first invalid byte.
        byte: usize,
    },
    /// Not three columns.
    #[error("expected 3 {separator}-separated columns, found {found}")]
    Columns {
        /// The separator's name, "tab" or "|".
        separator: &'static str,
        /// How many columns the line has.
        found: usize,
    },
    /// An empty subject, relation or object.
    #[error("the {field} is empty")]
    Empty {
        /// "subject", "relation" or "object".
        field: &'static str,
    },
    /// A relation that is only the reverse prefix.
    #[error("the relation is empty after its reverse prefix {prefix:?}")]
    EmptyAfterReversePrefix {
        /// The configured reverse prefix.
        prefix: String,
    },
    /// `at`: 1-based byte offset in the line, when known (N-Triples names are decoded).
    #[error("the {field} contains U+{:04X}{}", u32::from(*.character), .at.map_or(String::new(), |i| format!(" at byte {i} of the line")))]
    ControlCharacter {
        /// "subject", "relation" or "object".
        field: &'static str,
        /// The control character.
        character: char,
        /// 1-based byte offset in the line, when known.
        at: Option<usize>,
    },
    /// The N-Triples parser's own error (shared: line errors are cloned).
    #[error("{} (column {})", .0.message(), .0.location().start.column + 1)]
    Ntriples(std::sync::Arc<oxttl::TurtleSyntaxError>),
    /// An N-Triples line with a second statement.
    #[error("more than one triple on the line")]
    MultipleTriples,
}

/// One rejected line, before the file name is attached.
#[derive(Clone, Debug)]
pub struct LineError {
    /// 1-based line number in its file.
    pub line: u64,
    /// The coarse class, counted by `--on-error skip`.
    pub kind: LineErrorKind,
    /// What exactly is wrong.
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

/// Why a load failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// A malformed input line (with [`OnError::Stop`](crate::ingest::OnError::Stop), the default).
    #[error("{file}:{line}: {kind}: {detail}\n  | {snippet}")]
    BadLine {
        /// The input file.
        file: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The coarse class.
        kind: LineErrorKind,
        /// What exactly is wrong.
        detail: LineProblem,
        /// The line's first 80 characters, control characters shown as their pictures.
        snippet: String,
    },
    /// No format was given and neither the file's name nor its first line tells it.
    #[error("{path}: cannot tell the input format from the file name; say which it is (tsv, pipe or ntriples)")]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A compressed stream ends early or does not decode.
    #[error("{file}: truncated or corrupt {codec} stream after line {line}: {source}")]
    Truncated {
        /// The input file.
        file: PathBuf,
        /// "gzip", "bzip2" or "zstd".
        codec: &'static str,
        /// The last whole line read.
        line: u64,
        /// The decoder's error.
        source: std::io::Error,
    },
    /// A file operation failed (an input, the rejects file, the sort's run files).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Rayon's thread pool could not be built.
    #[error("cannot start the parser threads: {0}")]
    ThreadPool(#[source] rayon::ThreadPoolBuildError),
    /// The input names more entities or relations than 32-bit ids hold.
    #[error("more than {limit} {what}: ids are u32")]
    TooManyIds {
        /// "entities" or "relations".
        what: &'static str,
        /// The most ids (2^32 - 1).
        limit: u64,
    },
    /// Changes of an update that cannot be applied (strict mode: nothing was committed).
    #[error("{} change(s) cannot be applied; nothing was committed (the skip policy commits the rest):\n{}{}", problems.len() as u64 + more, problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"), if *more > 0 { format!("\n  ... and {more} more") } else { String::new() })]
    UpdateRefused {
        /// The first refused changes, each with where it came from and why.
        problems: Vec<crate::ingest::ChangeProblem>,
        /// How many more were refused.
        more: u64,
    },
    /// A line of an update's change file is not a change.
    #[error("{file}:{line}: {problem}")]
    ChangeFile {
        /// The change file.
        file: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        problem: crate::ingest::ChangeFileProblem,
    },
    /// The load or token indexing was cancelled by its monitor; nothing was committed.
    #[error("cancelled; the store is unchanged")]
    Cancelled,
    /// The token index's tokenizer cannot be loaded or used.
    #[error(transparent)]
    Tokenizer(#[from] crate::ingest::TokenizerError),
    /// The tokenizer gave a name a token id the trie keeps for its own use.
    #[error("the tokenizer wrote token id {id} for {name:?}; that id is reserved by the trie")]
    ReservedToken {
        /// The id.
        id: u32,
        /// The name.
        name: String,
    },
    /// The text index could not follow an update.
    #[error(transparent)]
    Text(#[from] crate::text::TextError),
    /// The store cannot be opened for the load.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading the store failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing the new generation failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// RocksDB failed.
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

impl From<crate::BackendError> for IngestError {
    fn from(e: crate::BackendError) -> IngestError {
        IngestError::Rocks(e)
    }
}
