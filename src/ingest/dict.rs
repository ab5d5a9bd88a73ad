//! Dictionary building during a load: exact key -> dense id.
//!
//! New terms are kept in one byte arena in id order (kind, varint key length, key, varint
//! name length, name), with the arena offset of each term and a hash table of term indexes
//! keyed by the arena bytes: about 15 bytes per term plus its key, no allocation per term.
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
    table: HashTable<u32>,
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
        term_at(&self.arena, self.offsets[idx as usize]).1
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
        if let Some(&idx) = self.table.find(hash, |&idx| self.key_of(idx) == key) {
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
        self.offsets.push(self.arena.len() as u64);
        self.arena.push(kind as u8);
        put_varint(&mut self.arena, key.len() as u64);
        self.arena.extend_from_slice(key);
        let name = name.filter(|n| *n != key).unwrap_or(b"");
        put_varint(&mut self.arena, name.len() as u64);
        self.arena.extend_from_slice(name);
        let (arena, offsets, hasher) = (&self.arena, &self.offsets, &self.hasher);
        self.table.insert_unique(hash, idx, |&i| hasher.hash_one(term_at(arena, offsets[i as usize]).1));
        Ok(Some(id))
    }

    /// The id of `key` if this load or the store's cache knows it (no store lookup).
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&idx| self.key_of(idx) == key)
            .map(|&idx| self.base + idx)
            .or_else(|| self.existing.get(key).copied())
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
            let (kind, key, name) = term_at(&self.arena, at);
            NewTerm {
                id: self.base + i as u32,
                // Keys and names come from validated UTF-8 lines.
                key: std::str::from_utf8(key).expect("interned keys are UTF-8"),
                kind,
                name: (!name.is_empty()).then(|| std::str::from_utf8(name).expect("interned names are UTF-8")),
            }
        })
    }

    /// Bytes held, for the memory report.
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity() + self.offsets.capacity() * 8 + self.table.capacity() * 5 + self.existing.capacity() * 40
    }
}

/// Decodes the term at `at`: (kind, key, name). The arena is written only by `intern`.
fn term_at(arena: &[u8], at: u64) -> (TermKind, &[u8], &[u8]) {
    let at = at as usize;
    let kind = TermKind::from_byte(arena[at]).expect("the interner writes valid kinds");
    let (key_len, used) = get_varint(&arena[at + 1..]).expect("the interner writes valid lengths");
    let key_start = at + 1 + used;
    let key_end = key_start + key_len as usize;
    let (name_len, used) = get_varint(&arena[key_end..]).expect("the interner writes valid lengths");
    let name_start = key_end + used;
    (kind, &arena[key_start..key_end], &arena[name_start..name_start + name_len as usize])
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
