//! Dictionary writing (steps 1 and 2 of the write phase): entity and relation records
//! and keys, `names` entries, aliases, and labels that name entities of earlier loads.

use super::build::Loading;
use super::dict::Interner;
use super::error::IngestError;
use super::intern::{lookup_exists, lookup_id, lookup_value};
use super::naming::{default_name, wikidata_property_entity};
use super::records::RecordSorter;
use super::sst::{write_sorted, SstOptions, SstSink};
use crate::backend::RocksResult;
use crate::ids::{EntityId, RelationId};
use crate::normalize::normalize_name;
use crate::store::codec::{self, NameTarget, TermKind, TermRecord};
use crate::store::error::ReadError;
use crate::store::schema::*;
use rayon::prelude::*;
use rocksdb::{WriteBatch, DB};
use std::path::PathBuf;
use std::time::Instant;

/// SST files per column family, and the point updates that SSTs cannot express.
pub(super) struct Tables {
    pub(super) ssts: Vec<(&'static str, Vec<PathBuf>)>,
    pub(super) label_updates: Vec<(EntityId, String)>,
    pub(super) new_names: u64,
}

impl Loading<'_> {
    /// Steps 1 and 2: entity and relation dictionaries, names, aliases, late labels.
    pub(super) fn write_dictionaries(&mut self, set: &SstOptions) -> Result<Tables, IngestError> {
        let mut ssts = Vec::new();
        // `names` entries, held up to what the budget leaves, the rest in sorted runs.
        let mut names = RecordSorter::new(set.dir(), "names", 1, self.record_cap);
        let t = Instant::now();
        let (ents, keys) = self.write_dictionary(set, true, &mut names)?;
        ssts.push((CF_ENTITIES, ents));
        ssts.push((CF_ENTITY_KEYS, keys));
        let (rels, keys) = self.write_dictionary(set, false, &mut names)?;
        ssts.push((CF_RELATIONS, rels));
        ssts.push((CF_RELATION_KEYS, keys));
        self.report.new_entities = u64::from(self.entities.new_count());
        self.report.new_relations = u64::from(self.relations.new_count());

        let mut alias_keys: Vec<Vec<u8>> = Vec::new();
        let mut names_overwritten = 0u64;
        for (key, alias) in std::mem::take(&mut self.aliases) {
            let Some(e) = self.resolve_entity(&key)? else {
                self.report.unused_labels += 1;
                continue;
            };
            let k = codec::alias_key(EntityId(e), &alias);
            let is_old = e < self.entities.base();
            if is_old && lookup_exists(self.old, CF_ALIASES, &k)? {
                continue;
            }
            let norm = normalize_name(&alias);
            let folded = crate::normalize::fold_name(&norm).map(|f| (f, codec::NAME_FOLDED));
            for (key, flag) in std::iter::once((norm, codec::NAME_ALIAS)).chain(folded) {
                let name_key = codec::name_key(&key, NameTarget::Entity(EntityId(e)));
                let stored = if is_old { lookup_value(self.old, CF_NAMES, &name_key)? } else { None };
                match stored.and_then(|v| v.first().copied()) {
                    // Stored with the same or a stronger flag: nothing to do.
                    Some(old_flag) if old_flag <= flag => {}
                    Some(_) => {
                        names.push(&name_key, &[flag])?;
                        names_overwritten += 1;
                    }
                    None => names.push(&name_key, &[flag])?,
                }
            }
            alias_keys.push(k);
        }
        alias_keys.sort_unstable();
        alias_keys.dedup();
        self.report.new_aliases = alias_keys.len() as u64;
        ssts.push((CF_ALIASES, write_sorted(set, CF_ALIASES, alias_keys.iter().map(|k| (k.as_slice(), &[][..])))?));
        let mut label_updates = Vec::new();
        for (key, label) in std::mem::take(&mut self.labels) {
            match self.resolve_entity(&key)? {
                Some(e) if e < self.entities.base() => label_updates.push((EntityId(e), label)),
                Some(_) => {}
                None => self.report.unused_labels += 1,
            }
        }
        label_updates.sort();
        let mut sink = SstSink::new(set, CF_NAMES)?;
        // One entry per key: a primary name (flag 0) sorts before an alias (flag 1) of the
        // same key and wins.
        let (written, runs) = names.write_unique(&mut sink)?;
        self.report.dictionary_runs += runs;
        let new_names = written.saturating_sub(names_overwritten);
        ssts.push((CF_NAMES, sink.finish()?));
        tracing::info!(elapsed_ms = t.elapsed().as_millis() as u64, "wrote dictionaries");
        Ok(Tables { ssts, label_updates, new_names })
    }

    fn resolve_entity(&mut self, key: &str) -> Result<Option<u32>, IngestError> {
        if let Some(id) = self.entities.get(key.as_bytes()) {
            return Ok(Some(id));
        }
        Ok(lookup_id(self.old, CF_ENTITY_KEYS, key.as_bytes())?)
    }

    /// Writes the new terms of one dictionary, returns (records SSTs, key SSTs).
    fn write_dictionary(&mut self, set: &SstOptions, entities: bool, names: &mut RecordSorter) -> Result<(Vec<PathBuf>, Vec<PathBuf>), IngestError> {
        let (dict, cf, keys_cf) = if entities { (&self.entities, CF_ENTITIES, CF_ENTITY_KEYS) } else { (&self.relations, CF_RELATIONS, CF_RELATION_KEYS) };
        // Keys first, so their sort buffer is freed before the names are collected. The
        // in-memory sort takes 20 bytes a key; past what the budget leaves, sorted runs.
        let mut key_sink = SstSink::new(set, keys_cf)?;
        if (dict.new_count() as usize).saturating_mul(KEY_SORT_BYTES) <= self.record_cap {
            for i in indexes_by_key(dict) {
                key_sink.put(dict.key(i), &(dict.base() + i).to_be_bytes())?;
            }
        } else {
            let mut keys = RecordSorter::new(set.dir(), if entities { "entity-keys" } else { "relation-keys" }, 4, self.record_cap);
            for i in 0..dict.new_count() {
                keys.push(dict.key(i), &(dict.base() + i).to_be_bytes())?;
            }
            self.report.dictionary_runs += keys.write_unique(&mut key_sink)?.1;
        }
        let key_files = key_sink.finish()?;
        let mut records = SstSink::new(set, cf)?;
        let mut buf = Vec::new();
        let no_labels = self.labels.is_empty();
        for term in dict.new_terms() {
            let label = if no_labels {
                None
            } else if entities {
                self.labels.get(term.key)
            } else {
                self.labels.get(term.key).or_else(|| wikidata_property_entity(term.key).and_then(|k| self.labels.get(&k)))
            };
            let name = match label {
                Some(l) => l.clone(),
                None => default_name(term.key, term.kind, term.name),
            };
            let rec = TermRecord { kind: term.kind, key: term.key.to_owned(), name };
            codec::encode_term(&rec, &mut buf);
            records.put(&codec::id_key(term.id), &buf)?;
            let target = if entities { NameTarget::Entity(EntityId(term.id)) } else { NameTarget::Relation(RelationId(term.id)) };
            for (key, flag) in codec::name_entries(&rec.name, &[]) {
                names.push(&codec::name_key(&key, target), &[flag])?;
            }
        }
        if !no_labels {
            // Labels used by new terms are done; the rest may name stored entities.
            for term in dict.new_terms() {
                self.labels.remove(term.key);
                if !entities {
                    if let Some(k) = wikidata_property_entity(term.key) {
                        self.labels.remove(&k);
                    }
                }
            }
        }
        Ok((records.finish()?, key_files))
    }

    /// Returns how many `names` entries the updates add (negative: remove).
    pub(super) fn apply_label_updates(&mut self, db: &DB, updates: Vec<(EntityId, String)>) -> Result<(i64, Vec<u32>), IngestError> {
        // A label for an entity of an earlier load names it only when it has no label yet
        // (its name is still the default derived from its key): first label wins, as within
        // one load.
        let mut batch = WriteBatch::default();
        let ents = db.cf_handle(CF_ENTITIES).expect("cf");
        let names = db.cf_handle(CF_NAMES).expect("cf");
        let mut buf = Vec::new();
        let mut delta = 0i64;
        let mut renamed = Vec::new();
        for (e, label) in updates {
            let key = codec::id_key(e.0);
            let Some(v) = db.get_pinned_cf(ents, key).rocks()? else { continue };
            let rec = codec::decode_term(&v).ok_or_else(|| ReadError::corrupt(CF_ENTITIES, &key, "undecodable record"))?;
            if rec.name != default_name(&rec.key, rec.kind, None) || rec.kind == TermKind::Literal {
                continue;
            }
            let new = TermRecord { name: label, ..rec.clone() };
            codec::encode_term(&new, &mut buf);
            batch.put_cf(ents, key, &buf);
            let aliases = crate::store::read_aliases(db, e)?;
            let before = codec::name_entries(&rec.name, &aliases);
            let after = codec::name_entries(&new.name, &aliases);
            for k in before.keys().filter(|k| !after.contains_key(*k)) {
                batch.delete_cf(names, codec::name_key(k, NameTarget::Entity(e)));
            }
            for (k, flag) in &after {
                batch.put_cf(names, codec::name_key(k, NameTarget::Entity(e)), [*flag]);
            }
            delta += after.len() as i64 - before.len() as i64;
            renamed.push(e.0);
        }
        db.write(batch).rocks()?;
        Ok((delta, renamed))
    }
}

/// Bytes a key takes in [`indexes_by_key`]'s sort (the packed prefix and the index).
const KEY_SORT_BYTES: usize = 20;

/// Indexes of the new terms of `dict` in key order. The keys lie scattered in the arena, so
/// the sort runs over 12-byte key prefixes packed with the index in one array (no pointer
/// chasing), then orders runs of equal prefixes by whole keys. Zero padding keeps prefix
/// order consistent with key order: a tie is only possible between keys that need the
/// whole-key comparison anyway.
fn indexes_by_key(dict: &Interner) -> Vec<u32> {
    let mut packed: Vec<u128> = (0..dict.new_count())
        .into_par_iter()
        .map(|i| {
            let key = dict.key(i);
            let mut bytes = [0u8; 16];
            let n = key.len().min(12);
            bytes[..n].copy_from_slice(&key[..n]);
            u128::from_be_bytes(bytes) | u128::from(i)
        })
        .collect();
    packed.par_sort_unstable();
    let mut order: Vec<u32> = packed.iter().map(|&v| v as u32).collect();
    let mut start = 0;
    for end in 1..=packed.len() {
        if end == packed.len() || packed[end] >> 32 != packed[start] >> 32 {
            if end - start > 1 {
                order[start..end].sort_unstable_by(|&a, &b| dict.key(a).cmp(dict.key(b)));
            }
            start = end;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn indexes_by_key_sorts_like_the_keys(keys in proptest::collection::btree_set(proptest::collection::vec(proptest::prelude::prop_oneof![proptest::prelude::Just(0u8), proptest::prelude::Just(b'a'), proptest::prelude::Just(b'b')], 0..16), 0..300)) {
            let mut dict = Interner::new(0);
            let mut none = |_: &[u8]| Ok(None);
            // Insert in a scrambled order so index order is not key order.
            let mut shuffled: Vec<Vec<u8>> = keys.iter().cloned().collect();
            shuffled.reverse();
            let third = shuffled.len() / 3;
            shuffled.rotate_left(third);
            for k in &shuffled {
                dict.intern(k, TermKind::Name, None, &mut none).unwrap();
            }
            let sorted: Vec<Vec<u8>> = indexes_by_key(&dict).into_iter().map(|i| dict.key(i).to_vec()).collect();
            let expected: Vec<Vec<u8>> = keys.into_iter().collect();
            proptest::prop_assert_eq!(sorted, expected);
        }
    }
}
