//! Dense retrieval (SURGE's bi-encoder baseline): the dialog embedded once, every
//! candidate path verbalized ("head relation tail ...") and embedded, paths ranked by the
//! inner product; and the same relevance for PCST's prizes. Path and name vectors are kept
//! in a bounded cache shared by every call; since an input's vector does not depend on the
//! batch it ran in (`model::encoder`), a cached vector is the one a fresh run gives.

use crate::dialog::Message;
use crate::model::encoder::{pooling, BiEncoder, EncoderError};
use crate::model::session::RuntimeOptions;
use crate::vectors::{StoredVectors, VectorKey, VectorsError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Vectors kept by default: a 2-hop candidate set is a few hundred paths, a turn's
/// neighbours share most of them; 200k vectors of 384 floats are about 300 MB.
pub const DEFAULT_CACHE: usize = 200_000;

/// How to build a dense retriever (or PCST's dense prizes).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DenseOptions {
    /// The bi-encoder's directory (`trellis.json` task `dense`; `schema/model.md`).
    pub model: PathBuf,
    /// ONNX Runtime's device, threads and sessions.
    pub runtime: RuntimeOptions,
    /// Texts embedded together at most.
    pub batch: usize,
    /// Vectors kept between calls (0: none).
    pub cache: usize,
    /// How the dense retriever scores a path (PCST's dense prizes always score facts).
    pub paths: DensePaths,
}

/// How the dense retriever scores a path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DensePaths {
    /// The inner product of the query with the vector of the path's whole text (SURGE's
    /// bi-encoder baseline).
    #[default]
    Text,
    /// The mean over the path's facts of the inner product of the query with the fact's
    /// vector: a fact's vector serves every path through it, and `trellis index-vectors`
    /// can compute them all once (`crate::vectors`).
    Facts,
}

impl DensePaths {
    /// The names (`text`, `facts`).
    pub const NAMES: &'static [&'static str] = &["text", "facts"];

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            DensePaths::Text => "text",
            DensePaths::Facts => "facts",
        }
    }
}

impl std::str::FromStr for DensePaths {
    type Err = crate::limits::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(DensePaths::Text),
            "facts" => Ok(DensePaths::Facts),
            _ => Err(crate::limits::UnknownName { what: "dense paths", value: s.to_owned(), allowed: DensePaths::NAMES }),
        }
    }
}

impl DenseOptions {
    /// Options for the model at `model`: batches of 32, a cache of [`DEFAULT_CACHE`].
    pub fn new(model: impl Into<PathBuf>) -> DenseOptions {
        DenseOptions {
            model: model.into(),
            runtime: RuntimeOptions::default(),
            batch: crate::model::encoder::DEFAULT_BATCH,
            cache: DEFAULT_CACHE,
            paths: DensePaths::default(),
        }
    }

    /// Every numeric setting within its range of `crate::limits`.
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        crate::limits::BATCH.check_usize(self.batch)?;
        crate::limits::DENSE_CACHE.check_usize(self.cache)?;
        crate::limits::check_runtime(self.runtime.threads, self.runtime.sessions)
    }
}

/// The query text of a dialog for an encoder: the last `turns` messages (0: all), newest
/// first, joined by `" | "`. Newest first, so that the tokenizer's cut (from the right, as
/// sentence-transformers cuts) drops the oldest words, never the last message's.
pub fn query_text(history: &[Message], turns: usize) -> String {
    let start = if turns == 0 { 0 } else { history.len().saturating_sub(turns) };
    history[start..].iter().rev().map(|m| m.text.as_str()).collect::<Vec<_>>().join(" | ")
}

/// A bounded map from text to vector: two generations; a hit in the old one moves to the
/// new; when the new one holds half the bound, the old one is dropped and the new one
/// becomes old. So at most `bound` vectors, recently used ones kept, no per-hit
/// bookkeeping.
pub(crate) struct VectorCache {
    bound: usize,
    new: HashMap<String, Arc<[f32]>>,
    old: HashMap<String, Arc<[f32]>>,
}

impl VectorCache {
    pub(crate) fn new(bound: usize) -> VectorCache {
        VectorCache { bound, new: HashMap::new(), old: HashMap::new() }
    }

    pub(crate) fn get(&mut self, text: &str) -> Option<Arc<[f32]>> {
        if let Some(v) = self.new.get(text) {
            return Some(v.clone());
        }
        let (k, v) = self.old.remove_entry(text)?;
        self.insert(k, v.clone());
        Some(v)
    }

    pub(crate) fn insert(&mut self, text: String, v: Arc<[f32]>) {
        if self.bound == 0 {
            return;
        }
        if self.new.len() >= self.bound.div_ceil(2) {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(text, v);
    }

    pub(crate) fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }
}

/// A bi-encoder with its vector cache: what the `dense` retriever and PCST's dense prizes
/// score with.
pub struct DenseScorer {
    encoder: BiEncoder,
    cache: Mutex<VectorCache>,
    /// The model's identity for vector files (`crate::vectors::model_id`), once asked for.
    id: std::sync::OnceLock<u64>,
    /// Where the encoder runs: part of that identity.
    device: crate::model::session::Device,
}

impl std::fmt::Debug for DenseScorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseScorer").field("encoder", &self.encoder).finish()
    }
}

impl DenseScorer {
    /// Loads the bi-encoder.
    pub fn open(opts: &DenseOptions) -> Result<DenseScorer, EncoderError> {
        Ok(DenseScorer {
            encoder: BiEncoder::open(&opts.model, &opts.runtime, opts.batch)?,
            cache: Mutex::new(VectorCache::new(opts.cache)),
            id: Default::default(),
            device: opts.runtime.device,
        })
    }

    /// The identity of this model's vectors ([`crate::vectors::model_id`]: a hash of its
    /// files, read once).
    pub fn vectors_id(&self) -> Result<u64, VectorsError> {
        if let Some(id) = self.id.get() {
            return Ok(*id);
        }
        let id = crate::vectors::model_id(self.encoder.dir(), self.device)?;
        Ok(*self.id.get_or_init(|| id))
    }

    /// The bi-encoder.
    pub fn encoder(&self) -> &BiEncoder {
        &self.encoder
    }

    /// The query vector of the last `turns` messages ([`query_text`]).
    pub fn query(&self, history: &[Message], turns: usize) -> Result<Vec<f32>, EncoderError> {
        let text = query_text(history, turns);
        Ok(self.encoder.embed_queries(&[text.as_str()])?.pop().unwrap_or_default())
    }

    /// The document vectors of `texts`, from the cache where it has them; the others
    /// embedded together, then cached.
    pub fn documents(&self, texts: &[String]) -> Result<Vec<Arc<[f32]>>, EncoderError> {
        let mut out: Vec<Option<Arc<[f32]>>> = Vec::with_capacity(texts.len());
        let mut missing: Vec<usize> = Vec::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for (i, t) in texts.iter().enumerate() {
                let hit = cache.get(t);
                if hit.is_none() {
                    missing.push(i);
                }
                out.push(hit);
            }
        }
        // A text twice in one call is embedded once.
        let mut unique: Vec<&str> = Vec::new();
        let mut slot: HashMap<&str, usize> = HashMap::new();
        for &i in &missing {
            let t = texts[i].as_str();
            slot.entry(t).or_insert_with(|| {
                unique.push(t);
                unique.len() - 1
            });
        }
        if !unique.is_empty() {
            let vectors: Vec<Arc<[f32]>> = self.encoder.embed_documents(&unique)?.into_iter().map(Arc::from).collect();
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for (t, v) in unique.iter().zip(&vectors) {
                cache.insert((*t).to_owned(), v.clone());
            }
            for &i in &missing {
                out[i] = Some(vectors[slot[texts[i].as_str()]].clone());
            }
        }
        Ok(out.into_iter().map(|v| v.expect("every text has its vector")).collect())
    }

    /// The document vectors of `texts`, each the text of `keys`' entity or fact: from the
    /// cache, else from `stored` where it holds a vector computed from the same text (as
    /// the encoder would give it: a vector does not depend on its batch), else embedded.
    /// `width` is the query vectors' width: a file of another is refused.
    pub fn keyed_documents(&self, keys: &[VectorKey], texts: &[String], stored: Option<&StoredVectors>, width: usize) -> Result<Vec<Arc<[f32]>>, VectorsError> {
        let Some(stored) = stored else { return Ok(self.documents(texts)?) };
        stored.check_width(width)?;
        let mut out: Vec<Option<Arc<[f32]>>> = Vec::with_capacity(texts.len());
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for t in texts {
                out.push(cache.get(t));
            }
        }
        let mut missing: Vec<usize> = Vec::new();
        let mut found: Vec<(usize, Arc<[f32]>)> = Vec::new();
        for (i, (k, t)) in keys.iter().zip(texts).enumerate() {
            if out[i].is_some() {
                continue;
            }
            match stored.get(*k, t)? {
                Some(v) => found.push((i, Arc::from(v))),
                None => missing.push(i),
            }
        }
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for (i, v) in found {
                cache.insert(texts[i].clone(), v.clone());
                out[i] = Some(v);
            }
        }
        if !missing.is_empty() {
            let rest: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
            for (i, v) in missing.into_iter().zip(self.documents(&rest)?) {
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().map(|v| v.expect("every text has its vector")).collect())
    }

    /// The inner product of the query of the last `turns` messages with each text.
    pub fn scores(&self, history: &[Message], turns: usize, texts: &[String]) -> Result<Vec<f64>, EncoderError> {
        let q = self.query(history, turns)?;
        Ok(self.documents(texts)?.iter().map(|d| pooling::dot(&q, d)).collect())
    }

    /// The query vectors of the last 1..=L messages (L = `turns`, at least 1, at most the
    /// history): what [`mean_over_last_turns`](Self::mean_over_last_turns) averages over,
    /// computed once for all the texts of a request.
    pub fn queries_over_last_turns(&self, history: &[Message], turns: usize) -> Result<Vec<Vec<f32>>, EncoderError> {
        let turns = turns.max(1).min(history.len().max(1));
        let texts: Vec<String> = (1..=turns).map(|l| query_text(history, l)).collect();
        self.encoder.embed_queries(&texts.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Seed 003's relevance with a dense model in place of BM25: the mean over the query
    /// vectors of the last 1..=L messages ([`queries_over_last_turns`](Self::queries_over_last_turns))
    /// of the inner product with each text's vector.
    pub fn mean_over_last_turns(&self, texts: &[String], queries: &[Vec<f32>]) -> Result<Vec<f64>, EncoderError> {
        let docs = self.documents(texts)?;
        Ok(Self::mean_dots(&docs, queries))
    }

    /// [`mean_over_last_turns`](Self::mean_over_last_turns) with the vectors of
    /// [`keyed_documents`](Self::keyed_documents).
    pub fn keyed_mean_over_last_turns(
        &self,
        keys: &[VectorKey],
        texts: &[String],
        queries: &[Vec<f32>],
        stored: Option<&StoredVectors>,
    ) -> Result<Vec<f64>, VectorsError> {
        let width = queries.first().map_or(0, Vec::len);
        let docs = self.keyed_documents(keys, texts, stored, width)?;
        Ok(Self::mean_dots(&docs, queries))
    }

    fn mean_dots(docs: &[Arc<[f32]>], queries: &[Vec<f32>]) -> Vec<f64> {
        docs.iter().map(|d| queries.iter().map(|q| pooling::dot(q, d)).sum::<f64>() / queries.len().max(1) as f64).collect()
    }

    /// Vectors in the cache now.
    pub fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32) -> Arc<[f32]> {
        Arc::from(vec![x])
    }

    #[test]
    fn the_cache_stays_within_its_bound_and_keeps_what_is_used() {
        let mut c = VectorCache::new(4);
        for (i, t) in ["a", "b"].iter().enumerate() {
            c.insert((*t).into(), v(i as f32));
        }
        // "a" and "b" fill the new half; "c" moves them to the old one.
        c.insert("c".into(), v(2.0));
        assert_eq!(c.len(), 3);
        // A hit in the old generation moves "a" to the new one ...
        assert_eq!(c.get("a").as_deref(), Some(&[0.0f32][..]));
        // ... so when "d" starts a new generation, "a" and "c" survive in the old one.
        c.insert("d".into(), v(3.0));
        assert!(c.len() <= 4);
        assert!(c.get("b").is_none(), "b, unused, is gone");
        assert_eq!(c.get("a").as_deref(), Some(&[0.0f32][..]));
        assert_eq!(c.get("c").as_deref(), Some(&[2.0f32][..]));
        for i in 0..100 {
            c.insert(format!("x{i}"), v(i as f32));
            assert!(c.len() <= 4);
        }
        let mut none = VectorCache::new(0);
        none.insert("a".into(), v(1.0));
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn queries_put_the_newest_message_first() {
        let h: Vec<Message> = ["first", "second", "third"].iter().map(|t| Message { speaker: "user".into(), text: (*t).into() }).collect();
        assert_eq!(query_text(&h, 2), "third | second");
        assert_eq!(query_text(&h, 0), "third | second | first");
        assert_eq!(query_text(&h, 9), "third | second | first");
        assert_eq!(query_text(&[], 3), "");
    }
}
