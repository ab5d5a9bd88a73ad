//! Dictionary building during a load: exact key -> dense id.
//!
//! New terms are kept in one byte arena in id order, with a hash table of ids keyed by the
//! arena bytes: about 21 bytes per term plus the key itself, no allocation per term. Keys
//! of an existing store are looked up in it (bloom-filtered point reads) and cached.

use crate::error::StoreError;
use crate::store::TermKind;
use hashbrown::{DefaultHashBuilder, HashMap, HashTable};
use std::hash::BuildHasher;

struct Entry {
    start: u64,
    key_len: u32,
    /// Length of the display name stored after the key (0: the name is derived later).
    name_len: u32,
    kind: TermKind,
}

pub struct Interner {
    base: u32,
    arena: Vec<u8>,
    entries: Vec<Entry>,
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
            entries: Vec::new(),
            table: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            existing: HashMap::new(),
        }
    }

    fn key_of(&self, idx: u32) -> &[u8] {
        let e = &self.entries[idx as usize];
        &self.arena[e.start as usize..e.start as usize + e.key_len as usize]
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
        if let Some(&idx) = self.table.find(hash, |&idx| {
            let e = &self.entries[idx as usize];
            &self.arena[e.start as usize..e.start as usize + e.key_len as usize] == key
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
        let idx = self.entries.len() as u32;
        let Some(id) = self.base.checked_add(idx).filter(|&id| id < u32::MAX) else {
            return Ok(None);
        };
        let start = self.arena.len() as u64;
        self.arena.extend_from_slice(key);
        let name_len = match name {
            Some(n) if n != key => {
                self.arena.extend_from_slice(n);
                n.len() as u32
            }
            _ => 0,
        };
        self.entries.push(Entry { start, key_len: key.len() as u32, name_len, kind });
        let (arena, entries, hasher) = (&self.arena, &self.entries, &self.hasher);
        self.table.insert_unique(hash, idx, |&i| {
            let e = &entries[i as usize];
            hasher.hash_one(&arena[e.start as usize..e.start as usize + e.key_len as usize])
        });
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
        self.entries.len() as u32
    }

    /// The terms added by this load, in id order.
    pub fn new_terms(&self) -> impl ExactSizeIterator<Item = NewTerm<'_>> + '_ {
        self.entries.iter().enumerate().map(move |(i, e)| {
            let s = e.start as usize;
            let k = e.key_len as usize;
            let key = &self.arena[s..s + k];
            let name = (e.name_len > 0).then(|| &self.arena[s + k..s + k + e.name_len as usize]);
            NewTerm {
                id: self.base + i as u32,
                // Keys and names come from validated UTF-8 lines.
                key: std::str::from_utf8(key).expect("interned keys are UTF-8"),
                kind: e.kind,
                name: name.map(|n| std::str::from_utf8(n).expect("interned names are UTF-8")),
            }
        })
    }

    /// Bytes held, for the memory report.
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>() + self.table.capacity() * 5
    }
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
