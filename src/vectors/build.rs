//! `trellis index-vectors`: every live entity's name and every fact's text embedded by a
//! bi-encoder and written, with the hash of each text, into one file of the current
//! generation (`gen-N/vectors/<model>.vec`). The file is written beside its final name and
//! renamed over it once complete and synced, under the store's writer lock: a crash or a
//! cancel leaves the store as it was (at most a `.tmp` file the next build removes).
//! Memory: the keys (4 bytes an entity, 12 a fact) and one batch of texts and vectors.

use super::{fact_text, file_path, model_id, record_hash, VectorFileHeader, VectorsError, HEADER, MAX_DIMS, VECTORS_DIR, VECTORS_FORMAT};
use crate::ids::Direction;
use crate::ids::{EntityId, RelationId};
use crate::model::encoder::BiEncoder;
use crate::model::session::RuntimeOptions;
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::store::{layout, Store};
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// Texts embedded between progress reports and cancel checks.
const BATCH: usize = 2048;

/// Which bi-encoder `index_vectors` runs, and how (`crate::settings::vector_encoder` reads
/// them by name, as every front end gives them).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VectorOptions {
    /// The bi-encoder's directory (schema/model.md).
    pub model: PathBuf,
    /// ONNX Runtime's options.
    pub runtime: RuntimeOptions,
    /// Texts embedded together (`crate::limits::BATCH`).
    pub batch: usize,
}

impl VectorOptions {
    /// The model at `model`, on the default runtime, in batches of
    /// `crate::model::encoder::DEFAULT_BATCH`.
    pub fn new(model: impl Into<PathBuf>) -> VectorOptions {
        VectorOptions { model: model.into(), runtime: RuntimeOptions::default(), batch: crate::model::encoder::DEFAULT_BATCH }
    }

    /// Every numeric setting within its range of `crate::limits`.
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        crate::limits::BATCH.check_usize(self.batch)?;
        crate::limits::check_runtime(self.runtime.threads, self.runtime.sessions)
    }
}

/// What `index_vectors` wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VectorIndexReport {
    /// The file written.
    pub path: PathBuf,
    /// Its header.
    pub header: VectorFileHeader,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Embeds every live entity's name and every fact of the store at `dir` with the
/// bi-encoder of `opts` and writes them to the current generation's vector file of that
/// model (replacing one an earlier build wrote). `monitor` hears after every batch and,
/// once cancelled, stops the build with [`VectorsError::Cancelled`], the store unchanged.
pub fn index_vectors(dir: &Path, opts: &VectorOptions, monitor: &Monitor) -> Result<VectorIndexReport, VectorsError> {
    opts.validate()?;
    let _lock = layout::lock_existing_writer(dir)?;
    let store = Store::open_read_only(dir)?;
    let encoder = BiEncoder::open(&opts.model, &opts.runtime, opts.batch)?;
    let id = model_id(encoder.dir(), opts.runtime.device)?;
    let path = file_path(store.generation_dir(), id);
    let folder = store.generation_dir().join(VECTORS_DIR);
    if !folder.is_dir() {
        std::fs::create_dir_all(&folder).map_err(|e| VectorsError::Io { path: folder.clone(), source: e })?;
        // The folder's entry in the generation is durable before anything is renamed into it.
        layout::sync_dir(store.generation_dir())?;
    }
    remove_leftovers(&folder)?;
    let tmp = path.with_extension("vec.tmp");
    let result = write_file(&store, &encoder, id, &tmp, monitor);
    let header = match result {
        Ok(h) => h,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let committing = monitor.commit_point().map_err(|_| {
        let _ = std::fs::remove_file(&tmp);
        VectorsError::Cancelled
    })?;
    std::fs::rename(&tmp, &path).map_err(|e| VectorsError::Io { path: path.clone(), source: e })?;
    layout::sync_dir(&folder)?;
    drop(committing);
    let bytes = std::fs::metadata(&path).map_err(|e| VectorsError::Io { path: path.clone(), source: e })?.len();
    Ok(VectorIndexReport { path, header, bytes })
}

/// Removes `.tmp` files a crashed build left.
fn remove_leftovers(folder: &Path) -> Result<(), VectorsError> {
    let io = |e| VectorsError::Io { path: folder.into(), source: e };
    for entry in std::fs::read_dir(folder).map_err(io)? {
        let p = entry.map_err(io)?.path();
        if p.extension().is_some_and(|x| x == "tmp") {
            std::fs::remove_file(&p).map_err(|e| VectorsError::Io { path: p.clone(), source: e })?;
        }
    }
    Ok(())
}

struct Writer<'a> {
    out: BufWriter<std::fs::File>,
    path: &'a Path,
    encoder: &'a BiEncoder,
    dims: Option<u32>,
}

impl Writer<'_> {
    fn io(&self, e: std::io::Error) -> VectorsError {
        VectorsError::Io { path: self.path.into(), source: e }
    }

    /// Embeds `texts` and appends one record (text hash, floats) each.
    fn records(&mut self, texts: &[String]) -> Result<(), VectorsError> {
        if texts.is_empty() {
            return Ok(());
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = self.encoder.embed_documents(&refs)?;
        for (t, v) in texts.iter().zip(&vectors) {
            let dims = match u32::try_from(v.len()) {
                Ok(d) if (1..=MAX_DIMS).contains(&d) => d,
                _ => return Err(VectorsError::ModelDims { model: self.encoder.dir().path().into(), dims: v.len() }),
            };
            let first = *self.dims.get_or_insert(dims);
            if first != dims {
                return Err(VectorsError::Widths { model: self.encoder.dir().path().into(), first, then: dims });
            }
            let floats: Vec<u8> = v.iter().flat_map(|x| x.to_bits().to_be_bytes()).collect();
            self.out.write_all(&record_hash(t, &floats).to_be_bytes()).map_err(|e| self.io(e))?;
            self.out.write_all(&floats).map_err(|e| self.io(e))?;
        }
        Ok(())
    }
}

fn write_file(store: &Store, encoder: &BiEncoder, model: u64, tmp: &Path, monitor: &Monitor) -> Result<VectorFileHeader, VectorsError> {
    let file = std::fs::File::create(tmp).map_err(|e| VectorsError::Io { path: tmp.into(), source: e })?;
    let mut w = Writer { out: BufWriter::with_capacity(1 << 20, file), path: tmp, encoder, dims: None };
    w.out.write_all(&[0u8; HEADER as usize]).map_err(|e| w.io(e))?;
    let total = u32::try_from(store.entity_count()).unwrap_or(u32::MAX);
    let facts_total = store.meta().facts;

    // Step 1: entity names, by id.
    let mut entity_keys: Vec<u32> = Vec::new();
    let mut start = 0u32;
    while start < total {
        monitor.check().map_err(|_| VectorsError::Cancelled)?;
        let end = start.saturating_add(BATCH as u32).min(total);
        let ids: Vec<EntityId> = (start..end).map(EntityId).collect();
        let mut texts = Vec::new();
        for (e, name) in ids.iter().zip(store.entity_names(&ids)?) {
            if let Some(name) = name {
                entity_keys.push(e.0);
                texts.push(name);
            }
        }
        w.records(&texts)?;
        monitor.report(&Progress::new(Work::IndexVectors, (1, 2), "entity names", u64::from(end), Some(u64::from(total)), Unit::Names));
        start = end;
    }

    // Step 2: facts in key order (subject, relation, object), as the outgoing adjacency lists them.
    let relation_ids: Vec<RelationId> = (0..u32::try_from(store.relation_count()).unwrap_or(u32::MAX)).map(RelationId).collect();
    let relation_names: Vec<String> = store.relation_names(&relation_ids)?.into_iter().map(Option::unwrap_or_default).collect();
    let mut fact_keys: Vec<[u32; 3]> = Vec::new();
    let mut pending: Vec<(EntityId, RelationId, EntityId)> = Vec::new();
    let mut done = 0u64;
    let mut flush = |pending: &mut Vec<(EntityId, RelationId, EntityId)>, w: &mut Writer, fact_keys: &mut Vec<[u32; 3]>| -> Result<(), VectorsError> {
        let mut ends: Vec<EntityId> = pending.iter().flat_map(|&(s, _, o)| [s, o]).collect();
        ends.sort_unstable();
        ends.dedup();
        let names: hashbrown::HashMap<EntityId, String> =
            ends.iter().copied().zip(store.entity_names(&ends)?).map(|(e, n)| (e, n.unwrap_or_default())).collect();
        let name = |e: EntityId| names.get(&e).map_or("", String::as_str);
        let texts: Vec<String> =
            pending.iter().map(|&(s, r, o)| fact_text(name(s), relation_names.get(r.0 as usize).map_or("", String::as_str), name(o))).collect();
        w.records(&texts)?;
        fact_keys.extend(pending.iter().map(|&(s, r, o)| [s.0, r.0, o.0]));
        done += pending.len() as u64;
        pending.clear();
        monitor.report(&Progress::new(Work::IndexVectors, (2, 2), "facts", done, Some(facts_total), Unit::Facts));
        Ok(())
    };
    for s in 0..total {
        let s = EntityId(s);
        store.for_each_neighbor(s, Some(Direction::Out), None, |edge| {
            pending.push((s, edge.relation, edge.other));
            ControlFlow::Continue(())
        })?;
        if pending.len() >= BATCH {
            monitor.check().map_err(|_| VectorsError::Cancelled)?;
            flush(&mut pending, &mut w, &mut fact_keys)?;
        }
    }
    flush(&mut pending, &mut w, &mut fact_keys)?;

    for e in &entity_keys {
        w.out.write_all(&e.to_be_bytes()).map_err(|e| w.io(e))?;
    }
    for k in &fact_keys {
        for x in k {
            w.out.write_all(&x.to_be_bytes()).map_err(|e| w.io(e))?;
        }
    }
    let dims = match w.dims {
        Some(d) => d,
        // An empty store: the vector of an empty text says how wide vectors are.
        None => u32::try_from(encoder.embed_documents(&[""])?.first().map_or(0, Vec::len)).unwrap_or(u32::MAX),
    };
    let header = VectorFileHeader {
        format: VECTORS_FORMAT,
        dims,
        entities: entity_keys.len() as u64,
        facts: fact_keys.len() as u64,
        model,
        writes: store.meta().loads.len() as u64,
        generation: store.generation(),
    };
    let file = w.out.into_inner().map_err(|e| VectorsError::Io { path: tmp.into(), source: e.into_error() })?;
    file.write_all_at(&header.encode(), 0).map_err(|e| VectorsError::Io { path: tmp.into(), source: e })?;
    file.sync_all().map_err(|e| VectorsError::Io { path: tmp.into(), source: e })?;
    Ok(header)
}

use std::os::unix::fs::FileExt;
