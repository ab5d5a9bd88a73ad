//! The store directory: a `CURRENT` pointer to one RocksDB generation, and a writer lock.
//!
//! ```text
//! DIR/CURRENT        "gen-000002\n": the generation readers open
//! DIR/gen-000002/    a RocksDB database (schema/v2.md)
//! DIR/LOCK           held (flock) by the one loader or migration at a time
//! DIR/staging-*/     a load in progress; removed by the next writer
//! ```
//!
//! A load writes a new generation (a hard-link checkpoint of the current one plus the new
//! data) and commits by atomically replacing `CURRENT`. A crash at any moment therefore
//! leaves `CURRENT` naming either the old complete generation or the new complete one.

use crate::error::StoreError;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const CURRENT_FILE: &str = "CURRENT";
pub const LOCK_FILE: &str = "LOCK";
const GEN_PREFIX: &str = "gen-";
const STAGING_PREFIX: &str = "staging-";

/// The generation directory `CURRENT` points at, or `None` when there is no store yet.
pub fn current_generation(dir: &Path) -> Result<Option<(u64, PathBuf)>, StoreError> {
    let path = dir.join(CURRENT_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let name = text.trim();
    let number = name
        .strip_prefix(GEN_PREFIX)
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| StoreError::Layout {
            path: path.clone(),
            what: format!("CURRENT should name a generation like `gen-000001`, found {name:?}"),
        })?;
    let gen = dir.join(name);
    if !gen.is_dir() {
        return Err(StoreError::Layout {
            path: path.clone(),
            what: format!("CURRENT names {name}, which does not exist"),
        });
    }
    Ok(Some((number, gen)))
}

pub fn generation_name(number: u64) -> String {
    format!("{GEN_PREFIX}{number:06}")
}

/// A fresh staging directory name for the next generation.
pub fn staging_dir(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{STAGING_PREFIX}{number:06}-{}", std::process::id()))
}

/// Atomically makes `generation` current: write a temp file, fsync, rename, fsync the dir.
pub fn commit_generation(dir: &Path, number: u64) -> Result<(), StoreError> {
    let tmp = dir.join("CURRENT.tmp");
    let mut f = File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
    writeln!(f, "{}", generation_name(number)).map_err(|e| StoreError::io(&tmp, e))?;
    f.sync_all().map_err(|e| StoreError::io(&tmp, e))?;
    drop(f);
    let cur = dir.join(CURRENT_FILE);
    fs::rename(&tmp, &cur).map_err(|e| StoreError::io(&cur, e))?;
    sync_dir(dir)
}

pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io(dir, e))
}

/// Removes every generation and staging directory except the current one: leftovers of a
/// crashed load or of generations replaced by a commit.
pub fn remove_stale(dir: &Path, keep: Option<&Path>) -> Result<(), StoreError> {
    let entries = fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let stale = (name.starts_with(GEN_PREFIX) || name.starts_with(STAGING_PREFIX) || name.starts_with("tmp-"))
            && Some(path.as_path()) != keep;
        if stale {
            fs::remove_dir_all(&path).map_err(|e| StoreError::io(&path, e))?;
        }
    }
    let tmp = dir.join("CURRENT.tmp");
    if tmp.exists() {
        fs::remove_file(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
    }
    Ok(())
}

/// The writer lock: one loader or migration per store directory at a time. Readers do not
/// take it; they open a generation, which stays on disk while they hold it open.
pub struct WriterLock {
    _file: File,
}

pub fn lock_writer(dir: &Path) -> Result<WriterLock, StoreError> {
    fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(WriterLock { _file: file }),
        Err(fs::TryLockError::WouldBlock) => Err(StoreError::Locked { path: dir.to_path_buf(), lock: path }),
        Err(fs::TryLockError::Error(e)) => Err(StoreError::io(path, e)),
    }
}

/// Bytes used by the files under `path` (the size on disk of a generation).
pub fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => total += dir_size(&entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}
