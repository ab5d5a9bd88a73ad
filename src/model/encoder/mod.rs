//! Encoder-only models on the same runtime as the T5 models: a bi-encoder ([`BiEncoder`]:
//! a text to a vector, for dense retrieval), a cross-encoder ([`CrossEncoder`]: a
//! (query, passage) pair to a relevance logit, for reranking) and SURGE's subgraph
//! retriever ([`subgraph::SubgraphScorer`]: a dialog and a candidate subgraph to a score
//! per fact). Both are a user's optimum
//! export of a BERT-style or T5 encoder, unmodified, with a `trellis.json` naming the task
//! ([`config`]); sessions come from a pool, on the device [`RuntimeOptions`] names, built
//! as the T5 models' are.
//!
//! A row's numbers never depend on the batch it ran in: each input is padded to a length
//! fixed by its own token count (the next power of two from 8, at most `max_length`), and
//! only inputs of the same padded length share a run. (ONNX Runtime's sums change in their
//! last bits with the padded length; the T5 encoder pads to one length for the same
//! reason.) So a cached vector equals a fresh one, and an answer equals the one the request
//! gets alone.

pub mod config;
pub mod pooling;
pub mod subgraph;

pub use config::{EncoderDir, EncoderTask, Pooling};

use crate::model::dir::ModelDirError;
use crate::model::interface::{check_encoder_model, check_subgraph_model, EncoderIo, InterfaceProblem};
use crate::model::runtime::{Runtime, RuntimeError};
use crate::model::session::{builder, commit, Device, GraphReport, RuntimeOptions, Seq2SeqError};
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

/// Inputs run together at most, when the caller does not say.
pub const DEFAULT_BATCH: usize = 32;

/// Loading or running an encoder model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncoderError {
    /// ONNX Runtime could not be found or loaded.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The model directory is incomplete or malformed.
    #[error(transparent)]
    Dir(#[from] ModelDirError),
    /// Building a session failed: the device, or a graph ONNX Runtime refuses.
    #[error(transparent)]
    Session(#[from] Seq2SeqError),
    /// The graph's inputs and outputs are not an encoder's.
    #[error("the model's inputs and outputs are not an encoder's: {}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Interface {
        /// Every mismatch found.
        problems: Vec<InterfaceProblem>,
    },
    /// A text the tokenizer fails on.
    #[error("tokenizing {text:?}: {source}")]
    Tokenize {
        /// The text (data).
        text: String,
        /// The tokenizer's error.
        source: crate::BackendError,
    },
    /// A token id past the vocabulary `config.json` states (another tokenizer's file).
    #[error("{}: the tokenizer wrote id {token}, outside the model's vocabulary of {vocab}", path.display())]
    TokenOutOfRange {
        /// The model directory.
        path: PathBuf,
        /// The id.
        token: u32,
        /// config.json's `vocab_size`.
        vocab: u32,
    },
    /// A subgraph whose parts do not fit together (a caller's bug, not data).
    #[error("a subgraph model's input is inconsistent: {problem}")]
    Input {
        /// What does not fit.
        problem: InputProblem,
    },
    /// A run failed inside ONNX Runtime.
    #[error("{}: running the model failed: {source}", path.display())]
    Run {
        /// The graph file.
        path: PathBuf,
        /// ONNX Runtime's error.
        source: crate::BackendError,
    },
    /// The run returned something other than its interface promised.
    #[error("{}: output {name:?} {problem}", path.display())]
    Output {
        /// The graph file.
        path: PathBuf,
        /// The output's name.
        name: String,
        /// What is wrong with it.
        problem: OutputProblem,
    },
}

/// What does not fit in a subgraph model's input ([`EncoderError::Input`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputProblem {
    /// One mentioned flag per entity is needed.
    #[error("{flags} mentioned flags for {entities} entities")]
    MentionedFlags {
        /// Flags given.
        flags: usize,
        /// Entities given.
        entities: usize,
    },
    /// The facts' three columns differ in length.
    #[error("{heads} heads, {relations} relations, {tails} tails")]
    FactColumns {
        /// Heads given.
        heads: usize,
        /// Relations given.
        relations: usize,
        /// Tails given.
        tails: usize,
    },
    /// A fact names an entity or a relation past those given.
    #[error("a fact points outside {entities} entities and {relations} relations")]
    FactOutside {
        /// Entities given.
        entities: usize,
        /// Relations given.
        relations: usize,
    },
    /// No query tokens.
    #[error("an empty query")]
    EmptyQuery,
}

/// What is wrong with a model's output ([`EncoderError::Output`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputProblem {
    /// The graph did not return it.
    #[error("was not returned")]
    Missing,
    /// Not a float32 tensor.
    #[error("is {found}, not a float32 tensor")]
    NotFloat32 {
        /// What it is, as ONNX Runtime describes it.
        found: String,
    },
    /// A shape other than the interface's.
    #[error("has shape {found:?}, expected {expected:?}")]
    Shape {
        /// Its shape.
        found: Vec<i64>,
        /// The shape the interface promises.
        expected: Vec<i64>,
    },
    /// ONNX Runtime could not hand it to the host.
    #[error("cannot be read on the host: {0}")]
    Unreadable(#[source] crate::BackendError),
}

type Result<T, E = EncoderError> = std::result::Result<T, E>;

/// The sessions of one encoder graph, and how to fill and read them.
struct Core {
    dir: EncoderDir,
    io: EncoderIo,
    device: Device,
    batch: usize,
    pool: Mutex<Vec<Session>>,
    freed: Condvar,
}

/// An input ready to run: ids, and the segment ids a pair has.
struct Row {
    ids: Vec<u32>,
    types: Vec<u32>,
}

/// The padded length of an input of `len` tokens: the next power of two from 8, at most
/// `max` (never below `len`).
pub(crate) fn padded_length(len: usize, max: usize) -> usize {
    len.max(8).next_power_of_two().min(max).max(len)
}

impl Core {
    fn open(path: &Path, task: EncoderTask, opts: &RuntimeOptions, batch: usize) -> Result<Core> {
        let dir = EncoderDir::open(path, Some(task))?;
        let opts = opts.resolved();
        let rt = Runtime::get()?;
        let mut sessions = Vec::with_capacity(opts.sessions.max(1));
        let packs = ort::session::builder::PrepackedWeights::new();
        let mut io = None;
        for _ in 0..opts.sessions.max(1) {
            let session = commit(&mut builder(rt, &opts, Some(&packs))?, dir.model_file(), opts.device, rt)?;
            if io.is_none() {
                let (found, problems) = match task {
                    EncoderTask::Subgraph => (EncoderIo { token_type_ids: false, output: "fact_scores" }, check_subgraph_model(dir.model_file(), &session)),
                    _ => check_encoder_model(dir.model_file(), &session, task == EncoderTask::Dense, dir.hidden),
                };
                if !problems.is_empty() {
                    return Err(EncoderError::Interface { problems });
                }
                io = Some(found);
            }
            sessions.push(session);
        }
        let io = io.expect("at least one session");
        Ok(Core { dir, io, device: opts.device, batch: batch.max(1), pool: Mutex::new(sessions), freed: Condvar::new() })
    }

    fn tokenize(&self, encoding: tokenizers::tokenizer::Result<tokenizers::Encoding>, text: impl FnOnce() -> String) -> Result<Row> {
        let enc = encoding.map_err(|source| EncoderError::Tokenize { text: text(), source: crate::backend::tokenizers(source) })?;
        if let (Some(vocab), Some(&token)) = (self.dir.vocab, enc.get_ids().iter().find(|&&t| Some(t) >= self.dir.vocab)) {
            return Err(EncoderError::TokenOutOfRange { path: self.dir.path.clone(), token, vocab });
        }
        Ok(Row { ids: enc.get_ids().to_vec(), types: enc.get_type_ids().to_vec() })
    }

    /// Runs every row, grouped by padded length, `batch` at a time; `read(out, rows, seq,
    /// mask)` turns each run's output into one result per row. Results in input order.
    fn run<T>(&self, rows: &[Row], mut read: impl FnMut(&DynValue, usize, usize, &[i64]) -> Result<Vec<T>>) -> Result<Vec<T>> {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        let padded: Vec<usize> = rows.iter().map(|r| padded_length(r.ids.len(), self.dir.max_length)).collect();
        order.sort_by_key(|&i| padded[i]);
        let mut out: Vec<Option<T>> = (0..rows.len()).map(|_| None).collect();
        let mut session = self.session();
        for group in order.chunk_by(|&a, &b| padded[a] == padded[b]) {
            for chunk in group.chunks(self.batch) {
                let (b, s) = (chunk.len(), padded[chunk[0]]);
                let mut ids = vec![i64::from(self.dir.pad_id); b * s];
                let mut mask = vec![0i64; b * s];
                let mut types = vec![0i64; b * s];
                for (k, &i) in chunk.iter().enumerate() {
                    for (j, &t) in rows[i].ids.iter().enumerate() {
                        ids[k * s + j] = i64::from(t);
                        mask[k * s + j] = 1;
                    }
                    for (j, &t) in rows[i].types.iter().enumerate().take(s) {
                        types[k * s + j] = i64::from(t);
                    }
                }
                let shape = vec![b as i64, s as i64];
                let tensor = |data: Vec<i64>| {
                    Tensor::from_array((shape.clone(), data))
                        .map(|t| t.into_dyn())
                        .map_err(|source| Seq2SeqError::Internal { what: "input tensor", source: source.into() })
                };
                let ids_v = tensor(ids)?;
                let mask_v = tensor(mask.clone())?;
                let types_v = if self.io.token_type_ids { Some(tensor(types)?) } else { None };
                let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
                    vec![("input_ids".into(), (&ids_v).into()), ("attention_mask".into(), (&mask_v).into())];
                if let Some(t) = &types_v {
                    inputs.push(("token_type_ids".into(), t.into()));
                }
                let path = self.dir.model_file.clone();
                let outputs = session.get().run(inputs).map_err(|source| EncoderError::Run { path: path.clone(), source: source.into() })?;
                let value = outputs.get(self.io.output).ok_or_else(|| EncoderError::Output {
                    path: path.clone(),
                    name: self.io.output.into(),
                    problem: OutputProblem::Missing,
                })?;
                let results = read(value, b, s, &mask)?;
                for (&i, r) in chunk.iter().zip(results) {
                    out[i] = Some(r);
                }
            }
        }
        Ok(out.into_iter().map(|r| r.expect("every row ran")).collect())
    }

    fn session(&self) -> PooledSession<'_> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = pool.pop() {
                return PooledSession { core: self, session: Some(s) };
            }
            pool = self.freed.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The graph's inputs and outputs (`name: type`).
    fn graph(&self) -> GraphReport {
        let describe = |o: &ort::value::Outlet| format!("{}: {}", o.name(), o.dtype());
        let mut s = self.session();
        let session = s.get();
        GraphReport {
            file: self.dir.model_file.clone(),
            inputs: session.inputs().iter().map(describe).collect(),
            outputs: session.outputs().iter().map(describe).collect(),
        }
    }

    /// A float32 output of exactly `expected` shape, its data.
    fn floats<'v>(&self, v: &'v DynValue, expected: &[i64]) -> Result<&'v [f32]> {
        let err = |problem: OutputProblem| EncoderError::Output { path: self.dir.model_file.clone(), name: self.io.output.into(), problem };
        let shape = match v.dtype() {
            ValueType::Tensor { ty: TensorElementType::Float32, shape, .. } => shape.to_vec(),
            other => return Err(err(OutputProblem::NotFloat32 { found: format!("{other:?}") })),
        };
        if shape != expected {
            return Err(err(OutputProblem::Shape { found: shape, expected: expected.to_vec() }));
        }
        v.try_extract_tensor::<f32>().map(|(_, d)| d).map_err(|e| err(OutputProblem::Unreadable(e.into())))
    }
}

/// A session taken from the pool, back on drop.
struct PooledSession<'c> {
    core: &'c Core,
    session: Option<Session>,
}

impl PooledSession<'_> {
    fn get(&mut self) -> &mut Session {
        self.session.as_mut().expect("held until dropped")
    }
}

impl Drop for PooledSession<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            self.core.pool.lock().unwrap_or_else(|e| e.into_inner()).push(s);
            self.core.freed.notify_one();
        }
    }
}

/// The accessors and `Debug` every model over a [`Core`] has (its `core` field).
macro_rules! core_accessors {
    ($t:ident) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t)).field("dir", &self.core.dir).field("device", &self.core.device).finish()
            }
        }

        impl $t {
            /// The model directory.
            pub fn dir(&self) -> &$crate::model::encoder::EncoderDir {
                &self.core.dir
            }

            /// The device its sessions run on.
            pub fn device(&self) -> $crate::model::session::Device {
                self.core.device
            }

            /// The graph's inputs and outputs.
            pub fn graph(&self) -> $crate::model::session::GraphReport {
                self.core.graph()
            }
        }
    };
}
pub(crate) use core_accessors;

/// A bi-encoder (`trellis.json` task `dense`): texts to vectors, pooled and (if the model
/// says so) normalized as sentence-transformers' `encode` computes them. `Send + Sync`:
/// build once, call from many threads.
pub struct BiEncoder {
    core: Core,
}

core_accessors!(BiEncoder);

impl BiEncoder {
    /// Loads a bi-encoder; `batch` inputs run together at most.
    pub fn open(dir: &Path, opts: &RuntimeOptions, batch: usize) -> Result<BiEncoder> {
        Ok(BiEncoder { core: Core::open(dir, EncoderTask::Dense, opts, batch)? })
    }

    /// The vectors of `texts`, as given (no prefix added), in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let tok = &self.core.dir.tokenizer;
        let rows = texts.iter().map(|&t| self.core.tokenize(tok.encode(t, true), || t.to_owned())).collect::<Result<Vec<_>>>()?;
        let (pooling, normalize) = (self.core.dir.pooling, self.core.dir.normalize);
        self.core.run(&rows, |value, b, s, mask| {
            let width = match value.dtype() {
                ValueType::Tensor { shape, .. } if shape.len() == 3 && shape[2] > 0 => shape[2],
                _ => 0,
            };
            let data = self.core.floats(value, &[b as i64, s as i64, width.max(1)])?;
            let mut vs = pooling::pool(data, mask, b, s, width as usize, pooling);
            if normalize {
                vs.iter_mut().for_each(|v| pooling::normalize(v));
            }
            Ok(vs)
        })
    }

    /// The vectors of queries: each with the model's `query_prefix`.
    pub fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(&self.core.dir.query_prefix, texts)
    }

    /// The vectors of documents (verbalized paths): each with the model's `document_prefix`.
    pub fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(&self.core.dir.document_prefix, texts)
    }

    fn embed_prefixed(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if prefix.is_empty() {
            return self.embed(texts);
        }
        let owned: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.embed(&owned.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

/// A cross-encoder (`trellis.json` task `rerank`): (query, passage) pairs to relevance
/// logits, the pair tokenized as one input (longest-first truncation). `Send + Sync`.
pub struct CrossEncoder {
    core: Core,
}

core_accessors!(CrossEncoder);

impl CrossEncoder {
    /// Loads a cross-encoder; `batch` pairs run together at most.
    pub fn open(dir: &Path, opts: &RuntimeOptions, batch: usize) -> Result<CrossEncoder> {
        Ok(CrossEncoder { core: Core::open(dir, EncoderTask::Rerank, opts, batch)? })
    }

    /// The relevance logit of each (query, passage) pair (higher: more relevant; no
    /// activation applied, which would not change an order).
    pub fn score(&self, pairs: &[(&str, &str)]) -> Result<Vec<f32>> {
        let tok = &self.core.dir.tokenizer;
        let rows = pairs.iter().map(|&(q, p)| self.core.tokenize(tok.encode((q, p), true), || format!("{q} | {p}"))).collect::<Result<Vec<_>>>()?;
        self.core.run(&rows, |value, b, _, _| Ok(self.core.floats(value, &[b as i64, 1])?.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_lengths_depend_on_the_input_alone() {
        assert_eq!(padded_length(1, 512), 8);
        assert_eq!(padded_length(8, 512), 8);
        assert_eq!(padded_length(9, 512), 16);
        assert_eq!(padded_length(200, 512), 256);
        assert_eq!(padded_length(300, 384), 384);
        assert_eq!(padded_length(20, 24), 24);
        assert_eq!(padded_length(3, 4), 4);
    }
}
