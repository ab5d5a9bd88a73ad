//! Byte layouts of every key and value, in one place (see `schema/v4.md`).
//!
//! Keys are fixed-width big-endian ids so RocksDB's bytewise order is numeric order; values
//! that hold variable data carry their own length prefixes. Every decoder returns `None` on
//! malformed bytes; callers turn that into a corruption error naming the column family.

use crate::ids::{Direction, EntityId, RelationId};

pub const ADJ_KEY_LEN: usize = 9;
pub const DEGREE_KEY_LEN: usize = 5;

/// `adjacency` key: direction (1 byte) ++ entity (u32 BE) ++ relation (u32 BE).
pub fn adj_key(dir: Direction, e: EntityId, r: RelationId) -> [u8; ADJ_KEY_LEN] {
    let mut k = [0u8; ADJ_KEY_LEN];
    k[0] = dir.as_byte();
    k[1..5].copy_from_slice(&e.0.to_be_bytes());
    k[5..9].copy_from_slice(&r.0.to_be_bytes());
    k
}

/// Prefix of every `adjacency` key of one entity in one direction.
pub fn adj_prefix(dir: Direction, e: EntityId) -> [u8; 5] {
    let mut k = [0u8; 5];
    k[0] = dir.as_byte();
    k[1..5].copy_from_slice(&e.0.to_be_bytes());
    k
}

pub fn decode_adj_key(k: &[u8]) -> Option<(Direction, EntityId, RelationId)> {
    if k.len() != ADJ_KEY_LEN {
        return None;
    }
    let dir = Direction::from_byte(k[0])?;
    Some((dir, EntityId(be_u32(&k[1..5])?), RelationId(be_u32(&k[5..9])?)))
}

/// `degrees` key: direction ++ entity (u32 BE); the value is a u32 BE count of facts.
pub fn degree_key(dir: Direction, e: EntityId) -> [u8; DEGREE_KEY_LEN] {
    adj_prefix(dir, e)
}

/// The inverse of [`degree_key`] (the codec's property tests use it).
#[cfg(test)]
pub fn decode_degree_key(k: &[u8]) -> Option<(Direction, EntityId)> {
    if k.len() != DEGREE_KEY_LEN {
        return None;
    }
    Some((Direction::from_byte(k[0])?, EntityId(be_u32(&k[1..5])?)))
}

/// `entities` / `relations` key: the id as u32 BE.
pub fn id_key(id: u32) -> [u8; 4] {
    id.to_be_bytes()
}

pub fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

/// What kind of thing a dictionary entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TermKind {
    /// A plain name from a TSV or pipe file: the key is the name.
    Name = 0,
    /// An IRI from an RDF file.
    Iri = 1,
    /// A literal value from an RDF file (a date, a number, a string).
    Literal = 2,
    /// A blank node from an RDF file.
    Blank = 3,
}

impl TermKind {
    /// The kind a record's first byte stands for (`None`: no kind).
    pub fn from_byte(b: u8) -> Option<TermKind> {
        Some(match b {
            0 => TermKind::Name,
            1 => TermKind::Iri,
            2 => TermKind::Literal,
            3 => TermKind::Blank,
            _ => return None,
        })
    }
}

/// Value of `entities` and `relations`: the identity key and the display name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TermRecord {
    /// What the term is.
    pub kind: TermKind,
    /// Identity: the exact name (TSV, pipe), the IRI, or the literal in N-Triples form.
    pub key: String,
    /// Display name; equal to `key` for plain names.
    pub name: String,
}

/// Layout: kind (1 byte) ++ key length (LEB128) ++ key ++ name. An empty name means the
/// name equals the key, which saves the duplicate bytes for TSV stores.
pub fn encode_term(rec: &TermRecord, out: &mut Vec<u8>) {
    out.clear();
    out.push(rec.kind as u8);
    put_varint(out, rec.key.len() as u64);
    out.extend_from_slice(rec.key.as_bytes());
    if rec.name != rec.key {
        out.extend_from_slice(rec.name.as_bytes());
    }
}

pub fn decode_term(b: &[u8]) -> Option<TermRecord> {
    let (&kind, rest) = b.split_first()?;
    let kind = TermKind::from_byte(kind)?;
    let (len, used) = get_varint(rest)?;
    let rest = &rest[used..];
    let len = usize::try_from(len).ok()?;
    if len > rest.len() {
        return None;
    }
    let key = std::str::from_utf8(&rest[..len]).ok()?.to_owned();
    let name_bytes = &rest[len..];
    let name = if name_bytes.is_empty() { key.clone() } else { std::str::from_utf8(name_bytes).ok()?.to_owned() };
    Some(TermRecord { kind, key, name })
}

/// Which dictionary a `names` entry points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameTarget {
    /// An entity's name.
    Entity(EntityId),
    /// A relation's name.
    Relation(RelationId),
}

/// `names` key: normalized name ++ 0x00 ++ target kind (0 entity, 1 relation) ++ id (u32 BE).
/// The value is one byte: 0 primary name, 1 alias.
pub fn name_key(normalized: &str, target: NameTarget) -> Vec<u8> {
    let mut k = Vec::with_capacity(normalized.len() + 6);
    k.extend_from_slice(normalized.as_bytes());
    k.push(0);
    match target {
        NameTarget::Entity(e) => {
            k.push(0);
            k.extend_from_slice(&e.0.to_be_bytes());
        }
        NameTarget::Relation(r) => {
            k.push(1);
            k.extend_from_slice(&r.0.to_be_bytes());
        }
    }
    k
}

/// Prefix under which every id of one normalized name sorts.
pub fn name_prefix(normalized: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(normalized.len() + 1);
    k.extend_from_slice(normalized.as_bytes());
    k.push(0);
    k
}

pub fn decode_name_key(k: &[u8]) -> Option<(&str, NameTarget)> {
    if k.len() < 6 || k[k.len() - 6] != 0 {
        return None;
    }
    let (name, tail) = k.split_at(k.len() - 6);
    let name = std::str::from_utf8(name).ok()?;
    let id = be_u32(&tail[2..6])?;
    let target = match tail[1] {
        0 => NameTarget::Entity(EntityId(id)),
        1 => NameTarget::Relation(RelationId(id)),
        _ => return None,
    };
    Some((name, target))
}

pub const NAME_PRIMARY: u8 = 0;
pub const NAME_ALIAS: u8 = 1;
/// The folded form (`normalize::fold_name`) of the name or of an alias (format 2).
pub const NAME_FOLDED: u8 = 2;

/// Every `names` entry of one target: normalized name -> flag, for its name and aliases
/// and their folded forms; where two coincide the lower flag wins (name, alias, folded).
/// The one definition the loader, the migration and the validator share.
pub fn name_entries(name: &str, aliases: &[String]) -> std::collections::BTreeMap<String, u8> {
    use crate::normalize::{fold_name, normalize_name};
    let mut out = std::collections::BTreeMap::new();
    let mut add = |key: String, flag: u8| {
        out.entry(key).and_modify(|f: &mut u8| *f = (*f).min(flag)).or_insert(flag);
    };
    let forms = std::iter::once((name, NAME_PRIMARY)).chain(aliases.iter().map(|a| (a.as_str(), NAME_ALIAS)));
    for (text, flag) in forms {
        let norm = normalize_name(text);
        if let Some(folded) = fold_name(&norm) {
            add(folded, NAME_FOLDED);
        }
        add(norm, flag);
    }
    out
}

/// `aliases` key: entity (u32 BE) ++ alias bytes; empty value.
pub fn alias_key(e: EntityId, alias: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(alias.len() + 4);
    k.extend_from_slice(&e.0.to_be_bytes());
    k.extend_from_slice(alias.as_bytes());
    k
}

pub fn decode_alias_key(k: &[u8]) -> Option<(EntityId, &str)> {
    if k.len() < 4 {
        return None;
    }
    Some((EntityId(be_u32(&k[..4])?), std::str::from_utf8(&k[4..]).ok()?))
}

/// LEB128 unsigned varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Returns the value and the bytes used; `None` when truncated or longer than 10 bytes.
pub fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && byte > 1 {
            return None;
        }
        v |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// `fact_sources` key: subject ++ relation ++ load (u32 BE each; loads counted from 1, 0 for
/// facts stored before format 4).
pub fn fact_source_key(s: EntityId, r: RelationId, load: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&s.0.to_be_bytes());
    k[4..8].copy_from_slice(&r.0.to_be_bytes());
    k[8..].copy_from_slice(&load.to_be_bytes());
    k
}

/// `source_facts` key: load ++ subject ++ relation.
pub fn source_fact_key(load: u32, s: EntityId, r: RelationId) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&load.to_be_bytes());
    k[4..8].copy_from_slice(&s.0.to_be_bytes());
    k[8..].copy_from_slice(&r.0.to_be_bytes());
    k
}

/// (first, second, third) u32s of a 12-byte key of `fact_sources` or `source_facts`.
pub fn decode_triple_key(k: &[u8]) -> Option<(u32, u32, u32)> {
    if k.len() != 12 {
        return None;
    }
    Some((be_u32(&k[..4])?, be_u32(&k[4..8])?, be_u32(&k[8..])?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn adj_key_round_trips_and_sorts(d1 in 0u8..2, e1: u32, r1: u32, d2 in 0u8..2, e2: u32, r2: u32) {
            let a = (Direction::from_byte(d1).unwrap(), EntityId(e1), RelationId(r1));
            let b = (Direction::from_byte(d2).unwrap(), EntityId(e2), RelationId(r2));
            let ka = adj_key(a.0, a.1, a.2);
            let kb = adj_key(b.0, b.1, b.2);
            prop_assert_eq!(decode_adj_key(&ka), Some(a));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert!(ka.starts_with(&adj_prefix(a.0, a.1)));
        }

        #[test]
        fn degree_key_round_trips_and_sorts(d1 in 0u8..2, e1: u32, d2 in 0u8..2, e2: u32) {
            let a = (Direction::from_byte(d1).unwrap(), EntityId(e1));
            let b = (Direction::from_byte(d2).unwrap(), EntityId(e2));
            prop_assert_eq!(decode_degree_key(&degree_key(a.0, a.1)), Some(a));
            prop_assert_eq!(degree_key(a.0, a.1).cmp(&degree_key(b.0, b.1)), a.cmp(&b));
        }

        #[test]
        fn id_key_sorts_numerically(a: u32, b: u32) {
            prop_assert_eq!(id_key(a).cmp(&id_key(b)), a.cmp(&b));
        }

        #[test]
        fn name_key_round_trips(name in "[^\u{0}]{0,40}", id: u32, rel: bool) {
            let target = if rel { NameTarget::Relation(RelationId(id)) } else { NameTarget::Entity(EntityId(id)) };
            let k = name_key(&name, target);
            prop_assert_eq!(decode_name_key(&k), Some((name.as_str(), target)));
            prop_assert!(k.starts_with(&name_prefix(&name)));
        }

        #[test]
        fn name_keys_group_by_name(a in "[a-c ]{0,6}", b in "[a-c ]{0,6}", ia: u32, ib: u32) {
            // Every key of a name sorts before every key of a name that sorts after it, so a
            // prefix scan of one name never meets another name's ids.
            let ka = name_key(&a, NameTarget::Entity(EntityId(ia)));
            let kb = name_key(&b, NameTarget::Entity(EntityId(ib)));
            if a < b { prop_assert!(ka < kb); }
            if a == b { prop_assert_eq!(ka.cmp(&kb), ia.cmp(&ib)); }
        }

        #[test]
        fn term_round_trips(kind in 0u8..4, key in "\\PC{0,30}", name in "\\PC{0,30}") {
            let rec = TermRecord { kind: TermKind::from_byte(kind).unwrap(), key, name };
            let mut buf = Vec::new();
            encode_term(&rec, &mut buf);
            let back = decode_term(&buf).unwrap();
            // An empty display name is stored as "same as key".
            let expected_name = if rec.name.is_empty() { rec.key.clone() } else { rec.name.clone() };
            prop_assert_eq!(back.key, rec.key);
            prop_assert_eq!(back.name, expected_name);
            prop_assert_eq!(back.kind, rec.kind);
        }

        #[test]
        fn varint_round_trips(v: u64) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(get_varint(&buf), Some((v, buf.len())));
        }

        #[test]
        fn decoders_never_panic_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_term(&bytes);
            let _ = decode_name_key(&bytes);
            let _ = decode_adj_key(&bytes);
            let _ = decode_alias_key(&bytes);
            let _ = get_varint(&bytes);
        }
    }

    #[test]
    fn varint_rejects_truncated_and_overlong() {
        assert_eq!(get_varint(&[0x80]), None);
        assert_eq!(get_varint(&[0xff; 11]), None);
        assert_eq!(get_varint(&[0x96, 0x01]), Some((150, 2)));
    }
}
