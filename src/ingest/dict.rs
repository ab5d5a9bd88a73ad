//! Dictionary building during a load: exact key -> dense id.
//!
//! New terms are kept in one byte arena in id order (index, kind, varint key length, key,
//! varint name length, name), with the arena offset of each term, and an open-addressing
//! table of arena offsets tagged with 16 hash bits: about 23 bytes per term plus its key, no
//! allocation per term. Once the dictionary outgrows the CPU caches a lookup costs its cache
//! misses, so a lookup touches one table slot and one arena record, and callers that know
//! their next keys prefetch their slots (`prefetch`).
//! Keys of an existing store are looked up in it (bloom-filtered point reads) and cached.

use crate::store::codec::{get_varint, put_varint};
use crate::store::error::ReadError;
use crate::store::TermKind;
use hashbrown::{DefaultHashBuilder, HashMap};
use std::hash::BuildHasher;

/// Finds a key's id in the store being added to.
pub type Lookup<'a> = dyn FnMut(&[u8]) -> Result<Option<u32>, ReadError> + 'a;

pub struct Interner {
    base: u32,
    arena: Vec<u8>,
    /// Arena offset of each new term, in id order.
    offsets: Vec<u64>,
    table: KeyTable,
    hasher: DefaultHashBuilder,
    existing: HashMap<Box<[u8]>, u32>,
}

/// A term added by this load.
pub struct NewTerm<'a> {
    pub id: u32,
    pub key: &'a str,
    pub kind: TermKind,
    /// The display name carried by the input (literal values), if any.
    pub name: Option<&'a str>,
}

impl Interner {
    /// `base`: the first id to hand out (the number of terms already stored).
    pub fn new(base: u32) -> Interner {
        Interner { base, arena: Vec::new(), offsets: Vec::new(), table: KeyTable::default(), hasher: DefaultHashBuilder::default(), existing: HashMap::new() }
    }

    fn key_of(&self, idx: u32) -> &[u8] {
        term_at(&self.arena, self.offsets[idx as usize]).2
    }

    /// The id of `key`, looking in this load, then in the store (`lookup`), then assigning
    /// the next id. Returns `None` when ids are exhausted.
    pub fn intern(&mut self, key: &[u8], kind: TermKind, name: Option<&[u8]>, lookup: &mut Lookup<'_>) -> Result<Option<u32>, ReadError> {
        let hash = self.hash(key);
        self.intern_hashed(key, hash, kind, name, lookup)
    }

    /// The hash `intern_hashed` and `prefetch` take for `key`.
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Starts loading the table slot of a key that will be interned soon.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.table.prefetch(hash);
    }

    /// `intern` with the key's hash computed by the caller (`hash`).
    pub fn intern_hashed(&mut self, key: &[u8], hash: u64, kind: TermKind, name: Option<&[u8]>, lookup: &mut Lookup<'_>) -> Result<Option<u32>, ReadError> {
        let arena = &self.arena;
        if let Some(idx) = self.table.find(hash, |at| {
            let (idx, _, k, _) = term_at(arena, at);
            (k == key).then_some(idx)
        }) {
            return Ok(Some(self.base + idx));
        }
        if let Some(&id) = self.existing.get(key) {
            return Ok(Some(id));
        }
        if let Some(id) = lookup(key)? {
            self.existing.insert(key.into(), id);
            return Ok(Some(id));
        }
        let idx = self.offsets.len() as u32;
        let Some(id) = self.base.checked_add(idx).filter(|&id| id < u32::MAX) else {
            return Ok(None);
        };
        let at = self.arena.len() as u64;
        self.offsets.push(at);
        self.arena.extend_from_slice(&idx.to_le_bytes());
        self.arena.push(kind as u8);
        put_varint(&mut self.arena, key.len() as u64);
        self.arena.extend_from_slice(key);
        let name = name.filter(|n| *n != key).unwrap_or(b"");
        put_varint(&mut self.arena, name.len() as u64);
        self.arena.extend_from_slice(name);
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.table.insert(hash, at, |at| hasher.hash_one(term_at(arena, at).2));
        Ok(Some(id))
    }

    /// The id of `key` if this load or the store's cache knows it (no store lookup).
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let hash = self.hash(key);
        self.table
            .find(hash, |at| {
                let (idx, _, k, _) = term_at(&self.arena, at);
                (k == key).then_some(idx)
            })
            .map(|idx| self.base + idx)
            .or_else(|| self.existing.get(key).copied())
    }

    /// The key of the new term with index `i` (id `base + i`).
    pub fn key(&self, i: u32) -> &[u8] {
        self.key_of(i)
    }

    pub fn base(&self) -> u32 {
        self.base
    }

    pub fn new_count(&self) -> u32 {
        self.offsets.len() as u32
    }

    /// The terms added by this load, in id order.
    pub fn new_terms(&self) -> impl ExactSizeIterator<Item = NewTerm<'_>> + '_ {
        self.offsets.iter().enumerate().map(move |(i, &at)| {
            let (_, kind, key, name) = term_at(&self.arena, at);
            NewTerm {
                id: self.base + i as u32,
                // Keys and names come from validated UTF-8 lines.
                key: std::str::from_utf8(key).expect("interned keys are UTF-8"),
                kind,
                name: (!name.is_empty()).then(|| std::str::from_utf8(name).expect("interned names are UTF-8")),
            }
        })
    }

    /// Resident bytes held, as the memory budget counts them: large vectors grow by
    /// `mremap`, so their spare capacity is address space, not memory, until written; the
    /// hash table's control bytes are written when it grows, its slots when filled.
    ///
    /// A growing table holds its old slots and the new ones (twice as many) at once while it
    /// rehashes, and those are written at once: while the table is close to its next growth
    /// the new slots are counted as well, so that the caller makes room (the sort buffer
    /// spills) before the growth, not after it. Likewise the cache of store keys.
    pub fn heap_bytes(&self) -> usize {
        let existing = self.existing.len() * EXISTING_ENTRY_BYTES;
        let existing_growth =
            if self.existing.len() + GROWTH_WINDOW_MIN >= self.existing.capacity() { 2 * self.existing.capacity().max(1) * EXISTING_ENTRY_BYTES } else { 0 };
        self.arena.len() + self.offsets.len() * 8 + self.table.slots.len() * 8 + self.table.growth_bytes() + existing + existing_growth
    }
}

/// Open addressing with linear probing over arena offsets. A slot is 0 (empty) or the top
/// 16 bits of the key's hash above the arena offset plus one (48 bits), so a probe reads
/// the arena only when the tags match. Kept at most 3/4 full.
#[derive(Default)]
struct KeyTable {
    slots: Vec<u64>,
    len: usize,
}

/// Bytes a cached store key costs (its boxed key, id and table entry), as the budget counts it.
const EXISTING_ENTRY_BYTES: usize = 48;
/// A table this close to its next growth (in entries) counts the growth's new slots already.
const GROWTH_WINDOW_MIN: usize = 4096;

const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

impl KeyTable {
    #[inline]
    fn tag(hash: u64) -> u64 {
        hash >> OFFSET_BITS
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    #[inline]
    fn prefetch(&self, hash: u64) {
        #[cfg(target_arch = "x86_64")]
        if !self.slots.is_empty() {
            let slot: *const u64 = &self.slots[self.home(hash)];
            // SAFETY: prefetching is a hint; the address is inside `slots`.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(slot.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// The first `matches(offset)` that says `Some` among the slots tagged like `hash`.
    #[inline]
    fn find<T>(&self, hash: u64, mut matches: impl FnMut(u64) -> Option<T>) -> Option<T> {
        if self.slots.is_empty() {
            return None;
        }
        let (tag, mask) = (Self::tag(hash), self.slots.len() - 1);
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if slot >> OFFSET_BITS == tag {
                if let Some(found) = matches((slot & OFFSET_MASK) - 1) {
                    return Some(found);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The entries the table takes before it grows.
    fn capacity(&self) -> usize {
        self.slots.len() * 3 / 4
    }

    /// The bytes of the next growth's new slots while the table is within 1/32 of its size
    /// (at least [`GROWTH_WINDOW_MIN`] entries) of growing, else 0.
    fn growth_bytes(&self) -> usize {
        let window = (self.slots.len() / 32).max(GROWTH_WINDOW_MIN);
        if self.len + window >= self.capacity() {
            (self.slots.len() * 2).max(1024) * 8
        } else {
            0
        }
    }

    /// Adds an offset known to be absent; `rehash(offset)` gives the hash of a stored key
    /// when the table grows.
    fn insert(&mut self, hash: u64, offset: u64, rehash: impl Fn(u64) -> u64) {
        assert!(offset < OFFSET_MASK, "dictionary arena over 256 TiB");
        if self.len + 1 > self.capacity() {
            let grown = vec![0; (self.slots.len() * 2).max(1024)];
            let old = std::mem::replace(&mut self.slots, grown);
            for slot in old.into_iter().filter(|&s| s != 0) {
                let at = (slot & OFFSET_MASK) - 1;
                self.place(rehash(at), slot);
            }
        }
        self.place(hash, Self::tag(hash) << OFFSET_BITS | (offset + 1));
        self.len += 1;
    }

    fn place(&mut self, hash: u64, slot: u64) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }
}

/// Decodes the term at `at`: (index, kind, key, name). Only `intern` writes the arena.
#[inline]
fn term_at(arena: &[u8], at: u64) -> (u32, TermKind, &[u8], &[u8]) {
    let at = at as usize;
    let idx = u32::from_le_bytes(arena[at..at + 4].try_into().expect("4 bytes"));
    let kind = TermKind::from_byte(arena[at + 4]).expect("the interner writes valid kinds");
    let (key_len, used) = get_varint(&arena[at + 5..]).expect("the interner writes valid lengths");
    let key_start = at + 5 + used;
    let key_end = key_start + key_len as usize;
    let (name_len, used) = get_varint(&arena[key_end..]).expect("the interner writes valid lengths");
    let name_start = key_end + used;
    (idx, kind, &arena[key_start..key_end], &arena[name_start..name_start + name_len as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigns_dense_ids_and_finds_them_again() {
        let mut d = Interner::new(10);
        let mut none = |_: &[u8]| Ok(None);
        let a = d.intern(b"alpha", TermKind::Name, None, &mut none).unwrap().unwrap();
        let b = d.intern(b"beta", TermKind::Name, None, &mut none).unwrap().unwrap();
        let a2 = d.intern(b"alpha", TermKind::Name, None, &mut none).unwrap().unwrap();
        assert_eq!((a, b, a2), (10, 11, 10));
        assert_eq!(d.get(b"beta"), Some(11));
        assert_eq!(d.get(b"gamma"), None);
        let keys: Vec<(u32, String)> = d.new_terms().map(|t| (t.id, t.key.to_owned())).collect();
        assert_eq!(keys, vec![(10, "alpha".into()), (11, "beta".into())]);
    }

    #[test]
    fn existing_keys_come_from_the_store() {
        let mut d = Interner::new(5);
        let mut store = |k: &[u8]| Ok(if k == b"old" { Some(3) } else { None });
        assert_eq!(d.intern(b"old", TermKind::Name, None, &mut store).unwrap(), Some(3));
        assert_eq!(d.intern(b"new", TermKind::Name, None, &mut store).unwrap(), Some(5));
        assert_eq!(d.new_count(), 1);
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_a_hash_map(keys in proptest::collection::vec("[a-e]{0,4}", 0..3000)) {
            let mut d = Interner::new(7);
            let mut model: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
            let mut none = |_: &[u8]| Ok(None);
            for k in &keys {
                let next = 7 + model.len() as u32;
                let want = *model.entry(k.clone()).or_insert(next);
                let h = d.hash(k.as_bytes());
                d.prefetch(h);
                proptest::prop_assert_eq!(d.intern_hashed(k.as_bytes(), h, TermKind::Name, None, &mut none).unwrap(), Some(want));
            }
            for (k, &id) in &model {
                proptest::prop_assert_eq!(d.get(k.as_bytes()), Some(id));
                proptest::prop_assert_eq!(d.key(id - 7), k.as_bytes());
            }
            proptest::prop_assert_eq!(d.get(b"zzz"), None);
            proptest::prop_assert_eq!(d.new_count() as usize, model.len());
        }
    }

    /// While a table rehashes its old and new slots are both resident: the count the budget
    /// reads must include them before the insert that grows the table, at every growth.
    #[test]
    fn a_table_about_to_grow_counts_its_new_slots_first() {
        let mut d = Interner::new(0);
        let mut none = |_: &[u8]| Ok(None);
        let mut growths = 0;
        for i in 0u32..200_000 {
            if d.table.len == d.table.capacity() {
                let resident_while_growing = d.arena.len() + d.offsets.len() * 8 + 3 * d.table.slots.len() * 8;
                assert!(d.heap_bytes() >= resident_while_growing, "at {i} entries: {} < {resident_while_growing}", d.heap_bytes());
                growths += 1;
            }
            d.intern(format!("key {i}").as_bytes(), TermKind::Name, None, &mut none).unwrap();
        }
        assert!(growths >= 8, "{growths} growths");
        // Far from its next growth, the table counts only its own slots.
        let table = d.table.slots.len() * 8;
        assert_eq!(d.table.growth_bytes(), 0);
        assert!(d.heap_bytes() < d.arena.len() + d.offsets.len() * 8 + table + 4096, "{}", d.heap_bytes());
    }

    #[test]
    fn literal_names_are_kept() {
        let mut d = Interner::new(0);
        let mut none = |_: &[u8]| Ok(None);
        d.intern(b"\"1961\"^^<x>", TermKind::Literal, Some(b"1961"), &mut none).unwrap();
        let t = d.new_terms().next().unwrap();
        assert_eq!((t.key, t.name), ("\"1961\"^^<x>", Some("1961")));
    }
}
