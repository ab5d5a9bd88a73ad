//! `trellis index-text`: every live entity's document written into a text index inside a
//! new generation of the store, committed atomically like a load (a crash or a cancel
//! leaves the store as it was). Memory is bounded by the engine's writer budget, not by
//! the store: documents are read and handed over a batch at a time.

use super::document::{DocumentReader, FACTS_PER_DOCUMENT};
use super::documents::{match_documents, DocumentsInput};
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

/// Builds (or rebuilds) the text index of the store at `dir` as a new generation, with the
/// texts of `documents` when given (see [`super::documents`]; a rebuild without it drops
/// texts an earlier build had). `monitor` hears after every batch of documents and, once
/// cancelled, stops the build with [`TextError::Cancelled`], the store unchanged.
pub fn index_text(dir: &Path, documents: Option<&DocumentsInput>, monitor: &Monitor) -> Result<TextIndexReport, TextError> {
    let _lock = layout::lock_existing_writer(dir)?;
    // Titles resolve against the committed generation: the writer lock keeps it current.
    let offsets = match documents {
        None => None,
        Some(input) => {
            monitor.report(&Progress::new(Work::IndexText, (1, 3), "match document titles", 0, None, Unit::Documents));
            let store = Store::open_read_only(dir)?;
            Some(match_documents(&store, input)?)
        }
    };
    let mut texts = match &offsets {
        Some(o) => Some(o.texts()?),
        None => None,
    };
    let steps = if documents.is_some() { 3 } else { 2 };
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
    let (mut written, mut with_text) = (0u64, 0u64);
    let mut start = 0u32;
    while start < total {
        monitor.check().map_err(|_| TextError::Cancelled)?;
        let end = start.saturating_add(BATCH).min(total);
        for e in start..end {
            if let Some(mut doc) = reader.document(e)? {
                if let Some(texts) = texts.as_mut() {
                    doc.text = texts.text(e)?;
                    with_text += u64::from(!doc.text.is_empty());
                }
                writer.add_document(fields.tantivy_document(&doc)).map_err(|e| TextError::engine(&path, e))?;
                written += 1;
            }
        }
        monitor.report(&Progress::new(Work::IndexText, (steps - 1, steps), "entity documents", u64::from(end), Some(u64::from(total)), Unit::Documents));
        start = end;
    }
    monitor.report(&Progress::new(Work::IndexText, (steps, steps), "write the index", 0, None, Unit::Documents));
    let record = TextIndexRecord {
        format: TEXT_FORMAT,
        writes: meta.loads.len() as u64,
        facts: meta.facts,
        entities: meta.entities,
        facts_per_document: FACTS_PER_DOCUMENT,
        texts: with_text,
        generation: next.number(),
        written_by: crate::store::build_name(),
    };
    super::follow::commit(&mut writer, &path, &record)?;
    writer.wait_merging_threads().map_err(|e| TextError::engine(&path, e))?;
    drop(reader);
    let committing = monitor.commit_point().map_err(|_| TextError::Cancelled)?;
    next.commit()?;
    drop(committing);
    let (read, skipped) = offsets.as_ref().map_or((0, 0), |o| (o.read, o.skipped));
    Ok(TextIndexReport { record, documents: written, texts: DocumentsReport { read, matched: with_text, skipped } })
}

/// What became of a documents input's lines.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct DocumentsReport {
    /// Documents read (non-blank lines).
    pub read: u64,
    /// Those whose text an entity document now holds.
    pub matched: u64,
    /// Those skipped: the title names no entity, or one an earlier line gave a document.
    pub skipped: u64,
}

/// What `index_text` built.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TextIndexReport {
    /// What the index records.
    pub record: TextIndexRecord,
    /// Documents written (live entities).
    pub documents: u64,
    /// The documents input's lines (zeros without one).
    pub texts: DocumentsReport,
}

impl Store {
    /// Builds the text index of the store at `dir` (`trellis index-text`), with the texts
    /// of `documents` when given; see [`index_text`].
    pub fn index_text(dir: &Path, documents: Option<&DocumentsInput>, monitor: &Monitor) -> Result<TextIndexReport, TextError> {
        index_text(dir, documents, monitor)
    }
}
