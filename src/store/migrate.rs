//! Stepwise format migrations: `vN -> vN+1`, each step committed before the next.
//!
//! A migration runs on a checkpoint of the current generation (hard links, so cheap) and
//! commits by replacing `CURRENT`, like a load: a crash mid-migration leaves the old store.
//! Steps are listed in `MIGRATIONS` and described in `migrations/`; the committed v1 store
//! under `tests/fixtures/stores/` is migrated by the tests.

use super::generation::NextGeneration;
use super::layout::{self, WriterLock};
use super::schema::{existing_descriptors, FORMAT_VERSION, OLDEST_SUPPORTED_VERSION};
use super::{open_options, read_meta, read_version, write_meta};
use crate::backend::RocksResult;
use crate::store::error::{MigrateError, OpenError, ReadError};
use rocksdb::{Cache, DB};
use std::path::Path;

/// One migration step from `from` to `from + 1`.
pub struct Migration {
    pub from: u32,
    pub description: &'static str,
    pub run: fn(&DB) -> Result<(), MigrateError>,
}

/// Every step, in order. Append a step (and a `migrations/vN_to_vN+1.md`) with each format change.
pub const MIGRATIONS: &[Migration] = &[
    Migration { from: 1, description: "add folded names to the name index; add the token index column families, empty", run: v1_to_v2 },
    Migration {
        from: 2,
        description: "add the dictionary epoch to meta; remove format-2 token indexes (they do not say which names they were built from: the tokenizers need indexing again)",
        run: v2_to_v3,
    },
    Migration {
        from: 3,
        description: "add the column families of live updates (the tokenizers of token indexes, retired entities, provenance); every stored fact is recorded as asserted before format 4 (source 0); token indexes keep working, and follow loads and updates once indexed again",
        run: v3_to_v4,
    },
];

/// `migrations/v3_to_v4.md`. The new column families are created by opening the new
/// generation with this build's schema; no key or value of format 3 changes. Provenance:
/// which load asserted a fact was not recorded before, so every stored fact is recorded as
/// asserted by load 0 ("before format 4"): its outgoing lists, copied.
fn v3_to_v4(db: &DB) -> Result<(), MigrateError> {
    use super::codec;
    use super::schema::{CF_ADJACENCY, CF_FACT_SOURCES, CF_SOURCE_FACTS};
    use crate::ids::Direction;
    let cf = |n: &str| db.cf_handle(n).expect("column family exists");
    let mut batch = rocksdb::WriteBatch::default();
    let mut it = db.raw_iterator_cf(cf(CF_ADJACENCY));
    it.seek([Direction::Out as u8]);
    while let Some((k, v)) = it.item() {
        let Some((Direction::Out, s, r)) = codec::decode_adj_key(k) else { break };
        batch.put_cf(cf(CF_FACT_SOURCES), codec::fact_source_key(s, r, 0), v);
        batch.put_cf(cf(CF_SOURCE_FACTS), codec::source_fact_key(0, s, r), []);
        if batch.len() >= 20_000 {
            db.write(std::mem::take(&mut batch)).rocks()?;
        }
        it.next();
    }
    it.status().rocks()?;
    db.write(batch).rocks()?;
    Ok(())
}

/// `migrations/v1_to_v2.md`. The new column families are created by opening the new
/// generation with this build's schema; the folded names are added here.
fn v1_to_v2(db: &DB) -> Result<(), MigrateError> {
    use super::codec::{self, NameTarget};
    use super::schema::{CF_ENTITIES, CF_NAMES, CF_RELATIONS};
    use crate::ids::{EntityId, RelationId};
    let names = db.cf_handle(CF_NAMES).expect("column family exists");
    let mut added = 0u64;
    for (cf, entity) in [(CF_ENTITIES, true), (CF_RELATIONS, false)] {
        let mut batch = rocksdb::WriteBatch::default();
        let mut it = db.raw_iterator_cf(db.cf_handle(cf).expect("column family exists"));
        it.seek_to_first();
        while let Some((k, v)) = it.item() {
            let id = codec::be_u32(k).ok_or_else(|| ReadError::corrupt(cf, k, "id is not 4 bytes"))?;
            let rec = codec::decode_term(v).ok_or_else(|| ReadError::corrupt(cf, k, "undecodable record"))?;
            let (target, aliases) = if entity {
                (NameTarget::Entity(EntityId(id)), super::read_aliases(db, EntityId(id))?)
            } else {
                (NameTarget::Relation(RelationId(id)), Vec::new())
            };
            for (key, flag) in codec::name_entries(&rec.name, &aliases) {
                let name_key = codec::name_key(&key, target);
                if db.get_pinned_cf(names, &name_key).rocks()?.is_none() {
                    batch.put_cf(names, name_key, [flag]);
                    added += 1;
                }
            }
            if batch.len() >= 10_000 {
                db.write(std::mem::take(&mut batch)).rocks()?;
            }
            it.next();
        }
        it.status().rocks()?;
        db.write(batch).rocks()?;
    }
    let mut meta = super::read_meta(db)?;
    meta.names += added;
    write_meta(db, &meta)?;
    Ok(())
}

/// `migrations/v2_to_v3.md`. A format-2 token index cannot tell whether a later load renamed
/// the entities it encodes (defect: such an index was accepted), so it is removed rather than
/// trusted; the dictionary epoch starts at 0.
fn v2_to_v3(db: &DB) -> Result<(), MigrateError> {
    use super::schema::{CF_TERM_TOKENS, CF_TOKENIZERS, CF_TOKEN_TRIE};
    let cf = |n: &str| db.cf_handle(n).expect("column family exists");
    let mut fps = Vec::new();
    let mut it = db.raw_iterator_cf(cf(CF_TOKENIZERS));
    it.seek_to_first();
    while let Some(k) = it.key() {
        let fp: [u8; 8] = k.try_into().map_err(|_| ReadError::corrupt(CF_TOKENIZERS, k, "key is not 8 bytes"))?;
        fps.push(u64::from_be_bytes(fp));
        it.next();
    }
    it.status().rocks()?;
    drop(it);
    let mut batch = rocksdb::WriteBatch::default();
    for fp in fps {
        let (from, to) = super::tokens::fingerprint_range(fp);
        for name in [CF_TERM_TOKENS, CF_TOKEN_TRIE] {
            batch.delete_range_cf(cf(name), &from[..], &to[..]);
        }
        batch.delete_cf(cf(CF_TOKENIZERS), fp.to_be_bytes());
    }
    db.write(batch).rocks()?;
    let mut meta = read_meta(db)?;
    meta.dictionary_epoch = 0;
    write_meta(db, &meta)?;
    Ok(())
}

/// What a migration did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MigrationReport {
    /// The store's format version before.
    pub from_version: u32,
    /// Its format version after (the same when nothing was to do).
    pub to_version: u32,
    /// "step i of n: description" for every step applied.
    pub steps: Vec<String>,
}

/// Migrates the store in `dir` to the current format (a no-op report when already current).
pub fn migrate(dir: &Path) -> Result<MigrationReport, MigrateError> {
    let lock = layout::lock_existing_writer(dir)?;
    migrate_locked(dir, &lock)
}

pub(crate) fn migrate_locked(dir: &Path, _lock: &WriterLock) -> Result<MigrationReport, MigrateError> {
    let (number, gen) = layout::current_generation(dir)?.ok_or_else(|| OpenError::NotAStore { path: dir.into() })?;
    // Writer start: debris of crashed writers, generations no reader holds any more.
    layout::remove_stale(dir, Some(&gen))?;
    let cache = Cache::new_lru_cache(8 << 20);
    let from = {
        let db = DB::open_cf_descriptors_read_only(&open_options(), &gen, existing_descriptors(&gen, &cache).rocks()?, false).rocks()?;
        read_version(&db)?
    };
    if from > FORMAT_VERSION {
        return Err(OpenError::TooNew { path: dir.into(), found: from, supported: FORMAT_VERSION }.into());
    }
    if from < OLDEST_SUPPORTED_VERSION {
        return Err(MigrateError::TooOld { path: dir.into(), found: from, oldest: OLDEST_SUPPORTED_VERSION });
    }
    let mut report = MigrationReport { from_version: from, to_version: from, steps: Vec::new() };
    if from == FORMAT_VERSION {
        return Ok(report);
    }
    let steps: Vec<&Migration> = MIGRATIONS.iter().filter(|m| m.from >= from).collect();
    let next = NextGeneration::begin(dir, Some(&gen), number + 1, &cache)?;
    let mut version = from;
    for (i, step) in steps.iter().enumerate() {
        if step.from != version {
            return Err(MigrateError::NoStep { path: dir.into(), from: version });
        }
        (step.run)(&next.db)?;
        version += 1;
        let mut meta = read_meta(&next.db)?;
        meta.format_version = version;
        meta.updated_by = crate::store::build_name();
        write_meta(&next.db, &meta)?;
        report.steps.push(format!("step {} of {}: {}", i + 1, steps.len(), step.description));
    }
    next.commit()?;
    report.to_version = version;
    Ok(report)
}
