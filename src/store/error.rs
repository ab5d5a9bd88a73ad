//! The store's errors, one enum per operation family so callers can match what an operation
//! can produce: [`OpenError`] (opening a store: layout, format, lock), [`ReadError`] (every
//! read of an open store: corruption, a removed generation, RocksDB), [`WriteError`]
//! (writing and committing a generation), [`MigrateError`]. Corruption names the column
//! family and key; user mistakes name the path and the command to run. The other families
//! live beside their operations; `crate::Error` gathers them all.

use std::fmt;
use std::path::PathBuf;

/// A key as it appears in an error: shown as lowercase hex.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub Box<[u8]>);

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What is wrong with a stored key or value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// A key or value that does not decode; the text says which part (fixed per call site).
    #[error("{0}")]
    Malformed(&'static str),
    /// A JSON record (meta, tokenizer info) that does not parse.
    #[error("{record} record: {source}")]
    Json {
        /// Which record, e.g. `meta`.
        record: &'static str,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// The two directions of the adjacency disagree on how many facts a load adds.
    #[error("the load adds {outgoing} outgoing but {incoming} incoming facts")]
    DirectionCounts {
        /// Facts the outgoing direction adds.
        outgoing: u64,
        /// Facts the incoming direction adds.
        incoming: u64,
    },
}

/// A failed read of an open store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A stored key or value that does not decode.
    #[error("corrupt store: column family `{cf}`, key {key}: {what}")]
    Corrupt {
        /// The column family it is in.
        cf: &'static str,
        /// The key.
        key: Key,
        /// What is wrong.
        what: Corruption,
    },
    /// The generation this reader has open was deleted under it.
    #[error("{store}: files of generation {generation} were removed while this reader had it open (by hand, or by a Trellis that does not see registered readers); reopen the store to read its current generation ({source})")]
    GenerationRemoved {
        /// The store directory.
        store: PathBuf,
        /// The removed generation's directory.
        generation: PathBuf,
        /// RocksDB's error.
        source: crate::BackendError,
    },
    /// Any other RocksDB failure (no `From`: every read maps its error through
    /// `Store::read_error`, so a removed generation is always reported as such).
    #[error("rocksdb: {0}")]
    Rocks(crate::BackendError),
}

impl ReadError {
    pub(crate) fn corrupt(cf: &'static str, key: &[u8], what: &'static str) -> ReadError {
        ReadError::Corrupt { cf, key: Key(key.into()), what: Corruption::Malformed(what) }
    }

    pub(crate) fn json(cf: &'static str, key: &[u8], record: &'static str, source: serde_json::Error) -> ReadError {
        ReadError::Corrupt { cf, key: Key(key.into()), what: Corruption::Json { record, source } }
    }
}

/// Why a store directory is not a valid layout.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutProblem {
    /// `found` is the text of CURRENT (trimmed), shown as data.
    #[error("CURRENT should name a generation like `gen-000001`, found {found:?}")]
    BadCurrent {
        /// CURRENT's text.
        found: String,
    },
    /// CURRENT names a generation directory that is absent.
    #[error("CURRENT names {}, which does not exist", generation.file_name().unwrap_or(generation.as_os_str()).to_string_lossy())]
    MissingGeneration {
        /// The path it names.
        generation: PathBuf,
    },
    /// CURRENT kept changing while the store was being opened (a writer committing over and over).
    #[error("CURRENT changed {attempts} times while a reader was opening the store; try again")]
    CurrentChurn {
        /// How many times the reader tried.
        attempts: usize,
    },
}

/// The store cannot be opened: not a store, another format, locked, a broken layout.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The directory has no CURRENT file.
    #[error("{path}: not a Trellis store (no CURRENT file)")]
    NotAStore {
        /// The directory given.
        path: PathBuf,
    },
    /// Nothing at the path: a store is made by a load, not by opening it.
    #[error("{path}: no such store directory")]
    Missing {
        /// The path given.
        path: PathBuf,
    },
    /// The path is a file (or something else that is not a directory).
    #[error("{path}: is a file, not a store directory")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The store's format version is newer than this build reads.
    #[error("{path}: the store is format version {found}, written by a newer Trellis; this build reads versions up to {supported}. Upgrade Trellis")]
    TooNew {
        /// The store directory.
        path: PathBuf,
        /// The store's version.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The store's format version is older than this build's: `Store::migrate` upgrades it.
    #[error("{path}: the store is format version {found}, older than this build's {current}: it needs migrating")]
    NeedsMigration {
        /// The store directory.
        path: PathBuf,
        /// The store's version.
        found: u32,
        /// This build's version.
        current: u32,
    },
    /// Another writer (a load or a migration) holds the store's lock.
    #[error("{path}: store is locked by another loader or migration (lock file {lock})")]
    Locked {
        /// The store directory.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// CURRENT or the generation it names is wrong.
    #[error("{path}: {problem}")]
    Layout {
        /// The store directory or its CURRENT file.
        path: PathBuf,
        /// What is wrong.
        problem: LayoutProblem,
    },
    /// A file system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory it was on.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// RocksDB refused to open a generation directory.
    #[error("{path}: rocksdb: {source}")]
    Rocks {
        /// The generation directory.
        path: PathBuf,
        /// RocksDB's error.
        source: crate::BackendError,
    },
    /// Reading the format version or meta record while opening.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// `Store::open` migrates an older format first; that migration failed.
    #[error(transparent)]
    Migrate(Box<MigrateError>),
}

impl OpenError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> OpenError {
        OpenError::Io { path: path.into(), source }
    }

    pub(crate) fn rocks(path: impl Into<PathBuf>) -> impl FnOnce(rocksdb::Error) -> OpenError {
        let path = path.into();
        move |source| OpenError::Rocks { path, source: source.into() }
    }
}

impl From<MigrateError> for OpenError {
    fn from(e: MigrateError) -> OpenError {
        match e {
            MigrateError::Open(e) => e,
            e => OpenError::Migrate(Box::new(e)),
        }
    }
}

/// Writing or committing a new generation (loads, migrations, token indexing).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A file system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory it was on.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// RocksDB failed while writing.
    #[error("rocksdb: {0}")]
    Rocks(crate::BackendError),
}

impl WriteError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> WriteError {
        WriteError::Io { path: path.into(), source }
    }
}

/// `trellis migrate` and the migration `Store::open` runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// Opening the store failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading the old format failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing the new generation failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The store is older than the oldest version this build migrates from.
    #[error(
        "{path}: format version {found} is older than the oldest this build migrates ({oldest}); migrate it with an older Trellis first, or reload the data"
    )]
    TooOld {
        /// The store directory.
        path: PathBuf,
        /// The store's version.
        found: u32,
        /// The oldest version this build migrates from.
        oldest: u32,
    },
    /// No migration step starts at a version the migration reached (a gap in this build's steps).
    #[error("{path}: no migration step from format version {from}")]
    NoStep {
        /// The store directory.
        path: PathBuf,
        /// The version no step starts at.
        from: u32,
    },
}

impl From<crate::BackendError> for WriteError {
    fn from(e: crate::BackendError) -> WriteError {
        WriteError::Rocks(e)
    }
}

impl From<crate::BackendError> for MigrateError {
    fn from(e: crate::BackendError) -> MigrateError {
        MigrateError::Write(WriteError::Rocks(e))
    }
}

/// Lowercase hex of a key, for error messages.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2 + 2);
    s.push_str("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_names_the_column_family_and_the_key() {
        let e = ReadError::corrupt("adjacency", &[0x01, 0xab, 0x00], "malformed id list");
        assert_eq!(e.to_string(), "corrupt store: column family `adjacency`, key 0x01ab00: malformed id list");
        assert!(matches!(e, ReadError::Corrupt { cf: "adjacency", what: Corruption::Malformed("malformed id list"), ref key } if key.0[..] == [1, 0xab, 0]));
        let json = serde_json::from_slice::<serde_json::Value>(b"{").unwrap_err();
        let e = ReadError::json("meta", b"meta", "meta", json);
        let text = e.to_string();
        assert!(text.starts_with("corrupt store: column family `meta`, key 0x6d657461: meta record: EOF while parsing"), "{text}");
        assert!(matches!(e, ReadError::Corrupt { what: Corruption::Json { record: "meta", .. }, .. }));
    }

    #[test]
    fn user_mistakes_name_the_path_and_what_is_needed() {
        // What is needed, in the library's words; the command line adds its commands.
        let e = OpenError::NeedsMigration { path: "/data/kg".into(), found: 1, current: 3 };
        assert_eq!(e.to_string(), "/data/kg: the store is format version 1, older than this build's 3: it needs migrating");
        let e = OpenError::NotAStore { path: "/data/kg".into() };
        assert_eq!(e.to_string(), "/data/kg: not a Trellis store (no CURRENT file)");
        let e = OpenError::Layout { path: "/data/kg/CURRENT".into(), problem: LayoutProblem::MissingGeneration { generation: "/data/kg/gen-000004".into() } };
        assert_eq!(e.to_string(), "/data/kg/CURRENT: CURRENT names gen-000004, which does not exist");
        let e = MigrateError::TooOld { path: "/data/kg".into(), found: 0, oldest: 1 };
        assert!(e.to_string().starts_with("/data/kg: format version 0 is older than the oldest this build migrates (1)"), "{e}");
    }

    #[test]
    fn a_migration_refused_at_open_is_the_open_error_itself() {
        // `Store::open` migrates; a lock or layout refusal inside stays matchable as `OpenError`.
        let e = OpenError::from(MigrateError::Open(OpenError::Locked { path: "/s".into(), lock: "/s/LOCK".into() }));
        assert!(matches!(e, OpenError::Locked { .. }), "{e:?}");
        let e = OpenError::from(MigrateError::NoStep { path: "/s".into(), from: 2 });
        assert!(matches!(&e, OpenError::Migrate(m) if matches!(**m, MigrateError::NoStep { from: 2, .. })), "{e:?}");
        assert_eq!(e.to_string(), "/s: no migration step from format version 2");
    }
}
