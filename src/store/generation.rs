//! Writing a new generation of a store: the one way loads, migrations and token indexing
//! change a store (see `layout.rs` for why this is crash-safe).

use super::layout;
use super::open_options;
use super::schema::{descriptors, COLUMN_FAMILIES};
use crate::backend::RocksResult;
use crate::store::error::WriteError;
use rocksdb::{checkpoint::Checkpoint, Cache, DB};
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
    /// Starts generation `number` from a hard-link checkpoint of `current`, or empty.
    /// The caller holds the writer lock.
    pub fn begin(dir: &Path, current: Option<&DB>, number: u64, cache: &Cache) -> Result<NextGeneration, WriteError> {
        let staging = layout::staging_dir(dir, number);
        if let Some(db) = current {
            Checkpoint::new(db).rocks()?.create_checkpoint(&staging).rocks()?;
        }
        // Opening with every column family of this build's schema creates the ones an
        // older generation lacks.
        let db = DB::open_cf_descriptors(&open_options(), &staging, descriptors(cache)).rocks()?;
        Ok(NextGeneration { db, dir: dir.to_path_buf(), number, staging })
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
