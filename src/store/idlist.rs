//! Codec for the sorted id lists stored as `adjacency` values.
//!
//! Two encodings, tagged by the first byte, and the writer picks whichever is smaller for
//! each list: short and sparse lists (the vast majority in real KGs) are smallest as
//! delta-varints; long dense lists (hub entities) are smallest as a roaring bitmap. Picking
//! per list is the measurement the format calls for, made at write time on the list itself.

use super::codec::{get_varint, put_varint};
use roaring::RoaringBitmap;

pub const TAG_DELTA_VARINT: u8 = 0;
pub const TAG_ROARING: u8 = 1;

/// Encodes a strictly increasing list of ids. Panics in debug builds if it is not sorted.
pub fn encode_ids(ids: &[u32], out: &mut Vec<u8>) {
    debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "id list must be sorted and unique");
    out.clear();
    out.push(TAG_DELTA_VARINT);
    put_varint(out, ids.len() as u64);
    let mut prev = 0u32;
    for (i, &id) in ids.iter().enumerate() {
        let delta = if i == 0 { id } else { id - prev - 1 };
        put_varint(out, u64::from(delta));
        prev = id;
    }
    // A roaring bitmap only wins for long lists; skip building one for short ones.
    if ids.len() >= 64 {
        let bitmap = RoaringBitmap::from_sorted_iter(ids.iter().copied()).expect("ids are sorted, checked above");
        let size = bitmap.serialized_size() + 1;
        if size < out.len() {
            out.clear();
            out.push(TAG_ROARING);
            bitmap.serialize_into(&mut *out).expect("writing to a Vec cannot fail");
        }
    }
}

/// Encodes a set of ids exactly as [`encode_ids`] encodes them in order, without a copy of
/// the ids (an update encodes hub lists of millions).
pub fn encode_bitmap(ids: &RoaringBitmap, out: &mut Vec<u8>) {
    out.clear();
    out.push(TAG_DELTA_VARINT);
    put_varint(out, ids.len());
    let mut prev = None;
    for id in ids {
        put_varint(out, u64::from(prev.map_or(id, |p: u32| id - p - 1)));
        prev = Some(id);
    }
    if ids.len() >= 64 {
        let size = ids.serialized_size() + 1;
        if size < out.len() {
            out.clear();
            out.push(TAG_ROARING);
            ids.serialize_into(&mut *out).expect("writing to a Vec cannot fail");
        }
    }
}

/// Decodes a list into a set, or `None` when the bytes are not a valid encoding; the ids go
/// straight into the set (no copy of the list).
pub fn decode_bitmap(bytes: &[u8]) -> Option<RoaringBitmap> {
    let (&tag, rest) = bytes.split_first()?;
    if tag == TAG_ROARING {
        return RoaringBitmap::deserialize_from(rest).ok();
    }
    let mut broken = false;
    // The varint form yields strictly increasing ids by construction (a sorted iterator).
    let ids = IdIter::new(bytes)?.map_while(|id| {
        broken |= id.is_none();
        id
    });
    let set = RoaringBitmap::from_sorted_iter(ids).ok()?;
    (!broken).then_some(set)
}

/// Decodes a list, or `None` when the bytes are not a valid encoding.
pub fn decode_ids(bytes: &[u8]) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    IdIter::new(bytes)?.try_for_each(|id| id.map(|id| out.push(id)))?;
    Some(out)
}

/// Number of ids in an encoded list without decoding it all (cheap for both encodings).
pub fn count_ids(bytes: &[u8]) -> Option<u64> {
    let (&tag, rest) = bytes.split_first()?;
    match tag {
        TAG_DELTA_VARINT => Some(get_varint(rest)?.0),
        TAG_ROARING => Some(RoaringBitmap::deserialize_from(rest).ok()?.len()),
        _ => None,
    }
}

/// Streams the ids of an encoded list; yields `None` once on malformed bytes.
pub enum IdIter<'a> {
    Varint { rest: &'a [u8], left: u64, prev: Option<u32> },
    Roaring(roaring::bitmap::IntoIter),
}

impl<'a> IdIter<'a> {
    pub fn new(bytes: &'a [u8]) -> Option<IdIter<'a>> {
        let (&tag, rest) = bytes.split_first()?;
        match tag {
            TAG_DELTA_VARINT => {
                let (left, used) = get_varint(rest)?;
                Some(IdIter::Varint { rest: &rest[used..], left, prev: None })
            }
            TAG_ROARING => {
                let bitmap = RoaringBitmap::deserialize_from(rest).ok()?;
                Some(IdIter::Roaring(bitmap.into_iter()))
            }
            _ => None,
        }
    }
}

impl Iterator for IdIter<'_> {
    /// `Some(None)` signals corruption (and ends the iteration).
    type Item = Option<u32>;

    fn next(&mut self) -> Option<Option<u32>> {
        match self {
            IdIter::Roaring(it) => it.next().map(Some),
            IdIter::Varint { rest, left, prev } => {
                if *left == 0 {
                    return None;
                }
                let Some((delta, used)) = get_varint(rest) else {
                    *left = 0;
                    return Some(None);
                };
                *rest = &rest[used..];
                *left -= 1;
                let id = match *prev {
                    None => u32::try_from(delta).ok(),
                    Some(p) => u32::try_from(delta).ok().and_then(|d| p.checked_add(d)?.checked_add(1)),
                };
                match id {
                    Some(id) => {
                        *prev = Some(id);
                        Some(Some(id))
                    }
                    None => {
                        *left = 0;
                        Some(None)
                    }
                }
            }
        }
    }
}

/// Union of two sorted unique lists (used when a later load adds facts to a stored list).
pub fn union_sorted(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn round_trips(set in proptest::collection::btree_set(any::<u32>(), 0..300)) {
            let ids: Vec<u32> = set.into_iter().collect();
            let mut buf = Vec::new();
            encode_ids(&ids, &mut buf);
            prop_assert_eq!(decode_ids(&buf), Some(ids.clone()));
            prop_assert_eq!(count_ids(&buf), Some(ids.len() as u64));
        }

        #[test]
        fn dense_lists_round_trip(start in 0u32..1000, len in 0u32..5000) {
            let ids: Vec<u32> = (start..start + len).collect();
            let mut buf = Vec::new();
            encode_ids(&ids, &mut buf);
            prop_assert_eq!(decode_ids(&buf), Some(ids));
        }

        #[test]
        fn union_matches_set_union(a in proptest::collection::btree_set(0u32..500, 0..100),
                                   b in proptest::collection::btree_set(0u32..500, 0..100)) {
            let av: Vec<u32> = a.iter().copied().collect();
            let bv: Vec<u32> = b.iter().copied().collect();
            let expected: Vec<u32> = a.union(&b).copied().collect::<BTreeSet<_>>().into_iter().collect();
            prop_assert_eq!(union_sorted(&av, &bv), expected);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = decode_ids(&bytes);
            let _ = count_ids(&bytes);
            if let (Some(set), Some(list)) = (decode_bitmap(&bytes), decode_ids(&bytes)) {
                prop_assert_eq!(set.iter().collect::<Vec<_>>(), list);
            }
        }

        /// A list changed as a set (how an update holds it) is stored byte for byte as the
        /// same ids written as a list, in both encodings.
        #[test]
        fn a_changed_set_encodes_as_its_list(base in proptest::collection::btree_set(0u32..20_000, 0..6000),
                                             added in proptest::collection::vec(0u32..20_000, 0..300),
                                             removed in proptest::collection::vec(0u32..20_000, 0..3000)) {
            let list: Vec<u32> = base.iter().copied().collect();
            let mut buf = Vec::new();
            encode_ids(&list, &mut buf);
            let mut set = decode_bitmap(&buf).expect("valid encoding");
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), list);
            let mut expected = base.clone();
            for &id in &added {
                set.insert(id);
                expected.insert(id);
            }
            for &id in &removed {
                set.remove(id);
                expected.remove(&id);
            }
            let expected: Vec<u32> = expected.into_iter().collect();
            let mut from_set = Vec::new();
            encode_bitmap(&set, &mut from_set);
            let mut from_list = Vec::new();
            encode_ids(&expected, &mut from_list);
            prop_assert_eq!(&from_set, &from_list);
            prop_assert_eq!(decode_ids(&from_set), Some(expected));
        }
    }

    #[test]
    fn picks_roaring_for_dense_hub_lists() {
        let ids: Vec<u32> = (0..10_000).collect();
        let mut buf = Vec::new();
        encode_ids(&ids, &mut buf);
        assert_eq!(buf[0], TAG_ROARING);
        // 10,000 consecutive ids: one run container is far smaller than 10,000 varint bytes.
        assert!(buf.len() < 10_000);
    }

    #[test]
    fn picks_varint_for_short_lists() {
        let mut buf = Vec::new();
        encode_ids(&[5, 9, 1_000_000], &mut buf);
        assert_eq!(buf, vec![TAG_DELTA_VARINT, 3, 5, 3, 0xb6, 0x84, 0x3d]);
    }

    #[test]
    fn overflowing_delta_is_corruption() {
        // Two ids: u32::MAX then a delta that would overflow.
        let mut buf = vec![TAG_DELTA_VARINT, 2];
        put_varint(&mut buf, u64::from(u32::MAX));
        put_varint(&mut buf, 0);
        assert_eq!(decode_ids(&buf), None);
    }
}
