//! `trellis index-tokens`: encode every entity and relation name with a tokenizer, in
//! linearization context, and store the token lists and the entity-token trie, as a new
//! generation of the store (crash-safe like a load). Indexing a tokenizer again replaces
//! its index; other tokenizers' indexes are kept. The record says what the index was built
//! from (dictionary sizes and epoch, linearization), so a reader can refuse a stale one.

use super::IngestError;
use crate::backend::RocksResult;
use crate::ingest::NameTokenizer;
use crate::linearize::Side;
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::store::codec::{decode_term, id_key};
use crate::store::error::{OpenError, ReadError};
use crate::store::generation::NextGeneration;
use crate::store::meta::Meta;
use crate::store::schema::{CF_ENTITIES, CF_RELATIONS, CF_RETIRED, CF_TERM_TOKENS, CF_TOKENIZERS, CF_TOKENIZER_FILES, CF_TOKEN_TRIE};
use crate::store::tokens::{encode_tokens, fingerprint_range, term_key, tokenizer_key, trie_key, TokenizerInfo, END};
use crate::store::{layout, read_meta};
use rocksdb::{Cache, WriteBatch, DB};
use std::ops::Range;
use std::path::Path;

const BATCH: u32 = 4096;

// A writer's operation (a new generation, like a load), so it lives with the loader; it
// is offered as `Store::index_tokens`, beside `Store::open`, `Store::validate` and
// `Store::migrate`.
impl crate::store::Store {
    /// Builds the token index of `tokenizer` in the store at `dir` (`trellis index-tokens`):
    /// every entity and relation name as the tokenizer's ids, and the trie constrained
    /// decoding walks, written into a new generation committed atomically like a load;
    /// `name` is recorded for humans. `monitor` hears after every batch of names (step 1
    /// entity names, step 2 relation names) and, once cancelled, stops the indexing with
    /// `IngestError::Cancelled`, the store unchanged.
    pub fn index_tokens(dir: &Path, tokenizer: &NameTokenizer, name: &str, monitor: &Monitor) -> Result<TokenizerInfo, IngestError> {
        index_tokens(dir, tokenizer, name, monitor)
    }
}

pub(crate) fn index_tokens(dir: &Path, tokenizer: &NameTokenizer, name: &str, monitor: &Monitor) -> Result<TokenizerInfo, IngestError> {
    let _lock = layout::lock_existing_writer(dir)?;
    let (number, gen) = layout::current_generation(dir)?.ok_or_else(|| OpenError::NotAStore { path: dir.into() })?;
    layout::remove_stale(dir, Some(&gen))?;
    let cache = Cache::new_lru_cache(32 << 20);
    crate::store::expect_current_format(dir, &gen, &cache)?;
    let next = NextGeneration::begin(dir, Some(&gen), number + 1, &cache)?;
    let db = &next.db;
    let meta = read_meta(db)?;
    let fp = tokenizer.fingerprint();
    let cf = |n: &str| db.cf_handle(n).expect("column family exists");
    // Replace an earlier index of the same tokenizer.
    let (from, to) = fingerprint_range(fp);
    db.delete_range_cf(cf(CF_TERM_TOKENS), &from[..], &to[..]).rocks()?;
    db.delete_range_cf(cf(CF_TOKEN_TRIE), &from[..], &to[..]).rocks()?;
    let mut buf = Vec::new();
    let sides = [(Side::Entity, meta.entities, CF_ENTITIES, "entity names"), (Side::Relation, meta.relations, CF_RELATIONS, "relation names")];
    for (step, (side, total, names_cf, stage)) in sides.into_iter().enumerate() {
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        let mut start = 0u32;
        while start < total {
            // Nothing is committed before the end: a cancelled index leaves an uncommitted
            // generation, removed like a killed load's.
            monitor.check().map_err(|_| IngestError::Cancelled)?;
            let end = start.saturating_add(BATCH).min(total);
            let (ids, names) = read_names(db, side, names_cf, start..end)?;
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            if start == 0 {
                // The index keeps one token list per name, taken at the first position of its
                // side: check on the first batch that every other position writes the same ids.
                tokenizer.check_position_independent(side, &refs)?;
            }
            let encoded = tokenizer.encode(side, &refs)?;
            let mut batch = WriteBatch::default();
            for ((id, tokens), name) in ids.iter().zip(&encoded).zip(&names) {
                if tokens.contains(&END) {
                    return Err(IngestError::ReservedToken { id: END, name: name.clone() });
                }
                encode_tokens(tokens, &mut buf);
                batch.put_cf(cf(CF_TERM_TOKENS), term_key(fp, side, *id), &buf);
                batch.put_cf(cf(CF_TOKEN_TRIE), trie_key(fp, side, tokens, *id), []);
            }
            db.write(batch).rocks()?;
            monitor.report(&Progress::new(Work::IndexTokens, (step + 1, 2), stage, u64::from(end), Some(u64::from(total)), Unit::Names));
            start = end;
        }
    }
    let info = TokenizerInfo {
        fingerprint: format!("{fp:016x}"),
        name: name.to_owned(),
        vocab_size: tokenizer.vocab_size() as u64,
        linearization: tokenizer.linearization().clone(),
        linearization_fingerprint: tokenizer.linearization().fingerprint_hex(),
        entities: meta.entities,
        relations: meta.relations,
        dictionary_epoch: meta.dictionary_epoch,
        indexed_by: crate::store::build_name(),
        indexed_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    };
    db.put_cf(cf(CF_TOKENIZERS), tokenizer_key(fp), serde_json::to_vec(&info).expect("info serializes")).rocks()?;
    // The tokenizer itself, so loads and updates can encode the names they add or change.
    let json = tokenizer.tokenizer().to_string(false).map_err(|e| crate::ingest::TokenizerError::Serialize { source: crate::backend::tokenizers(e) })?;
    db.put_cf(cf(CF_TOKENIZER_FILES), tokenizer_key(fp), json.as_bytes()).rocks()?;
    // As a load's: a cancel before it leaves the store unchanged, one after it is refused.
    let committing = monitor.commit_point().map_err(|_| IngestError::Cancelled)?;
    next.commit()?;
    drop(committing);
    Ok(info)
}

/// The ids of `range` on `side` that have a record and are not retired, with their names.
fn read_names(db: &DB, side: Side, names_cf: &'static str, range: Range<u32>) -> Result<(Vec<u32>, Vec<String>), IngestError> {
    let cf = |n: &str| db.cf_handle(n).expect("column family exists");
    let mut ids = Vec::with_capacity(range.len());
    let mut names = Vec::with_capacity(range.len());
    for id in range {
        let key = id_key(id);
        if side == Side::Entity && db.get_pinned_cf(cf(CF_RETIRED), key).rocks()?.is_some() {
            continue;
        }
        let v = db.get_pinned_cf(cf(names_cf), key).rocks()?.ok_or_else(|| ReadError::corrupt(names_cf, &key, "dense id without a record"))?;
        names.push(decode_term(&v).ok_or_else(|| ReadError::corrupt(names_cf, &key, "undecodable record"))?.name);
        ids.push(id);
    }
    Ok((ids, names))
}

/// The terms a write added, renamed or retired: what the token indexes must follow.
#[derive(Debug, Default, Clone)]
pub(crate) struct ChangedTerms {
    /// Entities added or renamed (ranges: a load's new ids are one).
    pub entities: Vec<Range<u32>>,
    /// Relations added.
    pub relations: Vec<Range<u32>>,
    /// Entities retired by this write.
    pub retired: Vec<u32>,
}

impl ChangedTerms {
    pub(crate) fn is_empty(&self) -> bool {
        self.entities.iter().all(|r| r.is_empty()) && self.relations.iter().all(|r| r.is_empty()) && self.retired.is_empty()
    }

    /// Names encoded again per tokenizer.
    pub(crate) fn names(&self) -> u64 {
        self.entities.iter().chain(&self.relations).map(|r| r.len() as u64).sum()
    }
}

/// What a write did to the token indexes.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct TokenUpkeep {
    /// Indexes brought up to date with the write, by `name (fingerprint)`.
    pub updated: Vec<String>,
    /// Indexes left stale: built before format 4, without the tokenizer stored with them,
    /// or stale already before this write (run `index-tokens` again for them).
    pub stale: Vec<String>,
    /// Names encoded (per updated index).
    pub names_encoded: u64,
}

/// Brings every token index of the generation being written (`db`) up to date with a
/// write that changed `changed` and turned `before` (the meta the indexes were current
/// with) into `after`: the changed names are encoded again, the retired ones removed, and
/// each record says it is current with `after`. Only the changed names are touched, so the
/// cost follows the write, not the store.
pub(crate) fn follow_write(db: &DB, before: &Meta, after: &Meta, changed: &ChangedTerms, monitor: &Monitor) -> Result<TokenUpkeep, IngestError> {
    let cf = |n: &str| db.cf_handle(n).expect("column family exists");
    let mut upkeep = TokenUpkeep::default();
    let mut records = Vec::new();
    let mut it = db.raw_iterator_cf(cf(CF_TOKENIZERS));
    it.seek_to_first();
    while let Some((k, v)) = it.item() {
        let info: TokenizerInfo = serde_json::from_slice(v).map_err(|e| ReadError::json(CF_TOKENIZERS, k, "tokenizer", e))?;
        records.push((k.to_vec(), info));
        it.next();
    }
    it.status().rocks()?;
    drop(it);
    for (key, mut info) in records {
        let label = format!("{} ({})", info.name, info.fingerprint);
        let current = info.entities == before.entities && info.relations == before.relations && info.dictionary_epoch == before.dictionary_epoch;
        let file = db.get_pinned_cf(cf(CF_TOKENIZER_FILES), &key).rocks()?.map(|v| v.to_vec());
        let (Some(file), true) = (file, current) else {
            upkeep.stale.push(label);
            continue;
        };
        if changed.is_empty() && info.entities == after.entities && info.relations == after.relations && info.dictionary_epoch == after.dictionary_epoch {
            continue;
        }
        let fp = u64::from_be_bytes(key.as_slice().try_into().map_err(|_| ReadError::corrupt(CF_TOKENIZERS, &key, "key is not 8 bytes"))?);
        let json = std::str::from_utf8(&file).map_err(|_| ReadError::corrupt(CF_TOKENIZER_FILES, &key, "not UTF-8"))?;
        let tokenizer = NameTokenizer::from_json(json, fp, info.linearization.clone())?;
        let mut buf = Vec::new();
        let mut batch = WriteBatch::default();
        let forget = |batch: &mut WriteBatch, side: Side, id: u32| -> Result<(), IngestError> {
            if let Some(old) = db.get_pinned_cf(cf(CF_TERM_TOKENS), term_key(fp, side, id)).rocks()? {
                let tokens = crate::store::tokens::decode_tokens(&old)
                    .ok_or_else(|| ReadError::corrupt(CF_TERM_TOKENS, &term_key(fp, side, id), "undecodable token list"))?;
                batch.delete_cf(cf(CF_TOKEN_TRIE), trie_key(fp, side, &tokens, id));
                batch.delete_cf(cf(CF_TERM_TOKENS), term_key(fp, side, id));
            }
            Ok(())
        };
        for &id in &changed.retired {
            forget(&mut batch, Side::Entity, id)?;
        }
        for (side, ranges, names_cf) in [(Side::Entity, &changed.entities, CF_ENTITIES), (Side::Relation, &changed.relations, CF_RELATIONS)] {
            for range in ranges {
                let mut start = range.start;
                while start < range.end {
                    monitor.check().map_err(|_| IngestError::Cancelled)?;
                    let end = start.saturating_add(BATCH).min(range.end);
                    let (ids, names) = read_names(db, side, names_cf, start..end)?;
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    let encoded = tokenizer.encode(side, &refs)?;
                    for ((id, tokens), name) in ids.iter().zip(&encoded).zip(&names) {
                        if tokens.contains(&END) {
                            return Err(IngestError::ReservedToken { id: END, name: name.clone() });
                        }
                        forget(&mut batch, side, *id)?;
                        encode_tokens(tokens, &mut buf);
                        batch.put_cf(cf(CF_TERM_TOKENS), term_key(fp, side, *id), &buf);
                        batch.put_cf(cf(CF_TOKEN_TRIE), trie_key(fp, side, tokens, *id), []);
                    }
                    upkeep.names_encoded += ids.len() as u64;
                    // A batch's deletes must see the puts of the batch before.
                    db.write(std::mem::take(&mut batch)).rocks()?;
                    start = end;
                }
            }
        }
        info.entities = after.entities;
        info.relations = after.relations;
        info.dictionary_epoch = after.dictionary_epoch;
        batch.put_cf(cf(CF_TOKENIZERS), &key, serde_json::to_vec(&info).expect("info serializes"));
        db.write(batch).rocks()?;
        upkeep.updated.push(label);
    }
    Ok(upkeep)
}
