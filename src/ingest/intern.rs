//! Interning: the records of a parsed chunk become id triples in the sorter, labels and
//! aliases wait for the dictionary step. Keys are looked up in this load's dictionaries,
//! then in the store being added to.

use super::build::Loading;
use super::error::IngestError;
use super::parse::{ParsedChunk, Record, TermRef};
use super::OnError;
use crate::store::codec::{self, TermKind};
use crate::store::error::ReadError;
use crate::store::meta::InputRecord;
use crate::store::schema::*;
use rocksdb::DB;

impl Loading<'_> {
    pub(super) fn take_chunk(&mut self, file: &str, chunk: ParsedChunk, record: &mut InputRecord) -> Result<(), IngestError> {
        if let Some(first) = chunk.errors.first() {
            if self.loader.on_error == OnError::Stop {
                return Err(IngestError::bad_line(file, first));
            }
            for e in &chunk.errors {
                self.reject(file, e)?;
            }
            record.rejected += chunk.errors.len() as u64;
        }
        let arena = &chunk.arena;
        // Entity lookups miss the CPU caches once the dictionary is large: hash the keys
        // first, then prefetch each key's table slot a few records ahead of its lookup.
        const AHEAD: usize = 8;
        let hashes: Vec<[u64; 2]> = chunk
            .records
            .iter()
            .map(|rec| match rec {
                Record::Fact { s, o, .. } => [self.entities.hash(s.key.get(arena)), self.entities.hash(o.key.get(arena))],
                _ => [0, 0],
            })
            .collect();
        for (i, rec) in chunk.records.iter().enumerate() {
            if let Some(ahead) = hashes.get(i + AHEAD) {
                self.entities.prefetch(ahead[0]);
                self.entities.prefetch(ahead[1]);
            }
            match *rec {
                Record::Fact { s, r, o } => {
                    let s = self.intern_entity(arena, s, hashes[i][0])?;
                    let r = self.intern_relation(r.get(arena), chunk.relation_kind)?;
                    let o = self.intern_entity(arena, o, hashes[i][1])?;
                    let dictionaries = self.entities.heap_bytes() + self.relations.heap_bytes();
                    self.sorter.push([s, r, o], dictionaries)?;
                    self.report.facts_read += 1;
                }
                Record::Label { subject, text } => {
                    let key = String::from_utf8_lossy(subject.get(arena)).into_owned();
                    self.labels.entry(key).or_insert_with(|| String::from_utf8_lossy(text.get(arena)).into_owned());
                }
                Record::Alias { subject, text } => {
                    let key = String::from_utf8_lossy(subject.get(arena)).into_owned();
                    self.aliases.push((key, String::from_utf8_lossy(text.get(arena)).into_owned()));
                }
            }
        }
        Ok(())
    }

    fn intern_entity(&mut self, arena: &[u8], t: TermRef, hash: u64) -> Result<u32, IngestError> {
        let old = self.old;
        let mut lookup = |k: &[u8]| lookup_id(old, CF_ENTITY_KEYS, k);
        self.entities
            .intern_hashed(t.key.get(arena), hash, t.kind, t.name.map(|n| n.get(arena)), &mut lookup)?
            .ok_or(IngestError::TooManyIds { what: "entities", limit: u64::from(u32::MAX) })
    }

    fn intern_relation(&mut self, key: &[u8], kind: TermKind) -> Result<u32, IngestError> {
        let old = self.old;
        let mut lookup = |k: &[u8]| lookup_id(old, CF_RELATION_KEYS, k);
        self.relations.intern(key, kind, None, &mut lookup)?.ok_or(IngestError::TooManyIds { what: "relations", limit: u64::from(u32::MAX) })
    }
}

/// The id of `key` in the store being added to (`None`: a first load, or a new key).
pub(super) fn lookup_id(old: Option<&DB>, cf: &'static str, key: &[u8]) -> Result<Option<u32>, ReadError> {
    let Some(db) = old else { return Ok(None) };
    match db.get_pinned_cf(db.cf_handle(cf).expect("cf"), key).map_err(|e| ReadError::Rocks(e.into()))? {
        None => Ok(None),
        Some(v) => codec::be_u32(&v).map(Some).ok_or_else(|| ReadError::corrupt(cf, key, "id is not 4 bytes")),
    }
}

pub(super) fn lookup_value(old: Option<&DB>, cf: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
    let Some(db) = old else { return Ok(None) };
    Ok(db.get_pinned_cf(db.cf_handle(cf).expect("cf"), key).map_err(|e| ReadError::Rocks(e.into()))?.map(|v| v.to_vec()))
}

pub(super) fn lookup_exists(old: Option<&DB>, cf: &'static str, key: &[u8]) -> Result<bool, ReadError> {
    let Some(db) = old else { return Ok(false) };
    Ok(db.get_pinned_cf(db.cf_handle(cf).expect("cf"), key).map_err(|e| ReadError::Rocks(e.into()))?.is_some())
}
