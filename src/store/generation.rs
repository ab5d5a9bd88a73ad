//! Writing a new generation of a store: the one way loads, migrations and token indexing
//! change a store (see `layout.rs` for why this is crash-safe).

use super::layout;
use super::open_options;
use super::schema::{cf_options, descriptors, COLUMN_FAMILIES};
use crate::backend::RocksResult;
use crate::store::error::WriteError;
use rocksdb::{Cache, ColumnFamilyDescriptor, DB};
use std::path::{Path, PathBuf};

/// Generation `number` under construction in a staging directory. Dropping it without
/// `commit` leaves the store as it was (the staging directory is removed by the next writer).
pub struct NextGeneration {
    pub db: DB,
    dir: PathBuf,
    number: u64,
    staging: PathBuf,
}

impl NextGeneration {
    /// Starts generation `number` from a hard-link copy of the committed generation at
    /// `current` (its directory), or empty. The caller holds the writer lock.
    ///
    /// A committed generation is never opened for writing: readers may be opening it at
    /// the same moment, and a read-write open rewrites its manifest and may remove files it
    /// considers obsolete. Committed generations were closed cleanly (every column family
    /// flushed, the log synced), so their SST files are hard-linked and the few small
    /// files beside them (manifest, `CURRENT`, options, log) copied: the same result as
    /// RocksDB's checkpoint, without a writer on the source.
    pub fn begin(dir: &Path, current: Option<&Path>, number: u64, cache: &Cache) -> Result<NextGeneration, WriteError> {
        Self::begin_with(dir, current, number, cache, true)
    }

    /// As `begin`, with RocksDB's automatic compaction off when `compaction` is false: for
    /// writers of many keys spread over a big store, whose level-0 files compacted into its
    /// bottom level would rewrite every file their keys span (later generations compact them).
    pub fn begin_with(dir: &Path, current: Option<&Path>, number: u64, cache: &Cache, compaction: bool) -> Result<NextGeneration, WriteError> {
        let staging = layout::staging_dir(dir, number);
        if let Some(source) = current {
            link_generation(source, &staging)?;
        }
        // Opening with every column family of this build's schema creates the ones an
        // older generation lacks.
        let mut families = descriptors(cache);
        if !compaction {
            families = COLUMN_FAMILIES
                .iter()
                .map(|spec| {
                    let mut opts = cf_options(spec, cache);
                    opts.set_disable_auto_compactions(true);
                    ColumnFamilyDescriptor::new(spec.name, opts)
                })
                .collect();
        }
        let db = DB::open_cf_descriptors(&open_options(), &staging, families).rocks()?;
        Ok(NextGeneration { db, dir: dir.to_path_buf(), number, staging })
    }

    /// The staging directory the generation is written in (its text index goes inside).
    pub fn staging_dir(&self) -> &Path {
        &self.staging
    }

    /// The number this generation will have once committed.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Makes the generation durable and current; returns its directory.
    pub fn commit(self) -> Result<PathBuf, WriteError> {
        for spec in COLUMN_FAMILIES {
            self.db.flush_cf(self.db.cf_handle(spec.name).expect("column family exists")).rocks()?;
        }
        self.db.flush_wal(true).rocks()?;
        let NextGeneration { db, dir, number, staging } = self;
        drop(db);
        let gen = dir.join(layout::generation_name(number));
        std::fs::rename(&staging, &gen).map_err(|e| WriteError::io(&staging, e))?;
        layout::sync_dir(&dir)?;
        layout::commit_generation(&dir, number)?;
        // The commit is done; what follows only frees space. Generations that live readers
        // registered stay (their SST files are opened lazily); a later commit or writer
        // start removes them once those readers are gone.
        layout::remove_stale(&dir, Some(&gen))?;
        Ok(gen)
    }
}

/// Hard-links the SST files of generation directory `from` into the new directory `to`
/// and copies its other database files (RocksDB's own lock and info logs excepted). The
/// text index (subdirectory [`TEXT_INDEX_DIR`]) and the vector files ([`VECTORS_DIR`]) are hard-linked whole: its engine writes every
/// file once and replaces its metadata by renaming a new file over it, so a file shared
/// with the committed generation is never changed in place; its lock files are left behind.
fn link_generation(from: &Path, to: &Path) -> Result<(), WriteError> {
    std::fs::create_dir(to).map_err(|e| WriteError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| WriteError::io(from, e))? {
        let entry = entry.map_err(|e| WriteError::io(from, e))?;
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if text == "LOCK" || text.starts_with("LOG") {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if (text == TEXT_INDEX_DIR || text == VECTORS_DIR) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            link_files(&src, &dst)?;
        } else if text.ends_with(".sst") || text.ends_with(".blob") {
            std::fs::hard_link(&src, &dst).map_err(|e| WriteError::io(&dst, e))?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| WriteError::io(&dst, e))?;
            std::fs::File::open(&dst).and_then(|f| f.sync_all()).map_err(|e| WriteError::io(&dst, e))?;
        }
    }
    layout::sync_dir(to)
}

/// The text index's directory inside a generation (`trellis index-text`; schema/v4.md).
pub const TEXT_INDEX_DIR: &str = "text";

/// The vector files' directory inside a generation (`trellis index-vectors`; schema/v4.md).
/// Each file is written once and renamed into place, so it is hard-linked like the text index.
pub const VECTORS_DIR: &str = "vectors";

/// Hard-links the files of a directory whose files are never changed in place (lock files
/// and unfinished `.tmp` files left behind).
fn link_files(from: &Path, to: &Path) -> Result<(), WriteError> {
    std::fs::create_dir(to).map_err(|e| WriteError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| WriteError::io(from, e))? {
        let entry = entry.map_err(|e| WriteError::io(from, e))?;
        let name = entry.file_name();
        let n = name.to_string_lossy();
        if n.ends_with(".lock") || n.ends_with(".tmp") || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let dst = to.join(&name);
        std::fs::hard_link(entry.path(), &dst).map_err(|e| WriteError::io(&dst, e))?;
    }
    layout::sync_dir(to)
}
