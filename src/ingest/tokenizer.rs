//! Entity and relation names as the retriever writes them: token ids in linearization
//! context.
//!
//! A name inside a linearized path sits between boundary tokens (`[Head] name [Int1]`).
//! With T5's Metaspace pre-tokenizer and added special tokens, the ids of a name depend on
//! that context (the special tokens split the text; the spaces around the name become `▁`
//! pieces), so names are encoded *in context* and the ids between the two boundaries are
//! kept: exactly what the model emits for the name inside a path. The index encodes every
//! name in the first slot of its side ([`Linearization::slots`]) and checks, on a sample,
//! that the other slots give the same ids.

use crate::linearize::{Linearization, Side, Slot};
use std::path::PathBuf;
use tokenizers::Tokenizer;

pub use crate::linearize::fnv1a64;

/// Loading a tokenizer or encoding names with it. Strings here are data (a token, a
/// name, the text encoded), never a message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// The tokenizer file cannot be read.
    #[error("{path}: cannot load the tokenizer: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A directory, FIFO or device in place of the file, or a file over the limit.
    #[error("{path}: cannot load the tokenizer: {problem}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is in its place.
        problem: crate::files::FileProblem,
    },
    /// The tokenizer file is not JSON.
    #[error("{path}: cannot load the tokenizer: not JSON: {source}")]
    NotJson {
        /// The file.
        path: PathBuf,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// The `tokenizers` crate refused the file (its error type is a boxed error).
    #[error("{path}: cannot load the tokenizer: {source}")]
    Load {
        /// The file.
        path: PathBuf,
        /// The `tokenizers` crate's error.
        source: crate::BackendError,
    },
    /// The tokenizer cannot be written out to be stored with its index.
    #[error("cannot store the tokenizer with its index: {source}")]
    Serialize {
        /// The `tokenizers` crate's error.
        source: crate::BackendError,
    },
    /// The tokenizer stored with a token index does not load (the store is damaged).
    #[error("the tokenizer stored with token index {fingerprint:016x} does not load: {source}")]
    Stored {
        /// The index's fingerprint.
        fingerprint: u64,
        /// The `tokenizers` crate's error.
        source: crate::BackendError,
    },
    /// A boundary token of the linearization is not in the vocabulary.
    #[error("the tokenizer has no token {token:?}; it is needed for the {role} boundary of linearization {linearization:?} (give a linearization whose boundaries the tokenizer has)")]
    MissingBoundary {
        /// The token.
        token: String,
        /// Which boundary needs it.
        role: String,
        /// The linearization's name.
        linearization: String,
    },
    /// The tokenizer failed on a text.
    #[error("tokenizing {text:?}: {source}")]
    Encode {
        /// The text.
        text: String,
        /// The `tokenizers` crate's error.
        source: crate::BackendError,
    },
    /// A name's context boundaries are not found in its encoding (the name merged with them).
    #[error("tokenizing {text:?}: the boundary tokens did not survive tokenization")]
    LostBoundary {
        /// The text encoded.
        text: String,
    },
    /// A name is written with other ids in another position of its side.
    #[error("{0}")]
    PositionDependent(Box<PositionDependence>),
}

/// A name whose ids differ between two positions of its side (boxed: errors stay small).
#[derive(Debug, thiserror::Error)]
#[error(
    "the tokenizer writes the {side:?} name {name:?} as {first:?} after {first_open:?} but {other:?} after {other_open:?}; \
     the token index needs the same ids at every position of a side"
)]
pub struct PositionDependence {
    /// Entity or relation.
    pub side: Side,
    /// The name.
    pub name: String,
    /// The boundary before its first position.
    pub first_open: String,
    /// Its ids there.
    pub first: Vec<u32>,
    /// The boundary before the other position.
    pub other_open: String,
    /// Its ids there.
    pub other: Vec<u32>,
}

/// A tokenizer that writes entity and relation names as token ids, each in its
/// linearization context, under a fingerprint that names it in the store.
pub struct NameTokenizer {
    tokenizer: Tokenizer,
    fingerprint: u64,
    linearization: Linearization,
}

impl NameTokenizer {
    /// Loads a Hugging Face `tokenizer.json`. The fingerprint is taken over its canonical
    /// JSON (keys sorted), so formatting does not change it. Every boundary token of the
    /// linearization must be one token of the vocabulary.
    pub fn from_file(path: &std::path::Path, linearization: Linearization) -> Result<NameTokenizer, TokenizerError> {
        use crate::files::{read_limited, FileProblem, TOKENIZER_LIMIT};
        let bytes = read_limited(path, TOKENIZER_LIMIT).map_err(|problem| match problem {
            FileProblem::Io(source) => TokenizerError::Read { path: path.into(), source },
            problem => TokenizerError::File { path: path.into(), problem },
        })?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|source| TokenizerError::NotJson { path: path.into(), source })?;
        let fingerprint = fnv1a64(value.to_string().as_bytes());
        let tokenizer =
            Tokenizer::from_bytes(&bytes).map_err(|source| TokenizerError::Load { path: path.into(), source: crate::backend::tokenizers(source) })?;
        Self::new(tokenizer, fingerprint, linearization)
    }

    /// The tokenizer stored with the token index of fingerprint `fingerprint` (format 4).
    pub(crate) fn from_json(json: &str, fingerprint: u64, linearization: Linearization) -> Result<NameTokenizer, TokenizerError> {
        let tokenizer: Tokenizer = json.parse().map_err(|source| TokenizerError::Stored { fingerprint, source: crate::backend::tokenizers(source) })?;
        Self::new(tokenizer, fingerprint, linearization)
    }

    /// A tokenizer built in memory (benches, tools); `fingerprint` names it in the store.
    pub fn new(tokenizer: Tokenizer, fingerprint: u64, linearization: Linearization) -> Result<NameTokenizer, TokenizerError> {
        for (role, tokens) in linearization.boundaries() {
            for t in tokens {
                if tokenizer.token_to_id(t).is_none() {
                    return Err(TokenizerError::MissingBoundary { token: t.clone(), role, linearization: linearization.name.clone() });
                }
            }
        }
        Ok(NameTokenizer { tokenizer, fingerprint, linearization })
    }

    /// The fingerprint (FNV-1a 64 of the canonical JSON, for a file), the key of its token index.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The linearization names are written in.
    pub fn linearization(&self) -> &Linearization {
        &self.linearization
    }

    /// The vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// The underlying `tokenizers` tokenizer.
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn ids_of(&self, tokens: &[String]) -> Vec<u32> {
        tokens.iter().map(|t| self.tokenizer.token_to_id(t).expect("checked in new")).collect()
    }

    /// Token ids of each name as written inside a path, at the index's slot (parallel
    /// over the batch).
    pub fn encode(&self, side: Side, names: &[&str]) -> Result<Vec<Vec<u32>>, TokenizerError> {
        self.encode_in(side, self.linearization.slots(side)[0], names)
    }

    /// Token ids of each name between the boundaries of `slot`.
    pub fn encode_in(&self, side: Side, slot: Slot<'_>, names: &[&str]) -> Result<Vec<Vec<u32>>, TokenizerError> {
        let texts: Vec<String> = names.iter().map(|n| self.linearization.in_slot(side, slot, n)).collect();
        let encodings = self
            .tokenizer
            .encode_batch(texts.clone(), false)
            .map_err(|source| TokenizerError::Encode { text: texts.first().cloned().unwrap_or_default(), source: crate::backend::tokenizers(source) })?;
        let (open, close) = (self.ids_of(slot.open), self.ids_of(slot.close));
        encodings
            .iter()
            .zip(&texts)
            .map(|(enc, text)| between(enc.get_ids(), &open, &close).map(<[u32]>::to_vec).ok_or_else(|| TokenizerError::LostBoundary { text: text.clone() }))
            .collect()
    }

    /// Encodes `names` at every slot of `side` and fails on the first name whose ids differ
    /// from those of the index's slot.
    pub fn check_position_independent(&self, side: Side, names: &[&str]) -> Result<(), TokenizerError> {
        let slots = self.linearization.slots(side);
        let first = self.encode_in(side, slots[0], names)?;
        for slot in &slots[1..] {
            let other = self.encode_in(side, *slot, names)?;
            if let Some(i) = (0..names.len()).find(|&i| first[i] != other[i]) {
                return Err(TokenizerError::PositionDependent(Box::new(PositionDependence {
                    side,
                    name: names[i].to_owned(),
                    first_open: slots[0].open.concat(),
                    first: first[i].clone(),
                    other_open: slot.open.concat(),
                    other: other[i].clone(),
                })));
            }
        }
        Ok(())
    }
}

/// The ids strictly between the first occurrence of `open` and the next of `close`.
fn between<'a>(ids: &'a [u32], open: &[u32], close: &[u32]) -> Option<&'a [u32]> {
    let start = ids.windows(open.len()).position(|w| w == open)? + open.len();
    let len = ids[start..].windows(close.len()).position(|w| w == close)?;
    Some(&ids[start..start + len])
}

#[cfg(test)]
mod tests {
    #[test]
    fn between_finds_multi_token_boundaries() {
        assert_eq!(super::between(&[9, 1, 2, 5, 6, 7, 3, 4, 8], &[1, 2], &[3, 4]), Some(&[5, 6, 7][..]));
        assert_eq!(super::between(&[1, 2, 3, 4], &[1, 2], &[3, 4]), Some(&[][..]));
        assert_eq!(super::between(&[1, 3, 4], &[1, 2], &[3, 4]), None);
        assert_eq!(super::between(&[1, 2, 5], &[1, 2], &[3, 4]), None);
    }

    #[test]
    fn a_bad_tokenizer_file_is_named_with_what_is_wrong() {
        use super::{NameTokenizer, TokenizerError};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tok.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let e = NameTokenizer::from_file(&path, crate::linearize::Linearization::trellis()).err().expect("refused");
        assert!(e.to_string().starts_with(&format!("{}: cannot load the tokenizer: not JSON: ", path.display())), "{e}");
        assert!(matches!(&e, TokenizerError::NotJson { path: p, .. } if *p == path), "{e:?}");
        // Valid JSON that is no tokenizer: the tokenizers crate's own error, kept as the source.
        std::fs::write(&path, b"{}").unwrap();
        let e = NameTokenizer::from_file(&path, crate::linearize::Linearization::trellis()).err().expect("refused");
        assert!(matches!(e, TokenizerError::Load { .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
        let e = NameTokenizer::from_file(&dir.path().join("missing.json"), crate::linearize::Linearization::trellis()).err().expect("refused");
        assert!(matches!(&e, TokenizerError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound), "{e:?}");
        // `--tokenizer` names a device or a directory: refused before reading, by what it is.
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.json")).unwrap();
        let e = NameTokenizer::from_file(&dir.path().join("zero.json"), crate::linearize::Linearization::trellis()).err().expect("refused");
        assert_eq!(
            e.to_string(),
            format!("{}: cannot load the tokenizer: is not a regular file (a FIFO, socket or device)", dir.path().join("zero.json").display())
        );
        let e = NameTokenizer::from_file(dir.path(), crate::linearize::Linearization::trellis()).err().expect("refused");
        assert!(matches!(&e, TokenizerError::File { problem: crate::files::FileProblem::Directory, .. }), "{e:?}");
    }
}
