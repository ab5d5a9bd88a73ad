//! `trellis validate`'s check of the vector files of a store's current generation: each
//! opens as a vector file (header, length, sorted keys), names in its header the model its
//! file name does, and every record is read back: those whose hash matches the text the
//! store gives its key now (and the floats read) are counted. The others are not errors:
//! an update that renamed an entity, or a damaged float, leaves records a retriever
//! recomputes at query time, so the count says how much of the file still saves work.

use super::{fact_text, record_hash, StoredVectors, VectorFileHeader, VectorsError, HEADER, VECTORS_DIR};
use crate::ids::{EntityId, RelationId};
use crate::store::Store;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Records read back between two batched name reads.
const BATCH: usize = 4096;

/// One vector file as `validate` found it.
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct VectorFileCheck {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: VectorFileHeader,
    /// Records whose stored hash matches the store's text of their key now and their floats.
    pub matching: u64,
    /// Records that do not (recomputed when asked for).
    pub stale: u64,
}

/// Checks every vector file of the store's current generation (none: an empty list). A
/// file that does not open, or whose header names another model than its file name, is an
/// error naming it.
pub fn validate(store: &Store) -> Result<Vec<VectorFileCheck>, VectorsError> {
    let folder = store.generation_dir().join(VECTORS_DIR);
    if !folder.is_dir() {
        return Ok(Vec::new());
    }
    let io = |e| VectorsError::Io { path: folder.clone(), source: e };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder).map_err(io)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>().map_err(io)?;
    files.retain(|p| p.extension().is_some_and(|x| x == "vec"));
    files.sort();
    let mut out = Vec::with_capacity(files.len());
    for path in files {
        let v = StoredVectors::open_file(&path)?;
        let named = path.file_stem().and_then(|s| s.to_str()).and_then(|s| u64::from_str_radix(s, 16).ok());
        if named != Some(v.header.model) {
            return Err(VectorsError::Model { path, found: v.header.model, expected: named.unwrap_or(0) });
        }
        let (matching, stale) = count_matching(store, &v)?;
        out.push(VectorFileCheck { path, header: v.header, matching, stale });
    }
    Ok(out)
}

fn count_matching(store: &Store, v: &StoredVectors) -> Result<(u64, u64), VectorsError> {
    let relations: Vec<RelationId> = (0..u32::try_from(store.relation_count()).unwrap_or(u32::MAX)).map(RelationId).collect();
    let relation_names: Vec<Option<String>> = store.relation_names(&relations)?;
    let record = v.header.record_len() as usize;
    let mut buf = Vec::new();
    let (mut matching, mut stale) = (0u64, 0u64);
    let mut check = |first: usize, texts: &[Option<String>]| -> Result<(), VectorsError> {
        buf.resize(record * texts.len(), 0);
        v.file.read_exact_at(&mut buf, HEADER + (first * record) as u64).map_err(|e| VectorsError::Io { path: v.path.clone(), source: e })?;
        for (rec, text) in buf.chunks_exact(record).zip(texts) {
            let stored = u64::from_be_bytes(rec[..8].try_into().expect("8 bytes"));
            if text.as_deref().is_some_and(|t| stored == record_hash(t, &rec[8..])) {
                matching += 1;
            } else {
                stale += 1;
            }
        }
        Ok(())
    };
    for (i, chunk) in v.entities.chunks(BATCH).enumerate() {
        let ids: Vec<EntityId> = chunk.iter().map(|&e| EntityId(e)).collect();
        check(i * BATCH, &store.entity_names(&ids)?)?;
    }
    for (i, chunk) in v.facts.chunks(BATCH).enumerate() {
        let mut ends: Vec<EntityId> = chunk.iter().flat_map(|k| [EntityId(k[0]), EntityId(k[2])]).collect();
        ends.sort_unstable();
        ends.dedup();
        let names: hashbrown::HashMap<EntityId, Option<String>> = ends.iter().copied().zip(store.entity_names(&ends)?).collect();
        let name = |e: u32| names.get(&EntityId(e)).cloned().flatten();
        let texts: Vec<Option<String>> = chunk
            .iter()
            .map(|k| {
                let relation = relation_names.get(k[1] as usize).cloned().flatten()?;
                Some(fact_text(&name(k[0])?, &relation, &name(k[2])?))
            })
            .collect();
        check(v.entities.len() + i * BATCH, &texts)?;
    }
    Ok((matching, stale))
}
