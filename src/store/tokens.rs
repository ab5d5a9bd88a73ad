//! The token index: entity and relation names as token ids of one tokenizer, and the
//! entity-token trie, on disk (schema/v4.md). Several tokenizers live side by side, each
//! under its fingerprint.
//!
//! The trie is the sorted set of keys `fingerprint ++ side ++ t1 … tn ++ END ++ id`: the
//! children of a prefix are found by skip-scanning (one seek per distinct child), the
//! terms that end at a prefix by one seek to `prefix ++ END`. A node is its key prefix, so a
//! [`TrieCursor`] moves down by appending a token and one seek on an iterator it keeps; it
//! never walks from the root. Only the root's children (the largest fan-out, read at every
//! first decoding step) are held in memory.

use super::codec::{be_u32, get_varint, put_varint};
use super::schema::{CF_TERM_TOKENS, CF_TOKENIZERS, CF_TOKEN_TRIE};
use super::Store;
use crate::linearize::{Linearization, Side};
use crate::store::error::ReadError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Sorts after every token id: marks the end of a name in trie keys.
pub const END: u32 = u32::MAX;

/// What the `tokenizers` column family says about one indexed tokenizer (JSON value).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct TokenizerInfo {
    /// The fingerprint, as 16 hex digits (the key is the same 8 bytes).
    pub fingerprint: String,
    /// A name for humans (the file it was indexed from, or `--name`).
    pub name: String,
    /// The tokenizer's vocabulary size, added tokens included.
    pub vocab_size: u64,
    /// How names were written around (format 3; `context` in format 2).
    pub linearization: Linearization,
    /// `linearization.fingerprint()` as 16 hex digits.
    pub linearization_fingerprint: String,
    /// Entities in the store when indexed.
    pub entities: u64,
    /// Relations in the store when indexed.
    pub relations: u64,
    /// `meta.dictionary_epoch` when indexed: the names it was built from.
    pub dictionary_epoch: u64,
    /// The Trellis that built it (`trellis <version>`).
    pub indexed_by: String,
    /// When it was built, in seconds since the Unix epoch.
    pub indexed_at: u64,
}

/// `tokenizers` key of a tokenizer: its fingerprint, big-endian.
pub fn tokenizer_key(fp: u64) -> [u8; 8] {
    fp.to_be_bytes()
}

/// The key range `[from, to)` of one tokenizer in `term_tokens` and `token_trie`: every key
/// is `fingerprint ++ side ++ ...` with side 0 or 1, so `fingerprint ++ 0xff` bounds them
/// (also for the fingerprint u64::MAX, which has no successor).
pub fn fingerprint_range(fp: u64) -> ([u8; 8], [u8; 9]) {
    let mut to = [0xff; 9];
    to[..8].copy_from_slice(&fp.to_be_bytes());
    (fp.to_be_bytes(), to)
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

/// Reads a token list value ([`encode_tokens`]); `None` when it does not decode.
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
    /// The root's children per side, read once.
    roots: [OnceLock<Vec<u32>>; 2],
}

/// Which of some ids continue a prefix, and with which token, and which end there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Within {
    /// (id, its next token), ascending by id.
    pub continuing: Vec<(u32, u32)>,
    /// The ids whose whole name is the prefix, ascending.
    pub ending: Vec<u32>,
}

impl Within {
    /// The distinct next tokens, ascending.
    pub fn next_tokens(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self.continuing.iter().map(|&(_, t)| t).collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The ids that continue with `token`, ascending.
    pub fn ids_with(&self, token: u32) -> Vec<u32> {
        self.continuing.iter().filter(|&&(_, t)| t == token).map(|&(id, _)| id).collect()
    }
}

impl TokenIndex {
    /// The index of the tokenizer with this fingerprint, built with `linearization` from
    /// the store's current dictionaries. Refused, naming the command to run, when the store
    /// was indexed with other tokenizers only, with another linearization, or when a load
    /// added or renamed entities or relations since.
    pub fn open(store: Arc<Store>, fp: u64, linearization: &Linearization) -> Result<TokenIndex, TokenIndexError> {
        let Some(info) = store.tokenizer_info(fp)? else {
            return Err(TokenIndexError::NotIndexed { path: store.dir().to_path_buf(), fingerprint: fp, indexed: store.tokenizers()?, tokenizer: None });
        };
        let meta = store.meta();
        let reason = if info.entities != meta.entities || info.relations != meta.relations {
            Some(StaleReason::Counts { indexed_entities: info.entities, indexed_relations: info.relations, entities: meta.entities, relations: meta.relations })
        } else if info.dictionary_epoch != meta.dictionary_epoch {
            Some(StaleReason::Renamed { indexed_epoch: info.dictionary_epoch, epoch: meta.dictionary_epoch })
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(TokenIndexError::Stale { path: store.dir().to_path_buf(), info: Box::new(info), reason, tokenizer: None });
        }
        if info.linearization_fingerprint != linearization.fingerprint_hex() {
            return Err(TokenIndexError::Linearization {
                path: store.dir().to_path_buf(),
                info: Box::new(info),
                wanted: linearization_name(linearization),
                tokenizer: None,
            });
        }
        Ok(TokenIndex { store, fp, info, roots: Default::default() })
    }

    /// What the store records about this index.
    pub fn info(&self) -> &TokenizerInfo {
        &self.info
    }

    /// How names were written around when they were tokenized.
    pub fn linearization(&self) -> &Linearization {
        &self.info.linearization
    }

    /// The token ids of a term's name, as written inside a path.
    pub fn tokens(&self, side: Side, id: u32) -> Result<Option<Vec<u32>>, ReadError> {
        let key = term_key(self.fp, side, id);
        match self.store.db().get_pinned_cf(self.store.cf(CF_TERM_TOKENS), key).map_err(|e| self.store.read_error(e))? {
            None => Ok(None),
            Some(v) => decode_tokens(&v).map(Some).ok_or_else(|| ReadError::corrupt(CF_TERM_TOKENS, &key, "malformed token list")),
        }
    }

    /// The token lists of many terms in one batched read, in the order of `ids` (`None` for
    /// an id the index does not hold).
    pub fn tokens_many(&self, side: Side, ids: &[u32]) -> Result<Vec<Option<Vec<u32>>>, ReadError> {
        // Sorted keys share index and data blocks; the answers go back to input order.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_unstable_by_key(|&i| ids[i]);
        let keys: Vec<[u8; 13]> = order.iter().map(|&i| term_key(self.fp, side, ids[i])).collect();
        let values = self.store.db().batched_multi_get_cf(self.store.cf(CF_TERM_TOKENS), &keys, true);
        let mut out = vec![None; ids.len()];
        for ((&i, key), value) in order.iter().zip(&keys).zip(values) {
            if let Some(v) = value.map_err(|e| self.store.read_error(e))? {
                out[i] = Some(decode_tokens(&v).ok_or_else(|| ReadError::corrupt(CF_TERM_TOKENS, key, "malformed token list"))?);
            }
        }
        Ok(out)
    }

    /// The tokens that continue `prefix` towards some name, ascending (the root's from the
    /// cache).
    pub fn children(&self, side: Side, prefix: &[u32]) -> Result<Vec<u32>, ReadError> {
        if prefix.is_empty() {
            return Ok(self.root_children(side)?.to_vec());
        }
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF_TOKEN_TRIE));
        scan_children(&self.store, &mut it, &trie_prefix(self.fp, side, prefix))
    }

    /// The root's children of a side, read on first use and kept.
    pub fn root_children(&self, side: Side) -> Result<&[u32], ReadError> {
        let cell = &self.roots[side as usize];
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF_TOKEN_TRIE));
        let v = scan_children(&self.store, &mut it, &trie_prefix(self.fp, side, &[]))?;
        Ok(cell.get_or_init(|| v))
    }

    /// The terms whose whole name is `tokens`, ascending.
    pub fn complete(&self, side: Side, tokens: &[u32]) -> Result<Vec<u32>, ReadError> {
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF_TOKEN_TRIE));
        scan_ending(&self.store, &mut it, &trie_prefix(self.fp, side, tokens))
    }

    /// A cursor at the root of a side's trie.
    pub fn cursor(&self, side: Side) -> TrieCursor<'_> {
        TrieCursor {
            index: self,
            side,
            it: self.store.db().raw_iterator_cf(self.store.cf(CF_TOKEN_TRIE)),
            key: trie_prefix(self.fp, side, &[]),
            children: None,
        }
    }

    /// Among `ids` (the neighbours reachable from the current path), those whose name
    /// continues `prefix` (with their next token) and those whose name is `prefix`: one
    /// batched read of their token lists, no trie scan. Ids without a token list are left out.
    pub fn children_within(&self, side: Side, prefix: &[u32], ids: &[u32]) -> Result<Within, ReadError> {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let lists = self.tokens_many(side, &sorted)?;
        let mut out = Within::default();
        for (&id, tokens) in sorted.iter().zip(lists) {
            let Some(tokens) = tokens else { continue };
            if tokens.starts_with(prefix) {
                match tokens.get(prefix.len()) {
                    Some(&t) => out.continuing.push((id, t)),
                    None => out.ending.push(id),
                }
            }
        }
        Ok(out)
    }
}

/// A linearization's preset name when it is the preset, else `custom`.
fn linearization_name(l: &Linearization) -> &'static str {
    match l.name.as_str() {
        "trellis" if *l == Linearization::trellis() => "trellis",
        "dialoggsr" if *l == Linearization::dialoggsr() => "dialoggsr",
        _ => "custom",
    }
}

/// Opening a token index: refused (saying what the store lacks) or a failed read.
/// `tokenizer` is the tokenizer file the index was wanted for, when the caller knows it
/// (boxed: errors stay small).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenIndexError {
    /// The store has no token index for this tokenizer.
    #[error("{path}: no token index for the tokenizer with fingerprint {fingerprint:016x} (indexed: {})", indexed_list(.indexed))]
    NotIndexed {
        /// The store directory.
        path: PathBuf,
        /// The tokenizer's fingerprint.
        fingerprint: u64,
        /// The tokenizers the store has an index for.
        indexed: Vec<TokenizerInfo>,
        /// The tokenizer file, when known (the command line names it in its hint).
        tokenizer: Option<Box<PathBuf>>,
    },
    /// The index no longer matches the store's names.
    #[error("{path}: the token index of tokenizer {} ({}) is stale: {reason}; it needs building again", .info.fingerprint, .info.name)]
    Stale {
        /// The store directory.
        path: PathBuf,
        /// The index's record.
        info: Box<TokenizerInfo>,
        /// How it differs.
        reason: StaleReason,
        /// The tokenizer file, when known (the command line names it in its hint).
        tokenizer: Option<Box<PathBuf>>,
    },
    /// `wanted` is the linearization asked for: a preset's name, or `custom`.
    #[error(
        "{path}: the token index of tokenizer {} was built with linearization {} ({}), not {wanted}",
        .info.fingerprint, .info.linearization.name, .info.linearization_fingerprint
    )]
    Linearization {
        /// The store directory.
        path: PathBuf,
        /// The index's record.
        info: Box<TokenizerInfo>,
        /// The linearization asked for.
        wanted: &'static str,
        /// The tokenizer file the suggested command names (`None`: `FILE`).
        tokenizer: Option<Box<PathBuf>>,
    },
    /// Reading the store failed.
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl TokenIndexError {
    /// Records the tokenizer file the index was wanted for (a model's `tokenizer.json`),
    /// for a caller that says how to build the index.
    pub fn with_tokenizer(mut self, file: &Path) -> TokenIndexError {
        match &mut self {
            TokenIndexError::NotIndexed { tokenizer, .. } | TokenIndexError::Stale { tokenizer, .. } | TokenIndexError::Linearization { tokenizer, .. } => {
                *tokenizer = Some(Box::new(file.to_path_buf()))
            }
            TokenIndexError::Read(_) => {}
        }
        self
    }
}

/// Why a token index no longer matches the store's names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StaleReason {
    /// The store has another number of entities or relations than when indexed.
    #[error("it covers {indexed_entities} entities and {indexed_relations} relations, the store now has {entities} and {relations}")]
    Counts {
        /// Entities when indexed.
        indexed_entities: u64,
        /// Relations when indexed.
        indexed_relations: u64,
        /// Entities now.
        entities: u64,
        /// Relations now.
        relations: u64,
    },
    /// A load changed names since the index was built.
    #[error("names were changed by a load since it was built (dictionary epoch {indexed_epoch}, now {epoch})")]
    Renamed {
        /// The dictionary epoch when indexed.
        indexed_epoch: u64,
        /// The dictionary epoch now.
        epoch: u64,
    },
}

fn indexed_list(indexed: &[TokenizerInfo]) -> String {
    if indexed.is_empty() {
        return "none".into();
    }
    indexed.iter().map(|i| format!("{} ({})", i.fingerprint, i.name)).collect::<Vec<_>>().join(", ")
}

type TrieIter<'a> = rocksdb::DBRawIteratorWithThreadMode<'a, rocksdb::DB>;

/// Skip-scan: one seek per distinct child of the node with key prefix `base`.
fn scan_children(store: &Store, it: &mut TrieIter<'_>, base: &[u8]) -> Result<Vec<u32>, ReadError> {
    let mut out = Vec::new();
    let mut skip = base.to_vec();
    it.seek(base);
    while let Some(k) = it.key() {
        if !k.starts_with(base) {
            break;
        }
        let next = k.get(base.len()..base.len() + 4).and_then(be_u32).ok_or_else(|| ReadError::corrupt(CF_TOKEN_TRIE, k, "short trie key"))?;
        if next == END {
            break; // END sorts last: no child after it
        }
        out.push(next);
        // Skip the rest of this child's subtree.
        skip.truncate(base.len());
        skip.extend_from_slice(&(next + 1).to_be_bytes());
        it.seek(&skip);
    }
    it.status().map_err(|e| store.read_error(e))?;
    Ok(out)
}

/// The ids of the names that end at the node with key prefix `base`.
fn scan_ending(store: &Store, it: &mut TrieIter<'_>, base: &[u8]) -> Result<Vec<u32>, ReadError> {
    let mut end = base.to_vec();
    end.extend_from_slice(&END.to_be_bytes());
    let mut out = Vec::new();
    it.seek(&end);
    while let Some(k) = it.key() {
        if !k.starts_with(&end) {
            break;
        }
        let id = k.get(end.len()..).and_then(be_u32).ok_or_else(|| ReadError::corrupt(CF_TOKEN_TRIE, k, "bad trie key end"))?;
        out.push(id);
        it.next();
    }
    it.status().map_err(|e| store.read_error(e))?;
    Ok(out)
}

/// A position in one side's trie, for decoding one name token by token. Keeps one RocksDB
/// iterator; moving down is one seek. Not `Send` (RocksDB iterators are not): one cursor per
/// beam and thread, made from a shared [`TokenIndex`].
pub struct TrieCursor<'a> {
    index: &'a TokenIndex,
    side: Side,
    it: TrieIter<'a>,
    /// fingerprint ++ side ++ the tokens so far.
    key: Vec<u8>,
    /// The children of this node once asked for.
    children: Option<Vec<u32>>,
}

impl TrieCursor<'_> {
    /// Which dictionary's names this cursor walks.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The number of tokens taken since the root.
    pub fn depth(&self) -> usize {
        (self.key.len() - 9) / 4
    }

    /// The tokens taken since the root.
    pub fn tokens(&self) -> Vec<u32> {
        self.key[9..].chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    /// Moves down by `token` when some name continues with it (true); otherwise stays (false).
    pub fn advance(&mut self, token: u32) -> Result<bool, ReadError> {
        if token == END {
            return Ok(false);
        }
        let ok = match &self.children {
            Some(c) => c.binary_search(&token).is_ok(),
            None if self.depth() == 0 => self.index.root_children(self.side)?.binary_search(&token).is_ok(),
            None => {
                let len = self.key.len();
                self.key.extend_from_slice(&token.to_be_bytes());
                self.it.seek(&self.key);
                let hit = self.it.key().is_some_and(|k| k.starts_with(&self.key));
                self.it.status().map_err(|e| self.index.store.read_error(e))?;
                self.key.truncate(len);
                hit
            }
        };
        if ok {
            self.key.extend_from_slice(&token.to_be_bytes());
            self.children = None;
        }
        Ok(ok)
    }

    /// The tokens that continue this node, ascending.
    pub fn children(&mut self) -> Result<&[u32], ReadError> {
        if self.children.is_none() {
            let c = if self.depth() == 0 { self.index.root_children(self.side)?.to_vec() } else { scan_children(&self.index.store, &mut self.it, &self.key)? };
            self.children = Some(c);
        }
        Ok(self.children.as_deref().unwrap_or_default())
    }

    /// The ids whose whole name ends at this node, ascending.
    pub fn ending(&mut self) -> Result<Vec<u32>, ReadError> {
        scan_ending(&self.index.store, &mut self.it, &self.key)
    }

    /// Back to the root (keeps the iterator).
    pub fn reset(&mut self) {
        self.key.truncate(9);
        self.children = None;
    }
}

impl Store {
    /// The tokenizers whose token index this store holds.
    pub fn tokenizers(&self) -> Result<Vec<TokenizerInfo>, ReadError> {
        let mut out = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_TOKENIZERS));
        it.seek_to_first();
        while let Some((k, v)) = it.item() {
            out.push(serde_json::from_slice(v).map_err(|e| ReadError::json(CF_TOKENIZERS, k, "tokenizer", e))?);
            it.next();
        }
        it.status().map_err(|e| self.read_error(e))?;
        Ok(out)
    }

    /// The record of the tokenizer with fingerprint `fp` (`None`: not indexed).
    pub fn tokenizer_info(&self, fp: u64) -> Result<Option<TokenizerInfo>, ReadError> {
        let key = tokenizer_key(fp);
        match self.db().get_pinned_cf(self.cf(CF_TOKENIZERS), key).map_err(|e| self.read_error(e))? {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v).map(Some).map_err(|e| ReadError::json(CF_TOKENIZERS, &key, "tokenizer", e)),
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
