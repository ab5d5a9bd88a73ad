//! The writes of one live update, over the generation being written: reads see earlier
//! writes, and nothing reaches the store until the update writes them as one batch.
//!
//! Id lists (`adjacency`, `fact_sources`) are held decoded, as sets, from their first touch to
//! the batch: a hub's list of millions of ids is decoded and encoded once an update, however
//! many of the update's facts touch it, so an update costs its change plus one pass over each
//! list it touches (re-encoding a list on every fact made an update touching hubs quadratic).
//!
//! The generation being written is private to the update until it commits, so the overlay
//! may write what it holds to it before the end (`flush`, once `pending_bytes` passes the
//! caller's bound): an update of millions of facts holds a bounded overlay, not all of them
//! (the bound is on an estimate; measured RSS runs several times above it).
//! The largest lists (hubs, and lists an update keeps adding to) stay held across flushes, up
//! to half the bound, so each is still decoded and encoded about once an update.

use super::error::IngestError;
use crate::store::error::ReadError;
use crate::store::idlist;
use roaring::RoaringBitmap;
use rocksdb::{WriteBatch, WriteOptions, DB};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Keys and values read by a prefix scan.
pub(super) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// An id list held decoded by the update.
struct HeldList {
    ids: RoaringBitmap,
    /// Whether the update changed it (only changed lists are written).
    changed: bool,
}

pub(super) struct Overlay<'a> {
    db: &'a DB,
    /// Written values; `None` deletes.
    writes: HashMap<&'static str, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Id lists held decoded; they shadow `writes` for their keys (an empty one reads as absent).
    lists: HashMap<&'static str, BTreeMap<Vec<u8>, HeldList>>,
    /// About how many bytes of memory `writes` and `lists` hold (an estimate; lists kept
    /// across flushes are not counted).
    pending: usize,
    /// Whether earlier writes were flushed to the database.
    flushed: bool,
}

/// Bytes counted for a map entry beside its key and value (the map's node, the vectors'
/// headers and the allocator's rounding).
const ENTRY_BYTES: usize = 96;

/// Lists smaller than this are never kept across a flush (reading one back is cheap).
const MIN_KEPT_LIST_BYTES: usize = 4096;

/// Bytes counted for each held list beside its ids (the set's container vector and the
/// allocator's headers).
const LIST_BYTES: usize = 256;

/// Bytes counted for each change to a held list (an id in an array container, or a new
/// container's share).
const CHANGE_BYTES: usize = 16;

fn read_error(e: rocksdb::Error) -> ReadError {
    ReadError::Rocks(e.into())
}

impl<'a> Overlay<'a> {
    pub(super) fn new(db: &'a DB) -> Overlay<'a> {
        Overlay { db, writes: HashMap::new(), lists: HashMap::new(), pending: 0, flushed: false }
    }

    fn handle(&self, cf: &'static str) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(cf).expect("column family exists")
    }

    pub(super) fn get(&self, cf: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        if let Some(held) = self.lists.get(cf).and_then(|l| l.get(key)) {
            return Ok(encode(&held.ids));
        }
        if let Some(v) = self.writes.get(cf).and_then(|w| w.get(key)) {
            return Ok(v.clone());
        }
        Ok(self.db.get_pinned_cf(self.handle(cf), key).map_err(read_error)?.map(|v| v.to_vec()))
    }

    pub(super) fn put(&mut self, cf: &'static str, key: Vec<u8>, value: Vec<u8>) {
        self.forget_list(cf, &key);
        self.pending += key.len() + value.len() + ENTRY_BYTES;
        self.writes.entry(cf).or_default().insert(key, Some(value));
    }

    pub(super) fn delete(&mut self, cf: &'static str, key: Vec<u8>) {
        self.forget_list(cf, &key);
        self.pending += key.len() + ENTRY_BYTES;
        self.writes.entry(cf).or_default().insert(key, None);
    }

    fn forget_list(&mut self, cf: &'static str, key: &[u8]) {
        if let Some(lists) = self.lists.get_mut(cf) {
            lists.remove(key);
        }
    }

    /// The id list under `key` as it now reads (empty when absent), read and decoded on its
    /// first touch.
    pub(super) fn ids(&mut self, cf: &'static str, key: &[u8]) -> Result<&RoaringBitmap, IngestError> {
        Ok(&self.held(cf, key)?.ids)
    }

    /// The id list under `key`, to change: it is written with the update's batch (deleted when
    /// it ends up empty).
    pub(super) fn ids_mut(&mut self, cf: &'static str, key: &[u8]) -> Result<&mut RoaringBitmap, IngestError> {
        self.pending += CHANGE_BYTES;
        let held = self.held(cf, key)?;
        held.changed = true;
        Ok(&mut held.ids)
    }

    fn held(&mut self, cf: &'static str, key: &[u8]) -> Result<&mut HeldList, IngestError> {
        let lists = self.lists.entry(cf).or_default();
        match lists.entry(key.to_vec()) {
            std::collections::btree_map::Entry::Occupied(held) => Ok(held.into_mut()),
            std::collections::btree_map::Entry::Vacant(slot) => {
                let written = self.writes.get(cf).and_then(|w| w.get(key));
                let stored = match written {
                    Some(v) => v.clone(),
                    None => {
                        let handle = self.db.cf_handle(cf).expect("column family exists");
                        self.db.get_pinned_cf(handle, key).map_err(read_error)?.map(|v| v.to_vec())
                    }
                };
                let ids = match stored {
                    None => RoaringBitmap::new(),
                    Some(bytes) => idlist::decode_bitmap(&bytes).ok_or_else(|| IngestError::from(ReadError::corrupt(cf, key, "malformed id list")))?,
                };
                // A value written before the list was held stays pending until the batch.
                let changed = written.is_some();
                self.pending += ids.serialized_size() + key.len() + LIST_BYTES;
                Ok(slot.insert(HeldList { ids, changed }))
            }
        }
    }

    /// Every key under `prefix` that now has a value, stored or written, in key order.
    pub(super) fn scan_keys(&self, cf: &'static str, prefix: &[u8]) -> Result<Vec<Vec<u8>>, ReadError> {
        Ok(self.scan_with(cf, prefix, false)?.into_iter().map(|(k, _)| k).collect())
    }

    /// Every (key, value) under `prefix`, stored or written, as it now reads.
    pub(super) fn scan(&self, cf: &'static str, prefix: &[u8]) -> Result<Entries, ReadError> {
        self.scan_with(cf, prefix, true)
    }

    fn scan_with(&self, cf: &'static str, prefix: &[u8], values: bool) -> Result<Entries, ReadError> {
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut it = self.db.raw_iterator_cf(self.handle(cf));
        it.seek(prefix);
        while let Some((k, v)) = it.item() {
            if !k.starts_with(prefix) {
                break;
            }
            out.insert(k.to_vec(), if values { v.to_vec() } else { Vec::new() });
            it.next();
        }
        it.status().map_err(read_error)?;
        if let Some(w) = self.writes.get(cf) {
            for (k, v) in w.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(prefix)) {
                match v {
                    Some(v) => out.insert(k.clone(), if values { v.clone() } else { Vec::new() }),
                    None => out.remove(k),
                };
            }
        }
        if let Some(lists) = self.lists.get(cf) {
            for (k, held) in lists.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(prefix)) {
                match (held.ids.is_empty(), values) {
                    (true, _) => out.remove(k),
                    (false, true) => out.insert(k.clone(), encode(&held.ids).unwrap_or_default()),
                    (false, false) => out.insert(k.clone(), Vec::new()),
                };
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Whether the update writes anything.
    pub(super) fn is_empty(&self) -> bool {
        !self.flushed && self.writes.values().all(BTreeMap::is_empty) && self.lists.values().all(|l| l.values().all(|h| !h.changed))
    }

    /// About how many bytes of memory the overlay holds.
    pub(super) fn pending_bytes(&self) -> usize {
        self.pending
    }

    /// Writes what the overlay holds to the database and lets it go (reads see it there),
    /// except its largest lists, up to `keep_bytes` of them serialized: they stay held,
    /// unwritten, for the changes still to come (a list touched all through an update is
    /// then decoded and written once, not at every flush). Writes nothing when nothing
    /// changed.
    pub(super) fn flush(&mut self, keep_bytes: usize) -> Result<(), rocksdb::Error> {
        let batch = self.take(Some(keep_bytes));
        if !batch.is_empty() {
            self.db.write_opt(batch, &without_log())?;
            self.flushed = true;
        }
        Ok(())
    }

    /// Everything the overlay holds, as one batch (the overlay is left empty).
    pub(super) fn take_batch(&mut self) -> WriteBatch {
        self.take(None)
    }

    /// Everything the overlay holds, as one batch (the overlay is left empty), but for the
    /// largest lists up to `keep` serialized bytes in all, which stay held and out of it.
    fn take(&mut self, keep: Option<usize>) -> WriteBatch {
        let writes = std::mem::take(&mut self.writes);
        let lists = std::mem::take(&mut self.lists);
        let mut kept: HashSet<(&'static str, Vec<u8>)> = HashSet::new();
        if let Some(budget) = keep {
            let mut sizes: Vec<(usize, &'static str, &Vec<u8>)> = lists
                .iter()
                .flat_map(|(cf, l)| l.iter().map(move |(k, h)| (h.ids.serialized_size(), *cf, k)))
                .filter(|(size, _, _)| *size >= MIN_KEPT_LIST_BYTES)
                .collect();
            sizes.sort_unstable_by_key(|&(size, _, _)| std::cmp::Reverse(size));
            let mut total = 0;
            for (size, cf, k) in sizes {
                if total + size <= budget {
                    total += size;
                    kept.insert((cf, k.clone()));
                }
            }
        }
        // Kept lists are not counted again: the bound is on what comes after them.
        self.pending = 0;
        let mut batch = WriteBatch::default();
        for (cf, writes) in writes {
            let handle = self.db.cf_handle(cf).expect("column family exists");
            let held = lists.get(cf);
            for (k, v) in writes {
                if held.is_some_and(|l| l.contains_key(&k)) {
                    continue;
                }
                match v {
                    Some(v) => batch.put_cf(handle, k, v),
                    None => batch.delete_cf(handle, k),
                }
            }
        }
        for (cf, lists) in lists {
            let handle = self.db.cf_handle(cf).expect("column family exists");
            for (k, held) in lists {
                if kept.contains(&(cf, k.clone())) {
                    self.lists.entry(cf).or_default().insert(k, held);
                } else if held.changed {
                    match encode(&held.ids) {
                        Some(v) => batch.put_cf(handle, k, v),
                        None => batch.delete_cf(handle, k),
                    }
                }
            }
        }
        batch
    }
}

/// Write options for the generation an update makes: no write-ahead log. A crash before
/// the commit discards the whole generation, and the commit flushes every column family
/// before the generation becomes current, so the log would only double what is written.
pub(super) fn without_log() -> WriteOptions {
    let mut opts = WriteOptions::default();
    opts.disable_wal(true);
    opts
}

/// The stored form of a list, or `None` for an empty one (empty lists are not stored).
fn encode(ids: &RoaringBitmap) -> Option<Vec<u8>> {
    if ids.is_empty() {
        return None;
    }
    let mut buf = Vec::new();
    idlist::encode_bitmap(ids, &mut buf);
    Some(buf)
}
