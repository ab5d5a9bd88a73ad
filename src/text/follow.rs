//! Keeping the text index current with an update, in time that follows the update: the
//! documents an update can have changed are written again and no other. A document shows
//! its entity's name and aliases and its facts with their relations' and other ends'
//! names, so it changes when the entity gains or loses a fact, is renamed or gets or
//! loses an alias, or when a neighbour in it is renamed (every neighbour of a renamed
//! entity is rewritten); a retired entity's document is deleted.

use super::document::{DocumentReader, EntityDocument, FACTS_PER_DOCUMENT};
use super::{analyzer, index_dir, open_index, Fields, TextError, TextIndexRecord, TEXT_FORMAT};
use crate::progress::Monitor;
use crate::store::Meta;
use rocksdb::DB;
use std::collections::BTreeSet;
use std::path::Path;
use tantivy::{IndexWriter, TantivyDocument, Term};

/// Entities whose documents a write may have changed.
#[derive(Debug, Default, Clone)]
pub(crate) struct TouchedEntities {
    /// Entities that gained or lost a fact, an alias, or were added.
    pub documents: BTreeSet<u32>,
    /// Entities renamed: their neighbours' documents name them.
    pub renamed: BTreeSet<u32>,
    /// Entities retired.
    pub retired: BTreeSet<u32>,
}

/// What a write did to the text index.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TextUpkeep {
    /// The store has no text index.
    #[default]
    None,
    /// Brought up to date: documents written again and deleted.
    Updated {
        /// Documents written (added or replaced).
        written: u64,
        /// Documents deleted (retired entities).
        deleted: u64,
    },
    /// Left stale (it was stale before the write, or the write was a load): run
    /// `trellis index-text` again.
    Stale,
}

impl Fields {
    pub(crate) fn tantivy_document(self, doc: &EntityDocument) -> TantivyDocument {
        let mut t = TantivyDocument::default();
        t.add_u64(self.entity, u64::from(doc.entity.0));
        t.add_text(self.name, &doc.name);
        for a in &doc.aliases {
            t.add_text(self.aliases, a);
        }
        for f in &doc.facts {
            t.add_text(self.facts, f.text());
        }
        if !doc.text.is_empty() {
            t.add_text(self.text, &doc.text);
        }
        t.add_text(self.document, serde_json::to_string(doc).expect("a document serializes"));
        t
    }
}

/// Commits `writer` with `record` as the commit's payload.
pub(super) fn commit(writer: &mut IndexWriter<TantivyDocument>, path: &Path, record: &TextIndexRecord) -> Result<(), TextError> {
    let mut prepared = writer.prepare_commit().map_err(|e| TextError::engine(path, e))?;
    prepared.set_payload(&serde_json::to_string(record).expect("a record serializes"));
    prepared.commit().map_err(|e| TextError::engine(path, e))?;
    Ok(())
}

/// Brings the text index of the generation being written (`staging`, its database `db`)
/// up to date with a write that turned `before` into `after` and touched `touched`; the
/// generation will be number `generation`.
pub(crate) fn follow_write(
    staging: &Path,
    db: &DB,
    before: &Meta,
    after: &Meta,
    generation: u64,
    touched: &TouchedEntities,
    monitor: &Monitor,
) -> Result<TextUpkeep, TextError> {
    let path = index_dir(staging);
    if !path.is_dir() {
        return Ok(TextUpkeep::None);
    }
    let (index, record) = match open_index(&path) {
        // An index of another format is left for `trellis index-text` to rebuild.
        Err(TextError::Format { .. }) => return Ok(TextUpkeep::Stale),
        other => other?,
    };
    if !record.is_current_with(before) || record.facts_per_document != FACTS_PER_DOCUMENT || record.format != TEXT_FORMAT {
        return Ok(TextUpkeep::Stale);
    }
    analyzer::register(&index);
    let fields = super::schema().1;
    let mut reader = DocumentReader::new(db);
    let mut rewrite: BTreeSet<u32> = touched.documents.clone();
    for &e in &touched.renamed {
        rewrite.insert(e);
        rewrite.extend(reader.neighbours(e)?);
    }
    rewrite.retain(|e| !touched.retired.contains(e));
    // Texts from a documents input live only in the index: a rewritten document keeps its
    // entity's, read before the writer deletes it.
    let before_reader = index.reader_builder().reload_policy(tantivy::ReloadPolicy::Manual).try_into().map_err(|e| TextError::engine(&path, e))?;
    let old_text = |e: u32| -> Result<String, TextError> { Ok(super::stored_document(&before_reader, fields, &path, e)?.map(|d| d.text).unwrap_or_default()) };
    let mut writer: IndexWriter<TantivyDocument> = index.writer_with_num_threads(1, 15 << 20).map_err(|e| TextError::engine(&path, e))?;
    let (mut written, mut deleted) = (0u64, 0u64);
    let mut texts = record.texts;
    for (i, &e) in rewrite.iter().chain(touched.retired.iter()).enumerate() {
        if i % 1024 == 0 {
            monitor.check().map_err(|_| TextError::Cancelled)?;
        }
        let text = if record.texts > 0 { old_text(e)? } else { String::new() };
        writer.delete_term(Term::from_field_u64(fields.entity, u64::from(e)));
        if touched.retired.contains(&e) {
            deleted += 1;
            texts = texts.saturating_sub(u64::from(!text.is_empty()));
            continue;
        }
        if let Some(mut doc) = reader.document(e)? {
            doc.text = text;
            writer.add_document(fields.tantivy_document(&doc)).map_err(|e| TextError::engine(&path, e))?;
            written += 1;
        }
    }
    let record = TextIndexRecord {
        writes: after.loads.len() as u64,
        facts: after.facts,
        entities: after.entities,
        generation,
        texts,
        written_by: crate::store::build_name(),
        ..record
    };
    commit(&mut writer, &path, &record)?;
    writer.wait_merging_threads().map_err(|e| TextError::engine(&path, e))?;
    Ok(TextUpkeep::Updated { written, deleted })
}
