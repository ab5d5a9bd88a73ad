//! `trellis index-text`: every live entity's document written into a text index inside a
//! new generation of the store, committed atomically like a load (a crash or a cancel
//! leaves the store as it was). Memory is bounded by the engine's writer budget, not by
//! the store: documents are read and handed over a batch at a time.

use super::document::{DocumentReader, FACTS_PER_DOCUMENT};
use super::{analyzer, index_dir, schema, TextError, TextIndexRecord, TEXT_FORMAT};
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::store::generation::NextGeneration;
use crate::store::{layout, read_meta, Store};
use rocksdb::Cache;
use std::path::Path;
use tantivy::{Index, IndexWriter, TantivyDocument};

/// Documents between progress reports and cancel checks.
const BATCH: u32 = 4096;

/// The engine's indexing memory: one writer thread with this budget (the engine flushes a
/// segment when it is reached).
const WRITER_BUDGET: usize = 64 << 20;

/// Builds (or rebuilds) the text index of the store at `dir` as a new generation.
/// `monitor` hears after every batch of documents and, once cancelled, stops the build with
/// [`TextError::Cancelled`], the store unchanged.
pub fn index_text(dir: &Path, monitor: &Monitor) -> Result<TextIndexReport, TextError> {
    let _lock = layout::lock_existing_writer(dir)?;
    let (number, gen) = layout::current_generation(dir)?.ok_or_else(|| crate::store::OpenError::NotAStore { path: dir.into() })?;
    layout::remove_stale(dir, Some(&gen))?;
    let cache = Cache::new_lru_cache(32 << 20);
    crate::store::expect_current_format(dir, &gen, &cache)?;
    let next = NextGeneration::begin(dir, Some(&gen), number + 1, &cache)?;
    let meta = read_meta(&next.db)?;
    let path = index_dir(next.staging_dir());
    if path.exists() {
        std::fs::remove_dir_all(&path).map_err(|e| crate::store::WriteError::io(&path, e))?;
    }
    std::fs::create_dir(&path).map_err(|e| crate::store::WriteError::io(&path, e))?;
    let (schema, fields) = schema();
    let index = Index::create_in_dir(&path, schema).map_err(|e| TextError::engine(&path, e))?;
    analyzer::register(&index);
    let mut writer: IndexWriter<TantivyDocument> = index.writer_with_num_threads(1, WRITER_BUDGET).map_err(|e| TextError::engine(&path, e))?;
    let mut reader = DocumentReader::new(&next.db);
    let total = u32::try_from(meta.entities).unwrap_or(u32::MAX);
    let mut documents = 0u64;
    let mut start = 0u32;
    while start < total {
        monitor.check().map_err(|_| TextError::Cancelled)?;
        let end = start.saturating_add(BATCH).min(total);
        for e in start..end {
            if let Some(doc) = reader.document(e)? {
                writer.add_document(fields.tantivy_document(&doc)).map_err(|e| TextError::engine(&path, e))?;
                documents += 1;
            }
        }
        monitor.report(&Progress::new(Work::IndexText, (1, 2), "entity documents", u64::from(end), Some(u64::from(total)), Unit::Documents));
        start = end;
    }
    monitor.report(&Progress::new(Work::IndexText, (2, 2), "write the index", 0, None, Unit::Documents));
    let record = TextIndexRecord {
        format: TEXT_FORMAT,
        writes: meta.loads.len() as u64,
        facts: meta.facts,
        entities: meta.entities,
        facts_per_document: FACTS_PER_DOCUMENT,
        generation: next.number(),
        written_by: crate::store::build_name(),
    };
    super::follow::commit(&mut writer, &path, &record)?;
    writer.wait_merging_threads().map_err(|e| TextError::engine(&path, e))?;
    drop(reader);
    let committing = monitor.commit_point().map_err(|_| TextError::Cancelled)?;
    next.commit()?;
    drop(committing);
    Ok(TextIndexReport { record, documents })
}

/// What `index_text` built.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TextIndexReport {
    /// What the index records.
    pub record: TextIndexRecord,
    /// Documents written (live entities).
    pub documents: u64,
}

impl Store {
    /// Builds the text index of the store at `dir` (`trellis index-text`); see
    /// [`index_text`].
    pub fn index_text(dir: &Path, monitor: &Monitor) -> Result<TextIndexReport, TextError> {
        index_text(dir, monitor)
    }
}
