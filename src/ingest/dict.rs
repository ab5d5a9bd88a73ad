//! Dictionary building during a load: exact key -> dense id.
//!
//! New terms are kept in one byte arena in id order (index, kind, varint key length, key,
//! varint name length, name), with the arena offset of each term, and a hash table of arena
//! offsets keyed by the arena bytes: about 23 bytes per term plus its key, no allocation per
//! term. A lookup touches the table and the arena record only (the index travels with the
//! key), which matters once the dictionary outgrows the CPU caches.
//! Keys of an existing store are looked up in it (bloom-filtered point reads) and cached.

use crate::error::StoreError;
use crate::store::codec::{get_varint, put_varint};
use crate::store::TermKind;
use hashbrown::{DefaultHashBuilder, HashMap, HashTable};
use std::hash::BuildHasher;

pub struct Interner {
    base: u32,
    arena: Vec<u8>,
    /// Arena offset of each new term, in id order.
    offsets: Vec<u64>,
    table: HashTable<u64>,
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
        Interner {
            base,
            arena: Vec::new(),
            offsets: Vec::new(),
            table: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            existing: HashMap::new(),
        }
    }

    fn key_of(&self, idx: u32) -> &[u8] {
        term_at(&self.arena, self.offsets[idx as usize]).2
    }

    /// The id of `key`, looking in this load, then in the store (`lookup`), then assigning
    /// the next id. Returns `None` when ids are exhausted.
    pub fn intern(
        &mut self,
        key: &[u8],
        kind: TermKind,
        name: Option<&[u8]>,
        lookup: &mut dyn FnMut(&[u8]) -> Result<Option<u32>, StoreError>,
    ) -> Result<Option<u32>, StoreError> {
        let hash = self.hasher.hash_one(key);
        if let Some(&at) = self.table.find(hash, |&at| term_at(&self.arena, at).2 == key) {
            return Ok(Some(self.base + term_at(&self.arena, at).0));
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
        self.table.insert_unique(hash, at, |&at| hasher.hash_one(term_at(arena, at).2));
        Ok(Some(id))
    }

    /// The id of `key` if this load or the store's cache knows it (no store lookup).
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&at| term_at(&self.arena, at).2 == key)
            .map(|&at| self.base + term_at(&self.arena, at).0)
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
    pub fn heap_bytes(&self) -> usize {
        self.arena.len() + self.offsets.len() * 8 + self.table.capacity() + self.table.len() * 8 + self.existing.len() * 48
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

    #[test]
    fn literal_names_are_kept() {
        let mut d = Interner::new(0);
        let mut none = |_: &[u8]| Ok(None);
        d.intern(b"\"1961\"^^<x>", TermKind::Literal, Some(b"1961"), &mut none).unwrap();
        let t = d.new_terms().next().unwrap();
        assert_eq!((t.key, t.name), ("\"1961\"^^<x>", Some("1961")));
    }
}
