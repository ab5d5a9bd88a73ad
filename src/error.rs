//! Library errors. Each operation has a narrow enum so callers can match what it can
//! produce; corruption names the column family and key, user mistakes say what to do.

use std::path::PathBuf;

/// Errors from opening, reading, validating or migrating a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: not a Trellis store (no CURRENT file); create one with `trellis ingest --store {path} FILE`")]
    NotAStore { path: PathBuf },
    #[error("{path}: the store is format version {found}, written by a newer Trellis; this build reads versions up to {supported}. Upgrade Trellis")]
    TooNew { path: PathBuf, found: u32, supported: u32 },
    #[error("{path}: the store is format version {found}, older than this build's {current}; run `trellis migrate --store {path}`")]
    NeedsMigration { path: PathBuf, found: u32, current: u32 },
    #[error("{path}: store is locked by another loader or migration (lock file {lock})")]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("corrupt store: column family `{cf}`, key {key}: {what}")]
    Corrupt { cf: &'static str, key: String, what: String },
    #[error("{path}: {what}")]
    Layout { path: PathBuf, what: String },
    #[error("{path}: no token index for the tokenizer with fingerprint {fingerprint} (indexed: {indexed}); run `trellis index-tokens --store {path} --tokenizer FILE`")]
    TokenizerNotIndexed { path: PathBuf, fingerprint: String, indexed: String },
    #[error("{path}: the token index of tokenizer {tokenizer} is stale: {why}; run `trellis index-tokens --store {path} --tokenizer FILE --linearization {linearization}` again")]
    TokenIndexStale { path: PathBuf, tokenizer: String, why: String, linearization: String },
    #[error(
        "{path}: the token index of tokenizer {fingerprint} was built with linearization {indexed}, not {wanted}; run `trellis index-tokens --store {path} --tokenizer FILE --linearization {wanted}`"
    )]
    TokenIndexLinearization { path: PathBuf, fingerprint: String, indexed: String, wanted: String },
    #[error("{store}: files of generation {generation} were removed while this reader had it open (by hand, or by a Trellis that does not see registered readers); reopen the store to read its current generation ({source})")]
    GenerationRemoved { store: PathBuf, generation: PathBuf, source: rocksdb::Error },
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// A PCST instance the solver refused (the retrievers build only valid ones).
    #[error("prize-collecting Steiner tree: {0}")]
    Pcst(#[from] crate::graph::pcst::PcstError),
}

impl StoreError {
    pub(crate) fn corrupt(cf: &'static str, key: &[u8], what: impl Into<String>) -> StoreError {
        StoreError::Corrupt { cf, key: hex(key), what: what.into() }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> StoreError {
        StoreError::Io { path: path.into(), source }
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
