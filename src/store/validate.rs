//! `Store::validate`: every index must agree with every other.
//!
//! Checks, streaming (memory does not grow with the store):
//! - dictionaries: ids `0..n` present without gaps, records decode, counts match `meta`, and
//!   `entity_keys`/`relation_keys` map every key back to its id;
//! - names: every name and alias of every entity and relation has its `names` entry, every
//!   entry points at an existing id whose name or alias normalizes to it, count matches `meta`;
//! - adjacency: keys and lists decode, ids are in range, both directions hold the same set of
//!   facts (an order-independent 128-bit set hash of all (s, r, o) from each side, then, on a
//!   mismatch, a point-lookup pass that names the facts missing from the other side), `facts`
//!   matches `meta`, and every `degrees` entry equals the length of the entity's lists;
//! - retired entities (format 4, deleted by updates): each has its record and nothing else
//!   (no key, name, alias, fact, degree or token list), and `meta.retired` counts them.

use super::codec::{self, NameTarget};
use super::idlist;
use super::schema::*;
use super::Store;
use crate::ids::{Direction, EntityId, RelationId};
use crate::store::error::ReadError;

const MAX_PROBLEMS: usize = 50;

/// What [`Store::validate`](crate::Store::validate) counted and every disagreement it found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ValidationReport {
    /// Entity records read.
    pub entities: u64,
    /// Relation records read.
    pub relations: u64,
    /// Facts in the outgoing adjacency.
    pub facts_out: u64,
    /// Facts in the incoming adjacency.
    pub facts_in: u64,
    /// Entries of the `names` index.
    pub names: u64,
    /// Alias records.
    pub aliases: u64,
    /// Entities deleted by updates (their ids stay taken).
    pub retired: u64,
    /// Human-readable descriptions of every disagreement found (at most 50 kept).
    pub problems: Vec<String>,
    /// Problems found beyond the ones kept.
    pub more_problems: u64,
}

impl ValidationReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, what: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(what);
        } else {
            self.more_problems += 1;
        }
    }
}

pub(super) fn validate(store: &Store) -> Result<ValidationReport, ReadError> {
    let mut report = ValidationReport::default();
    let meta = store.meta().clone();
    let retired = store.retired_entities()?;
    report.retired = retired.len();
    if report.retired != meta.retired {
        report.problem(format!("meta says {} retired entities, `retired` holds {}", meta.retired, report.retired));
    }
    if let Some(max) = retired.max() {
        if u64::from(max) >= meta.entities {
            report.problem(format!("retired: entity {max} is past the dictionary"));
        }
    }
    report.entities = check_dictionary(store, CF_ENTITIES, CF_ENTITY_KEYS, meta.entities, &retired, &mut report)?;
    report.relations = check_dictionary(store, CF_RELATIONS, CF_RELATION_KEYS, meta.relations, &roaring::RoaringBitmap::new(), &mut report)?;
    check_names(store, &retired, &mut report)?;
    if report.names != meta.names {
        report.problem(format!("meta says {} name entries, `names` holds {}", meta.names, report.names));
    }
    if report.aliases != meta.aliases {
        report.problem(format!("meta says {} aliases, `aliases` holds {}", meta.aliases, report.aliases));
    }
    check_adjacency(store, &retired, &mut report)?;
    check_provenance(store, &mut report)?;
    check_token_index(store, &retired, &mut report)?;
    if report.facts_out != meta.facts {
        report.problem(format!("meta says {} facts, the outgoing adjacency holds {}", meta.facts, report.facts_out));
    }
    Ok(report)
}

fn check_dictionary(
    store: &Store,
    cf: &'static str,
    keys_cf: &'static str,
    expected: u64,
    retired: &roaring::RoaringBitmap,
    report: &mut ValidationReport,
) -> Result<u64, ReadError> {
    let db = store.db();
    let mut it = db.raw_iterator_cf(store.cf(cf));
    it.seek_to_first();
    let mut next_id: u64 = 0;
    while let Some((k, v)) = it.item() {
        let Some(id) = codec::be_u32(k) else {
            report.problem(format!("{cf}: key {} is not a 4-byte id", crate::store::error::hex(k)));
            it.next();
            continue;
        };
        if u64::from(id) != next_id {
            report.problem(format!("{cf}: id {id} follows id {} (ids must be dense)", next_id as i64 - 1));
            next_id = u64::from(id);
        }
        next_id += 1;
        match codec::decode_term(v) {
            None => report.problem(format!("{cf}: record of id {id} does not decode")),
            // A retired entity's key is free (a later add of it makes a new entity).
            Some(rec) if retired.contains(id) => {
                if let Some(b) = db.get_pinned_cf(store.cf(keys_cf), rec.key.as_bytes()).map_err(|e| store.read_error(e))? {
                    if codec::be_u32(&b) == Some(id) {
                        report.problem(format!("{keys_cf}: {:?} still maps to retired id {id}", rec.key));
                    }
                }
            }
            Some(rec) => match db.get_pinned_cf(store.cf(keys_cf), rec.key.as_bytes()).map_err(|e| store.read_error(e))? {
                None => report.problem(format!("{keys_cf}: no entry for {:?} (id {id})", rec.key)),
                Some(b) if codec::be_u32(&b) != Some(id) => {
                    report.problem(format!("{keys_cf}: {:?} maps to {}, not to id {id}", rec.key, crate::store::error::hex(&b)))
                }
                Some(_) => {}
            },
        }
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    if next_id != expected {
        report.problem(format!("meta says {expected} entries in {cf}, found {next_id}"));
    }
    let keys = count_keys(store, keys_cf)?;
    if keys + retired.len() != next_id {
        report.problem(format!("{keys_cf} holds {keys} keys, {cf} holds {next_id} records ({} retired)", retired.len()));
    }
    Ok(next_id)
}

fn count_keys(store: &Store, cf: &'static str) -> Result<u64, ReadError> {
    let mut it = store.db().raw_iterator_cf(store.cf(cf));
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    Ok(n)
}

/// A name index entry (normalized or folded form) -> its flags, as `codec::name_entries` gives.
type NameEntries = std::collections::BTreeMap<String, u8>;

fn check_names(store: &Store, retired: &roaring::RoaringBitmap, report: &mut ValidationReport) -> Result<(), ReadError> {
    let db = store.db();
    // The entries a target should have, by `codec::name_entries` (none for a retired entity).
    let expected = |target: NameTarget| -> Result<Option<(String, NameEntries)>, ReadError> {
        Ok(match target {
            NameTarget::Entity(e) if retired.contains(e.0) => store.entity(e)?.map(|rec| (rec.name, NameEntries::new())),
            NameTarget::Entity(e) => match store.entity(e)? {
                Some(rec) => {
                    let entries = codec::name_entries(&rec.name, &store.aliases(e)?);
                    Some((rec.name, entries))
                }
                None => None,
            },
            NameTarget::Relation(r) => store.relation(r)?.map(|rec| {
                let entries = codec::name_entries(&rec.name, &[]);
                (rec.name, entries)
            }),
        })
    };
    // Every entry is one its target should have, with the right flag.
    let mut it = db.raw_iterator_cf(store.cf(CF_NAMES));
    it.seek_to_first();
    while let Some((k, v)) = it.item() {
        report.names += 1;
        match codec::decode_name_key(k) {
            None => report.problem(format!("names: malformed key {}", crate::store::error::hex(k))),
            Some((norm, target)) => match expected(target)? {
                None => report.problem(format!("names: {norm:?} points at missing {target:?}")),
                Some((name, entries)) => match entries.get(norm) {
                    Some(flag) if v == [*flag] => {}
                    Some(flag) => report.problem(format!("names: {norm:?} of {target:?} has flag {v:?}, expected {flag}")),
                    None => report.problem(format!("names: {norm:?} points at {target:?} named {name:?}")),
                },
            },
        }
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    // Every entry a target should have exists.
    for (cf, entity) in [(CF_ENTITIES, true), (CF_RELATIONS, false)] {
        let mut it = db.raw_iterator_cf(store.cf(cf));
        it.seek_to_first();
        while let Some(k) = it.key() {
            if let Some(id) = codec::be_u32(k) {
                let target = if entity { NameTarget::Entity(EntityId(id)) } else { NameTarget::Relation(RelationId(id)) };
                if let Some((name, entries)) = expected(target)? {
                    for norm in entries.keys() {
                        if db.get_pinned_cf(store.cf(CF_NAMES), codec::name_key(norm, target)).map_err(|e| store.read_error(e))?.is_none() {
                            report.problem(format!("names: no entry {norm:?} for {name:?} ({target:?})"));
                        }
                    }
                }
            }
            it.next();
        }
        it.status().map_err(|e| store.read_error(e))?;
    }
    // Every alias belongs to an entity.
    let mut it = db.raw_iterator_cf(store.cf(CF_ALIASES));
    it.seek_to_first();
    while let Some(k) = it.key() {
        report.aliases += 1;
        match codec::decode_alias_key(k) {
            None => report.problem(format!("aliases: malformed key {}", crate::store::error::hex(k))),
            Some((e, alias)) if u64::from(e.0) >= store.meta().entities => report.problem(format!("aliases: {alias:?} belongs to {e}, past the dictionary")),
            Some((e, alias)) if retired.contains(e.0) => report.problem(format!("aliases: {alias:?} belongs to retired {e}")),
            Some(_) => {}
        }
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    Ok(())
}

/// Provenance (format 4): for every (subject, relation), the union of the loads' lists in
/// `fact_sources` is exactly the outgoing adjacency list (every stored fact asserted by at
/// least one load, no retracted fact still asserted), each list non-empty and naming a load
/// that exists (0: before format 4), and `source_facts` holds exactly one key per list.
fn check_provenance(store: &Store, report: &mut ValidationReport) -> Result<(), ReadError> {
    let db = store.db();
    let loads = store.meta().loads.len() as u32;
    let mut it = db.raw_iterator_cf(store.cf(CF_FACT_SOURCES));
    it.seek_to_first();
    let mut group: Option<(u32, u32)> = None;
    let mut union: Vec<u32> = Vec::new();
    let mut groups = 0u64;
    let mut lists = 0u64;
    let mut finish = |group: Option<(u32, u32)>, union: &mut Vec<u32>, report: &mut ValidationReport| -> Result<(), ReadError> {
        let Some((s, r)) = group else { return Ok(()) };
        groups += 1;
        union.sort_unstable();
        union.dedup();
        let key = codec::adj_key(Direction::Out, EntityId(s), RelationId(r));
        let stored = match db.get_pinned_cf(store.cf(CF_ADJACENCY), key).map_err(|e| store.read_error(e))? {
            Some(v) => idlist::decode_ids(&v).unwrap_or_default(),
            None => Vec::new(),
        };
        if stored != *union {
            report.problem(format!("fact_sources: the loads of entity {s} relation {r} assert {} objects, the adjacency holds {}", union.len(), stored.len()));
        }
        union.clear();
        Ok(())
    };
    while let Some((k, v)) = it.item() {
        lists += 1;
        match (codec::decode_triple_key(k), idlist::decode_ids(v)) {
            (Some((s, r, load)), Some(ids)) => {
                if group != Some((s, r)) {
                    finish(group, &mut union, report)?;
                    group = Some((s, r));
                }
                if ids.is_empty() || load > loads {
                    report.problem(format!("fact_sources: entry {} is empty or names load {load} of {loads}", crate::store::error::hex(k)));
                }
                if db
                    .get_pinned_cf(store.cf(CF_SOURCE_FACTS), codec::source_fact_key(load, EntityId(s), RelationId(r)))
                    .map_err(|e| store.read_error(e))?
                    .is_none()
                {
                    report.problem(format!("source_facts: no entry for load {load}, entity {s}, relation {r}"));
                }
                union.extend(ids);
            }
            _ => report.problem(format!("fact_sources: malformed entry {}", crate::store::error::hex(k))),
        }
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    finish(group, &mut union, report)?;
    // Every outgoing list is asserted by some load: as many groups as outgoing keys.
    let mut out_keys = 0u64;
    let mut it = db.raw_iterator_cf(store.cf(CF_ADJACENCY));
    it.seek([Direction::Out as u8]);
    while let Some(k) = it.key() {
        if k.first() != Some(&(Direction::Out as u8)) {
            break;
        }
        out_keys += 1;
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    if out_keys != groups {
        report.problem(format!("fact_sources: provenance for {groups} (subject, relation) pairs, the adjacency has {out_keys}"));
    }
    let facts = count_keys(store, CF_SOURCE_FACTS)?;
    if facts != lists {
        report.problem(format!("source_facts holds {facts} entries, fact_sources {lists}"));
    }
    Ok(())
}

/// Every token list has its trie key and the other way round, ids in range, per tokenizer.
fn check_token_index(store: &Store, retired: &roaring::RoaringBitmap, report: &mut ValidationReport) -> Result<(), ReadError> {
    use super::tokens::{decode_tokens, trie_key, END};
    use crate::linearize::Side;
    let db = store.db();
    for info in store.tokenizers()? {
        let Ok(fp) = u64::from_str_radix(&info.fingerprint, 16) else {
            report.problem(format!("tokenizers: fingerprint {:?} is not 16 hex digits", info.fingerprint));
            continue;
        };
        if info.linearization_fingerprint != info.linearization.fingerprint_hex() {
            report.problem(format!(
                "tokenizers: record {} says linearization fingerprint {}, its linearization has {}",
                info.fingerprint,
                info.linearization_fingerprint,
                info.linearization.fingerprint_hex()
            ));
        }
        // An index current with the store has no list for a retired entity; a stale one
        // (built before entities were retired, and not maintained since) may.
        let current = info.entities == store.meta().entities && info.dictionary_epoch == store.meta().dictionary_epoch;
        let mut lists = 0u64;
        let mut it = db.raw_iterator_cf(store.cf(CF_TERM_TOKENS));
        it.seek(fp.to_be_bytes());
        while let Some((k, v)) = it.item() {
            if !k.starts_with(&fp.to_be_bytes()) {
                break;
            }
            lists += 1;
            let side = match k.get(8) {
                Some(0) => Side::Entity,
                Some(1) => Side::Relation,
                _ => {
                    report.problem(format!("term_tokens: bad key {}", crate::store::error::hex(k)));
                    it.next();
                    continue;
                }
            };
            let id = k.get(9..13).and_then(codec::be_u32);
            let limit = if side == Side::Entity { info.entities } else { info.relations };
            match (id, decode_tokens(v)) {
                (Some(id), Some(_)) if current && side == Side::Entity && retired.contains(id) => {
                    report.problem(format!("term_tokens: tokenizer {} still has retired entity {id}", info.fingerprint))
                }
                (Some(id), Some(tokens)) if u64::from(id) < limit => {
                    if db.get_pinned_cf(store.cf(CF_TOKEN_TRIE), trie_key(fp, side, &tokens, id)).map_err(|e| store.read_error(e))?.is_none() {
                        report.problem(format!("token_trie: no entry for {side:?} {id} of tokenizer {}", info.fingerprint));
                    }
                }
                _ => report.problem(format!("term_tokens: bad entry under {}", crate::store::error::hex(k))),
            }
            it.next();
        }
        it.status().map_err(|e| store.read_error(e))?;
        let expected = (info.entities + info.relations).saturating_sub(if current { retired.len() } else { 0 });
        if lists != expected {
            report.problem(format!(
                "term_tokens: tokenizer {} has {lists} token lists for {} entities ({} retired) and {} relations",
                info.fingerprint,
                info.entities,
                if current { retired.len() } else { 0 },
                info.relations
            ));
        }
        let mut trie = 0u64;
        let mut it = db.raw_iterator_cf(store.cf(CF_TOKEN_TRIE));
        it.seek(fp.to_be_bytes());
        while let Some(k) = it.key() {
            if !k.starts_with(&fp.to_be_bytes()) {
                break;
            }
            trie += 1;
            if k.len() < 17 || (k.len() - 9) % 4 != 0 || k.get(k.len() - 8..k.len() - 4).and_then(codec::be_u32) != Some(END) {
                report.problem(format!("token_trie: malformed key {}", crate::store::error::hex(k)));
            }
            it.next();
        }
        it.status().map_err(|e| store.read_error(e))?;
        if trie != lists {
            report.problem(format!("token_trie: tokenizer {} has {trie} trie entries for {lists} token lists", info.fingerprint));
        }
    }
    Ok(())
}

/// Mixes one fact into 64 bits (splitmix64 finalizer over the packed ids).
fn fact_hash(s: u32, r: u32, o: u32, seed: u64) -> u64 {
    let mut z = (u64::from(s) << 32 | u64::from(o)) ^ (u64::from(r).wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn check_adjacency(store: &Store, retired: &roaring::RoaringBitmap, report: &mut ValidationReport) -> Result<(), ReadError> {
    let db = store.db();
    let n_entities = store.meta().entities;
    let n_relations = store.meta().relations;
    // Order-independent set hashes (two seeds: 128 bits) of the facts seen from each side.
    let mut sums = [[0u64; 2]; 2];
    let mut degrees = db.raw_iterator_cf(store.cf(CF_DEGREES));
    degrees.seek_to_first();
    let mut it = db.raw_iterator_cf(store.cf(CF_ADJACENCY));
    it.seek_to_first();
    let mut current: Option<(Direction, EntityId)> = None;
    let mut current_degree = 0u64;
    let finish_entity = |cur: Option<(Direction, EntityId)>,
                         deg: u64,
                         report: &mut ValidationReport,
                         degrees: &mut rocksdb::DBRawIteratorWithThreadMode<'_, rocksdb::DB>|
     -> Result<(), ReadError> {
        let Some((dir, e)) = cur else { return Ok(()) };
        let want = codec::degree_key(dir, e);
        // Degree entries without adjacency before this one are stale.
        while let Some(k) = degrees.key() {
            if k >= &want[..] {
                break;
            }
            report.problem(format!("degrees: entry {} has no adjacency", crate::store::error::hex(k)));
            degrees.next();
        }
        match degrees.item() {
            Some((k, v)) if k == want => {
                if codec::be_u32(v).map(u64::from) != Some(deg) {
                    report.problem(format!("degrees: {e} {dir:?} says {}, its lists hold {deg}", crate::store::error::hex(v)));
                }
                degrees.next();
            }
            _ => report.problem(format!("degrees: no entry for {e} {dir:?} (degree {deg})")),
        }
        degrees.status().map_err(|e| store.read_error(e))?;
        Ok(())
    };
    while let Some((k, v)) = it.item() {
        let Some((dir, e, r)) = codec::decode_adj_key(k) else {
            report.problem(format!("adjacency: malformed key {}", crate::store::error::hex(k)));
            it.next();
            continue;
        };
        if current != Some((dir, e)) {
            finish_entity(current, current_degree, report, &mut degrees)?;
            current = Some((dir, e));
            current_degree = 0;
        }
        if u64::from(e.0) >= n_entities || u64::from(r.0) >= n_relations {
            report.problem(format!("adjacency: key {} names an id past the dictionaries", crate::store::error::hex(k)));
        }
        if retired.contains(e.0) {
            report.problem(format!("adjacency: retired {e} has facts"));
        }
        match idlist::decode_ids(v) {
            None => report.problem(format!("adjacency: list under {} does not decode", crate::store::error::hex(k))),
            Some(ids) => {
                if ids.is_empty() {
                    report.problem(format!("adjacency: empty list under {}", crate::store::error::hex(k)));
                }
                for &other in &ids {
                    if u64::from(other) >= n_entities {
                        report.problem(format!("adjacency: {e} {dir:?} {r} lists entity {other}, past the dictionary"));
                    }
                    if retired.contains(other) {
                        report.problem(format!("adjacency: {e} {dir:?} {r} lists retired entity {other}"));
                    }
                    let (s, o) = match dir {
                        Direction::Out => (e.0, other),
                        Direction::In => (other, e.0),
                    };
                    let side = dir as usize;
                    sums[side][0] = sums[side][0].wrapping_add(fact_hash(s, r.0, o, 0x1234_5678));
                    sums[side][1] = sums[side][1].wrapping_add(fact_hash(s, r.0, o, 0x9abc_def0));
                }
                current_degree += ids.len() as u64;
                match dir {
                    Direction::Out => report.facts_out += ids.len() as u64,
                    Direction::In => report.facts_in += ids.len() as u64,
                }
            }
        }
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    finish_entity(current, current_degree, report, &mut degrees)?;
    while let Some(k) = degrees.key() {
        report.problem(format!("degrees: entry {} has no adjacency", crate::store::error::hex(k)));
        degrees.next();
    }
    if report.facts_out != report.facts_in || sums[0] != sums[1] {
        report.problem(format!("adjacency: the two directions disagree ({} facts outgoing, {} incoming)", report.facts_out, report.facts_in));
        locate_direction_mismatch(store, report)?;
    }
    Ok(())
}

/// Slow path after a set-hash mismatch: name the facts that one side lacks.
fn locate_direction_mismatch(store: &Store, report: &mut ValidationReport) -> Result<(), ReadError> {
    let mut it = store.db().raw_iterator_cf(store.cf(CF_ADJACENCY));
    it.seek_to_first();
    while let Some((k, v)) = it.item() {
        if report.problems.len() >= MAX_PROBLEMS {
            break;
        }
        if let (Some((dir, e, r)), Some(ids)) = (codec::decode_adj_key(k), idlist::decode_ids(v)) {
            for other in ids {
                let back = store.neighbors_via(EntityId(other), dir.reverse(), r)?;
                if back.binary_search(&e).is_err() {
                    report.problem(format!("adjacency: {e} {dir:?} {r} lists e{other}, but e{other} {:?} {r} does not list {e}", dir.reverse()));
                }
            }
        }
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    Ok(())
}
