//! The token index: entity and relation names as token ids of one tokenizer, and the
//! entity-token trie, on disk (schema/v2.md). Several tokenizers live side by side, each
//! under its fingerprint.
//!
//! The trie is the sorted set of keys `fingerprint ++ side ++ t1 … tn ++ END ++ id`: the
//! children of a prefix are found by skip-scanning (one seek per distinct child), the
//! terms that end at a prefix by one seek to `prefix ++ END`. Nothing is held in memory.

use super::codec::{be_u32, get_varint, put_varint};
use super::schema::{CF_TERM_TOKENS, CF_TOKENIZERS, CF_TOKEN_TRIE};
use super::Store;
use std::sync::Arc;
use crate::error::StoreError;
use crate::model::{Side, TokenContext};

/// Sorts after every token id: marks the end of a name in trie keys.
pub const END: u32 = u32::MAX;

/// What the `tokenizers` column family says about one indexed tokenizer (JSON value).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct TokenizerInfo {
    /// The fingerprint, as 16 hex digits (the key is the same 8 bytes).
    pub fingerprint: String,
    /// A name for humans (the file it was indexed from, or `--name`).
    pub name: String,
    pub vocab_size: u64,
    pub context: TokenContext,
    pub entities: u64,
    pub relations: u64,
    pub indexed_by: String,
    pub indexed_at: u64,
}

pub fn tokenizer_key(fp: u64) -> [u8; 8] {
    fp.to_be_bytes()
}

/// `term_tokens` key: fingerprint ++ side ++ id.
pub fn term_key(fp: u64, side: Side, id: u32) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[..8].copy_from_slice(&fp.to_be_bytes());
    k[8] = side as u8;
    k[9..].copy_from_slice(&id.to_be_bytes());
    k
}

/// `token_trie` key prefix of a token prefix: fingerprint ++ side ++ tokens.
pub fn trie_prefix(fp: u64, side: Side, tokens: &[u32]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + tokens.len() * 4 + 8);
    k.extend_from_slice(&fp.to_be_bytes());
    k.push(side as u8);
    for t in tokens {
        k.extend_from_slice(&t.to_be_bytes());
    }
    k
}

/// `token_trie` key of a whole name: prefix ++ END ++ id.
pub fn trie_key(fp: u64, side: Side, tokens: &[u32], id: u32) -> Vec<u8> {
    let mut k = trie_prefix(fp, side, tokens);
    k.extend_from_slice(&END.to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// Token list value: varint count ++ varint ids.
pub fn encode_tokens(tokens: &[u32], out: &mut Vec<u8>) {
    out.clear();
    put_varint(out, tokens.len() as u64);
    for &t in tokens {
        put_varint(out, u64::from(t));
    }
}

pub fn decode_tokens(mut b: &[u8]) -> Option<Vec<u32>> {
    let (n, used) = get_varint(b)?;
    b = &b[used..];
    let mut out = Vec::with_capacity(n.min(1024) as usize);
    for _ in 0..n {
        let (t, used) = get_varint(b)?;
        out.push(u32::try_from(t).ok().filter(|&t| t != END)?);
        b = &b[used..];
    }
    b.is_empty().then_some(out)
}

/// Reads the token index of one tokenizer.
/// Owns its store handle: `Send + Sync`, shared by the threads that decode.
pub struct TokenIndex {
    store: Arc<Store>,
    fp: u64,
    info: TokenizerInfo,
}

impl TokenIndex {
    /// The index of the tokenizer with this fingerprint; a clear error when the store was
    /// indexed with other tokenizers only.
    pub fn open(store: Arc<Store>, fp: u64) -> Result<TokenIndex, StoreError> {
        match store.tokenizer_info(fp)? {
            Some(info) if info.entities != store.meta().entities || info.relations != store.meta().relations => Err(StoreError::TokenIndexStale {
                path: store.dir().to_path_buf(),
                fingerprint: info.fingerprint,
                indexed: info.entities,
                entities: store.meta().entities,
            }),
            Some(info) => Ok(TokenIndex { store, fp, info }),
            None => {
                let known: Vec<String> = store.tokenizers()?.into_iter().map(|i| format!("{} ({})", i.fingerprint, i.name)).collect();
                Err(StoreError::TokenizerNotIndexed {
                    path: store.dir().to_path_buf(),
                    fingerprint: format!("{fp:016x}"),
                    indexed: if known.is_empty() { "none".into() } else { known.join(", ") },
                })
            }
        }
    }

    pub fn info(&self) -> &TokenizerInfo {
        &self.info
    }

    /// The token ids of a term's name, as written inside a path.
    pub fn tokens(&self, side: Side, id: u32) -> Result<Option<Vec<u32>>, StoreError> {
        let key = term_key(self.fp, side, id);
        match self.store.db().get_pinned_cf(self.store.cf(CF_TERM_TOKENS), key)? {
            None => Ok(None),
            Some(v) => decode_tokens(&v).map(Some).ok_or_else(|| StoreError::corrupt(CF_TERM_TOKENS, &key, "malformed token list")),
        }
    }

    /// The tokens that continue `prefix` towards some name, ascending.
    pub fn children(&self, side: Side, prefix: &[u32]) -> Result<Vec<u32>, StoreError> {
        let base = trie_prefix(self.fp, side, prefix);
        let mut out = Vec::new();
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF_TOKEN_TRIE));
        it.seek(&base);
        while let Some(k) = it.key() {
            if !k.starts_with(&base) {
                break;
            }
            let next = k.get(base.len()..base.len() + 4).and_then(be_u32).ok_or_else(|| StoreError::corrupt(CF_TOKEN_TRIE, k, "short trie key"))?;
            if next == END {
                break; // END sorts last: no child after it
            }
            out.push(next);
            // Skip the rest of this child's subtree.
            let mut skip = base.clone();
            skip.extend_from_slice(&(next + 1).to_be_bytes());
            it.seek(&skip);
        }
        it.status()?;
        Ok(out)
    }

    /// The terms whose whole name is `tokens`, ascending.
    pub fn complete(&self, side: Side, tokens: &[u32]) -> Result<Vec<u32>, StoreError> {
        let mut base = trie_prefix(self.fp, side, tokens);
        base.extend_from_slice(&END.to_be_bytes());
        let mut out = Vec::new();
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF_TOKEN_TRIE));
        it.seek(&base);
        while let Some(k) = it.key() {
            if !k.starts_with(&base) {
                break;
            }
            let id = k.get(base.len()..).and_then(be_u32).ok_or_else(|| StoreError::corrupt(CF_TOKEN_TRIE, k, "bad trie key end"))?;
            out.push(id);
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    /// `children` restricted to the names of `ids` (the neighbours reachable from the
    /// current path): one point read per id, no trie scan. Also says whether one of them
    /// ends exactly at `prefix`.
    pub fn children_within(&self, side: Side, prefix: &[u32], ids: &[u32]) -> Result<(Vec<u32>, bool), StoreError> {
        let mut next = Vec::new();
        let mut ends = false;
        // One batched read (sorted keys share index and data blocks) instead of a get each.
        let mut keys: Vec<[u8; 13]> = ids.iter().map(|&id| term_key(self.fp, side, id)).collect();
        keys.sort_unstable();
        let values = self.store.db().batched_multi_get_cf(self.store.cf(CF_TERM_TOKENS), &keys, true);
        for (key, value) in keys.iter().zip(values) {
            let Some(v) = value? else { continue };
            let tokens = decode_tokens(&v).ok_or_else(|| StoreError::corrupt(CF_TERM_TOKENS, key, "malformed token list"))?;
            if tokens.starts_with(prefix) {
                match tokens.get(prefix.len()) {
                    Some(&t) => next.push(t),
                    None => ends = true,
                }
            }
        }
        next.sort_unstable();
        next.dedup();
        Ok((next, ends))
    }
}

impl Store {
    /// The tokenizers whose token index this store holds.
    pub fn tokenizers(&self) -> Result<Vec<TokenizerInfo>, StoreError> {
        let mut out = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_TOKENIZERS));
        it.seek_to_first();
        while let Some((k, v)) = it.item() {
            out.push(serde_json::from_slice(v).map_err(|e| StoreError::corrupt(CF_TOKENIZERS, k, format!("tokenizer record: {e}")))?);
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    pub fn tokenizer_info(&self, fp: u64) -> Result<Option<TokenizerInfo>, StoreError> {
        let key = tokenizer_key(fp);
        match self.db().get_pinned_cf(self.cf(CF_TOKENIZERS), key)? {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v)
                .map(Some)
                .map_err(|e| StoreError::corrupt(CF_TOKENIZERS, &key, format!("tokenizer record: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn token_lists_round_trip(tokens in proptest::collection::vec(0u32..u32::MAX, 0..50)) {
            let mut buf = Vec::new();
            encode_tokens(&tokens, &mut buf);
            prop_assert_eq!(decode_tokens(&buf), Some(tokens));
        }

        #[test]
        fn trie_keys_sort_children_before_end(a in proptest::collection::vec(0u32..1000, 0..6), b in proptest::collection::vec(0u32..1000, 0..6), ia: u32, ib: u32) {
            // Keys order like (tokens with END appended, id): a name sorts after every longer
            // name it prefixes, so a skip-scan meets all children before the END entries.
            let ka = trie_key(7, Side::Entity, &a, ia);
            let kb = trie_key(7, Side::Entity, &b, ib);
            let mut ta = a.clone(); ta.push(END); ta.push(ia);
            let mut tb = b.clone(); tb.push(END); tb.push(ib);
            prop_assert_eq!(ka.cmp(&kb), ta.cmp(&tb));
        }

        #[test]
        fn garbage_token_lists_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_tokens(&bytes);
        }
    }
}
