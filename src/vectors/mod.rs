//! Persisted dense vectors of a store's facts and entity names (`trellis index-vectors`):
//! what a bi-encoder gives each fact's "head relation tail" text and each entity's name,
//! computed once and kept in the store's generation directory, so that PCST's dense prizes
//! and the dense retriever's fact-by-fact scores (`dense_paths facts`) read them instead
//! of running the encoder on every turn's candidates.
//!
//! The file is an accelerator, never a source of answers: each vector is stored with a
//! hash of the text it was computed from and of its own floats, and is used only when the
//! text the retriever writes now and the floats read back give that hash. A fact added by
//! a later update, one whose entity was renamed, or a record damaged on disk is embedded
//! at query time, and since an encoder's vector of a text does not depend on its batch
//! (`model::encoder`), answers are the same bits with or without the file, on the same
//! ONNX Runtime build and device (the device is part of the file's identity, [`model_id`]).
//! Format: schema/v4.md, "The vector index".

pub mod build;
mod validate;

use crate::ids::{EntityId, RelationId};
use crate::model::encoder::EncoderDir;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use build::{index_vectors, VectorIndexReport, VectorOptions};
pub use validate::{validate, VectorFileCheck};

/// The directory of vector files inside a generation.
pub use crate::store::generation::VECTORS_DIR;

/// The file format this build writes and reads.
pub const VECTORS_FORMAT: u32 = 2;

const MAGIC: &[u8; 8] = b"TRLSVEC\0";
const HEADER: u64 = 64;

/// What a vector belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VectorKey {
    /// An entity's name.
    Entity(EntityId),
    /// A fact (subject, relation, object) in its stored direction.
    Fact(EntityId, RelationId, EntityId),
}

/// A fact's text as the dense retriever and PCST's dense prizes write it: "head relation
/// tail", the relation as the default linearization writes it (lowercased, `_`/`-` as spaces).
pub fn fact_text(head: &str, relation: &str, tail: &str) -> String {
    static TRELLIS: std::sync::LazyLock<crate::linearize::Linearization> = std::sync::LazyLock::new(crate::linearize::Linearization::trellis);
    format!("{head} {} {tail}", TRELLIS.relation_text(relation))
}

/// The identity of a bi-encoder's vectors: a hash of its graph, its tokenizer, every
/// setting that changes a document's vector (prefix, length, pooling, normalization) and
/// the device it runs on (CUDA's kernels may round differently from the CPU's: vectors
/// written on one are not taken for the other's). The files are read in parts.
pub fn model_id(dir: &EncoderDir, device: crate::model::session::Device) -> Result<u64, VectorsError> {
    use crate::linearize::fnv1a64_more;
    use std::io::Read;
    let mut h = crate::linearize::fnv1a64(b"trellis vectors");
    let mut buf = vec![0u8; 1 << 16];
    for path in [dir.model_file().to_path_buf(), dir.path().join("tokenizer.json")] {
        let io = |e| VectorsError::Io { path: path.clone(), source: e };
        let mut f = File::open(&path).map_err(io)?;
        h = fnv1a64_more(h, &f.metadata().map_err(io)?.len().to_be_bytes());
        loop {
            let n = f.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            h = fnv1a64_more(h, &buf[..n]);
        }
    }
    let settings = format!("{}|{}|{}|{}|{device}", dir.document_prefix(), dir.max_length(), dir.pooling().name(), dir.normalize());
    Ok(fnv1a64_more(h, settings.as_bytes()))
}

/// The file of `model`'s vectors in the generation at `generation_dir`.
pub fn file_path(generation_dir: &Path, model: u64) -> PathBuf {
    generation_dir.join(VECTORS_DIR).join(format!("{model:016x}.vec"))
}

/// The hash stored with a vector: of the text it was computed from, then of the vector's
/// stored bytes (so a damaged float is caught like a changed text).
pub(crate) fn record_hash(text: &str, floats: &[u8]) -> u64 {
    crate::linearize::fnv1a64_more(crate::linearize::fnv1a64(text.as_bytes()), floats)
}

/// What went wrong with a vector file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VectorsError {
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The file does not read as a vector file of this build.
    #[error("{path}: corrupt vector file: {problem}; rebuild it with `trellis index-vectors`")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: VectorFileProblem,
    },
    /// Written by a build with another format.
    #[error("{path}: vector file format {found}, this build reads format {expected}; rebuild it with `trellis index-vectors`")]
    Format {
        /// The file.
        path: PathBuf,
        /// Its format.
        found: u32,
        /// This build's.
        expected: u32,
    },
    /// The file is not the one of the model asked for (its header names another).
    #[error("{path}: written for model {found:016x}, not {expected:016x}; rebuild it with `trellis index-vectors`")]
    Model {
        /// The file.
        path: PathBuf,
        /// The model its header names.
        found: u64,
        /// The model asked for.
        expected: u64,
    },
    /// The file's vectors are not as wide as the model's.
    #[error("{path}: vectors of {file} floats, but the model gives {model}; rebuild it with `trellis index-vectors`")]
    Width {
        /// The file.
        path: PathBuf,
        /// The file's width.
        file: u32,
        /// The model's.
        model: usize,
    },
    /// The bi-encoder gives vectors no file can hold.
    #[error("{model}: the bi-encoder gives vectors of {dims} floats (1..=65536)")]
    ModelDims {
        /// The model directory.
        model: PathBuf,
        /// Its width.
        dims: usize,
    },
    /// The bi-encoder gave vectors of two widths.
    #[error("{model}: the bi-encoder gave vectors of {first} and of {then} floats")]
    Widths {
        /// The model directory.
        model: PathBuf,
        /// The first width.
        first: u32,
        /// A later one.
        then: u32,
    },
    /// A setting outside its range (the encoder's batch, threads, sessions).
    #[error(transparent)]
    OutOfRange(#[from] crate::limits::OutOfRange),
    /// The build was cancelled; the store is as it was.
    #[error("cancelled; the store is unchanged")]
    Cancelled,
    /// The encoder failed.
    #[error(transparent)]
    Encoder(#[from] crate::model::encoder::EncoderError),
    /// Opening the store or its writer lock.
    #[error(transparent)]
    Open(#[from] crate::store::OpenError),
    /// Reading the store.
    #[error(transparent)]
    Read(#[from] crate::store::ReadError),
    /// Writing the store.
    #[error(transparent)]
    Write(#[from] crate::store::WriteError),
}

/// What is wrong with a vector file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VectorFileProblem {
    /// Shorter than its header.
    #[error("{len} bytes, shorter than its 64-byte header")]
    Short {
        /// The file's length.
        len: u64,
    },
    /// Not a vector file.
    #[error("no vector-file magic at its start")]
    NoMagic,
    /// A width no vector has.
    #[error("{dims} floats a vector (1..=65536)")]
    Dims {
        /// The header's width.
        dims: u32,
    },
    /// Its length is not the one its header gives.
    #[error("{len} bytes, but its header says {entities} entities and {facts} facts of {dims} floats")]
    Length {
        /// The file's length.
        len: u64,
        /// The header's entity count.
        entities: u64,
        /// The header's fact count.
        facts: u64,
        /// The header's width.
        dims: u32,
    },
    /// Entity keys not strictly increasing.
    #[error("entity keys out of order at key {at}")]
    EntityOrder {
        /// The first key out of order.
        at: usize,
    },
    /// Fact keys not strictly increasing.
    #[error("fact keys out of order at key {at}")]
    FactOrder {
        /// The first key out of order.
        at: usize,
    },
}

/// The fixed-size header of a vector file (big-endian, 64 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VectorFileHeader {
    /// [`VECTORS_FORMAT`] when written.
    pub format: u32,
    /// Floats per vector.
    pub dims: u32,
    /// Entity vectors.
    pub entities: u64,
    /// Fact vectors.
    pub facts: u64,
    /// The model's identity ([`model_id`]).
    pub model: u64,
    /// Loads and updates of the store when it was written.
    pub writes: u64,
    /// The generation it was written in.
    pub generation: u64,
}

impl VectorFileHeader {
    fn encode(&self) -> [u8; HEADER as usize] {
        let mut b = [0u8; HEADER as usize];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.format.to_be_bytes());
        b[12..16].copy_from_slice(&self.dims.to_be_bytes());
        b[16..24].copy_from_slice(&self.entities.to_be_bytes());
        b[24..32].copy_from_slice(&self.facts.to_be_bytes());
        b[32..40].copy_from_slice(&self.model.to_be_bytes());
        b[40..48].copy_from_slice(&self.writes.to_be_bytes());
        b[48..56].copy_from_slice(&self.generation.to_be_bytes());
        b
    }

    fn decode(b: &[u8; HEADER as usize]) -> Option<VectorFileHeader> {
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        (&b[..8] == MAGIC).then(|| VectorFileHeader {
            format: u32_at(8),
            dims: u32_at(12),
            entities: u64_at(16),
            facts: u64_at(24),
            model: u64_at(32),
            writes: u64_at(40),
            generation: u64_at(48),
        })
    }

    /// Bytes of one record: the text hash and the floats.
    fn record_len(&self) -> u64 {
        8 + 4 * u64::from(self.dims)
    }

    /// The file's length: header, records (entities, then facts), entity ids, fact keys.
    fn file_len(&self) -> Option<u64> {
        let n = self.entities.checked_add(self.facts)?;
        HEADER.checked_add(n.checked_mul(self.record_len())?)?.checked_add(self.entities.checked_mul(4)?)?.checked_add(self.facts.checked_mul(12)?)
    }
}

/// The most floats a vector may have (a corrupt header cannot make a reader allocate more).
pub(crate) const MAX_DIMS: u32 = 1 << 16;

/// A vector file opened for lookups: its keys in memory (4 bytes an entity, 12 a fact),
/// its vectors read from the file when asked for.
#[derive(Debug)]
pub struct StoredVectors {
    path: PathBuf,
    file: File,
    header: VectorFileHeader,
    entities: Vec<u32>,
    facts: Vec<[u32; 3]>,
    /// Lookups answered from the file, and those it could not answer (no such key, or a
    /// vector of another text): how much of the work the file saves.
    hits: std::sync::atomic::AtomicU64,
    misses: std::sync::atomic::AtomicU64,
}

impl StoredVectors {
    /// Opens `model`'s vector file of the store's current generation, if it has one.
    pub fn open(store: &crate::store::Store, model: u64) -> Result<Option<StoredVectors>, VectorsError> {
        let path = file_path(store.generation_dir(), model);
        if !path.is_file() {
            return Ok(None);
        }
        let v = StoredVectors::open_file(&path)?;
        if v.header.model != model {
            return Err(VectorsError::Model { path, found: v.header.model, expected: model });
        }
        Ok(Some(v))
    }

    /// Refuses a file whose vectors are not `width` floats (the query vectors'): a dot
    /// product of two widths would quietly drop floats.
    pub fn check_width(&self, width: usize) -> Result<(), VectorsError> {
        if self.header.dims as usize != width {
            return Err(VectorsError::Width { path: self.path.clone(), file: self.header.dims, model: width });
        }
        Ok(())
    }

    /// Opens the vector file at `path`, checking its length and that its keys are sorted.
    pub fn open_file(path: &Path) -> Result<StoredVectors, VectorsError> {
        let io = |e| VectorsError::Io { path: path.into(), source: e };
        let corrupt = |problem: VectorFileProblem| VectorsError::Corrupt { path: path.into(), problem };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut head = [0u8; HEADER as usize];
        if len < HEADER {
            return Err(corrupt(VectorFileProblem::Short { len }));
        }
        file.read_exact_at(&mut head, 0).map_err(io)?;
        let header = VectorFileHeader::decode(&head).ok_or_else(|| corrupt(VectorFileProblem::NoMagic))?;
        if header.format != VECTORS_FORMAT {
            return Err(VectorsError::Format { path: path.into(), found: header.format, expected: VECTORS_FORMAT });
        }
        if header.dims == 0 || header.dims > MAX_DIMS {
            return Err(corrupt(VectorFileProblem::Dims { dims: header.dims }));
        }
        if header.file_len() != Some(len) {
            return Err(corrupt(VectorFileProblem::Length { len, entities: header.entities, facts: header.facts, dims: header.dims }));
        }
        let keys_at = len - header.entities * 4 - header.facts * 12;
        let mut raw = vec![0u8; (len - keys_at) as usize];
        file.read_exact_at(&mut raw, keys_at).map_err(io)?;
        let (ents, facts) = raw.split_at((header.entities * 4) as usize);
        let entities: Vec<u32> = ents.chunks_exact(4).map(|c| u32::from_be_bytes(c.try_into().expect("4 bytes"))).collect();
        let facts: Vec<[u32; 3]> = facts
            .chunks_exact(12)
            .map(|c| {
                let at = |i: usize| u32::from_be_bytes(c[i..i + 4].try_into().expect("4 bytes"));
                [at(0), at(4), at(8)]
            })
            .collect();
        if let Some(i) = entities.windows(2).position(|w| w[0] >= w[1]) {
            return Err(corrupt(VectorFileProblem::EntityOrder { at: i + 1 }));
        }
        if let Some(i) = facts.windows(2).position(|w| w[0] >= w[1]) {
            return Err(corrupt(VectorFileProblem::FactOrder { at: i + 1 }));
        }
        Ok(StoredVectors { path: path.into(), file, header, entities, facts, hits: Default::default(), misses: Default::default() })
    }

    /// The file's header.
    pub fn header(&self) -> &VectorFileHeader {
        &self.header
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lookups so far: (answered from the file, not answered).
    pub fn lookups(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }

    /// The vector of `key` when the file has one computed from `text` and read back whole.
    pub fn get(&self, key: VectorKey, text: &str) -> Result<Option<Vec<f32>>, VectorsError> {
        let found = self.lookup(key, text)?;
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(found)
    }

    fn lookup(&self, key: VectorKey, text: &str) -> Result<Option<Vec<f32>>, VectorsError> {
        let index = match key {
            VectorKey::Entity(e) => self.entities.binary_search(&e.0).ok(),
            VectorKey::Fact(s, r, o) => self.facts.binary_search(&[s.0, r.0, o.0]).ok().map(|i| i + self.entities.len()),
        };
        let Some(index) = index else { return Ok(None) };
        let mut rec = vec![0u8; self.header.record_len() as usize];
        self.file
            .read_exact_at(&mut rec, HEADER + index as u64 * self.header.record_len())
            .map_err(|e| VectorsError::Io { path: self.path.clone(), source: e })?;
        if u64::from_be_bytes(rec[..8].try_into().expect("8 bytes")) != record_hash(text, &rec[8..]) {
            return Ok(None);
        }
        Ok(Some(rec[8..].chunks_exact(4).map(|c| f32::from_bits(u32::from_be_bytes(c.try_into().expect("4 bytes")))).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_reads_back_and_sizes_the_file() {
        let h = VectorFileHeader { format: 1, dims: 3, entities: 2, facts: 5, model: 0xdead_beef, writes: 4, generation: 9 };
        assert_eq!(VectorFileHeader::decode(&h.encode()), Some(h));
        // 64 + 7 records of (8 + 12) + 2 * 4 + 5 * 12
        assert_eq!(h.file_len(), Some(64 + 7 * 20 + 8 + 60));
        let mut bad = h.encode();
        bad[0] = b'X';
        assert_eq!(VectorFileHeader::decode(&bad), None);
        let huge = VectorFileHeader { entities: u64::MAX, ..h };
        assert_eq!(huge.file_len(), None);
    }

    #[test]
    fn fact_texts_follow_the_linearization() {
        assert_eq!(fact_text("Forrest Gump", "starred_actors", "Tom Hanks"), "Forrest Gump starred actors Tom Hanks");
        assert_eq!(fact_text("A", "Has-Genre", "B"), "A has genre B");
    }
}
