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
use crate::store::schema::{self, CF_ENTITIES, CF_RELATIONS, CF_TERM_TOKENS, CF_TOKENIZERS, CF_TOKEN_TRIE, FORMAT_VERSION};
use crate::store::tokens::{encode_tokens, fingerprint_range, term_key, tokenizer_key, trie_key, TokenizerInfo, END};
use crate::store::{layout, open_options, read_meta, read_version};
use rocksdb::{Cache, WriteBatch, DB};
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
    let version = {
        let db = DB::open_cf_descriptors_read_only(&open_options(), &gen, schema::existing_descriptors(&gen, &cache).rocks()?, false).rocks()?;
        read_version(&db)?
    };
    if version != FORMAT_VERSION {
        return Err(if version > FORMAT_VERSION {
            OpenError::TooNew { path: dir.into(), found: version, supported: FORMAT_VERSION }
        } else {
            OpenError::NeedsMigration { path: dir.into(), found: version, current: FORMAT_VERSION }
        }
        .into());
    }
    let mut opts = open_options();
    opts.set_disable_auto_compactions(true);
    let current = DB::open_cf_descriptors(&opts, &gen, schema::descriptors(&cache)).rocks()?;
    let next = NextGeneration::begin(dir, Some(&current), number + 1, &cache)?;
    drop(current);
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
            let mut names = Vec::with_capacity((end - start) as usize);
            for id in start..end {
                let key = id_key(id);
                let v = db.get_pinned_cf(cf(names_cf), key).rocks()?.ok_or_else(|| ReadError::corrupt(names_cf, &key, "dense id without a record"))?;
                names.push(decode_term(&v).ok_or_else(|| ReadError::corrupt(names_cf, &key, "undecodable record"))?.name);
            }
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            if start == 0 {
                // The index keeps one token list per name, taken at the first position of its
                // side: check on the first batch that every other position writes the same ids.
                tokenizer.check_position_independent(side, &refs)?;
            }
            let encoded = tokenizer.encode(side, &refs)?;
            let mut batch = WriteBatch::default();
            for (i, tokens) in encoded.iter().enumerate() {
                let id = start + i as u32;
                if tokens.contains(&END) {
                    return Err(IngestError::ReservedToken { id: END, name: names[i].clone() });
                }
                encode_tokens(tokens, &mut buf);
                batch.put_cf(cf(CF_TERM_TOKENS), term_key(fp, side, id), &buf);
                batch.put_cf(cf(CF_TOKEN_TRIE), trie_key(fp, side, tokens, id), []);
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
    // As a load's: a cancel before it leaves the store unchanged, one after it is refused.
    let committing = monitor.commit_point().map_err(|_| IngestError::Cancelled)?;
    next.commit()?;
    drop(committing);
    Ok(info)
}
