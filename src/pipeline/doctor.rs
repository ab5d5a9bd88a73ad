//! What `trellis doctor` checks: the ONNX Runtime library (where, which version, which
//! execution providers) and, given a model directory, its files and every graph's inputs
//! and outputs against what the decoder needs. Problems of the model are collected, one
//! sentence each; a runtime or device that cannot be used is an error.

use crate::generate::GenerationConfig;
use crate::model::dir::{Layout, TaskSection};
use crate::model::encoder::subgraph::{SubgraphScorer, SubgraphText};
use crate::model::encoder::{BiEncoder, CrossEncoder, EncoderDir, EncoderError, EncoderTask, Pooling};
use crate::model::runtime::{self, Runtime, RuntimeError};
use crate::model::session::GraphReport;
use crate::model::session::{Device, RuntimeOptions, Seq2Seq, Seq2SeqError};
use crate::retrieve::gsr::DecodingConfig;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What [`doctor`] checks.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct DoctorOptions {
    /// The model directory to check (`None`: the runtime alone, and a CUDA device if one is named).
    pub model: Option<PathBuf>,
    /// Where the model runs (default the CPU).
    pub device: Device,
    /// ONNX Runtime's threads per session, 0..=256 (0: one per core).
    pub threads: usize,
    /// Forces a decoder layout (`None`: the split pair when both files exist, else the merged file).
    pub layout: Option<Layout>,
}

/// The ONNX Runtime library found.
#[derive(Clone, Debug, Serialize)]
pub struct RuntimeReport {
    /// The library's path.
    pub library: PathBuf,
    /// How the library was found (`ORT_DYLIB_PATH`, the cache, next to the executable).
    pub found_by: String,
    /// The library's version.
    pub version: String,
    /// Providers the library was built with.
    pub providers: Vec<String>,
}

/// The model directory, as read.
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    /// Its path.
    pub path: PathBuf,
    /// The decoder layout in use.
    pub layout: Layout,
    /// config.json's `vocab_size`.
    pub vocab_size: u32,
    /// config.json's `d_model`.
    pub d_model: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Size of one head's keys and values.
    pub d_kv: usize,
    /// The tokenizer's vocabulary size, added tokens included.
    pub tokenizer_tokens: usize,
    /// The linearization's name.
    pub linearization: String,
    /// False when there is no trellis.json (defaults used).
    pub trellis_json: bool,
    /// Each graph's inputs and outputs.
    pub graphs: Vec<GraphReport>,
}

/// An encoder model directory (`dense` or `rerank`), as read and run once.
#[derive(Clone, Debug, Serialize)]
pub struct EncoderReport {
    /// Its path.
    pub path: PathBuf,
    /// `dense` or `rerank`.
    pub task: EncoderTask,
    /// A bi-encoder's pooling.
    pub pooling: Option<Pooling>,
    /// Whether a bi-encoder's vectors are normalized.
    pub normalize: Option<bool>,
    /// Tokens per input.
    pub max_length: usize,
    /// Messages a query is made of (0: all).
    pub turns: usize,
    /// The tokenizer's vocabulary size, added tokens included.
    pub tokenizer_tokens: usize,
    /// A bi-encoder's vector width, seen on a trial input.
    pub dimension: Option<usize>,
    /// The graph's inputs and outputs.
    pub graphs: Vec<GraphReport>,
}

/// What [`doctor`] found.
#[derive(Clone, Debug, Serialize)]
pub struct DoctorReport {
    /// The runtime library.
    pub runtime: RuntimeReport,
    /// The device, as `cpu` or `cuda:N`.
    pub device: String,
    /// The model, when one was given and it opened (a T5 retriever or generator).
    pub model: Option<ModelReport>,
    /// The encoder model, when the one given is a bi-encoder or cross-encoder and it opened.
    pub encoder: Option<EncoderReport>,
    /// Each problem of the model, one sentence.
    pub problems: Vec<String>,
    /// Whether no problem was found.
    pub ok: bool,
}

/// Why `doctor` could not check anything: no usable runtime, or the device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoctorError {
    /// The ONNX Runtime library cannot be found or loaded.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The device cannot be used.
    #[error(transparent)]
    Device(Box<Seq2SeqError>),
    /// `threads` is out of range.
    #[error("{0}")]
    Setting(#[from] crate::limits::OutOfRange),
}

/// Loads the runtime (an error when it cannot be used) and checks the model directory, if
/// one is given (its problems are listed in the report).
pub fn doctor(opts: &DoctorOptions) -> Result<DoctorReport, DoctorError> {
    crate::limits::MODEL_THREADS.check_usize(opts.threads)?;
    let found = runtime::locate()?;
    let rt = Runtime::load(&found.path, found.from)?;
    let runtime = RuntimeReport { library: rt.library().into(), found_by: found.from.into(), version: rt.version().into(), providers: rt.providers()? };
    let mut problems = Vec::new();
    let mut model = None;
    let mut encoder = None;
    if let Some(dir) = &opts.model {
        match crate::model::encoder::config::task_of(dir) {
            Err(e) => problems.push(format!("{e}.")),
            Ok(Some(task)) if crate::model::encoder::config::is_encoder_task(&task) => match check_encoder(dir, opts) {
                Ok(report) => encoder = Some(report),
                Err(EncoderError::Interface { problems: ps }) => problems.extend(ps.iter().map(|p| format!("{p}."))),
                Err(EncoderError::Session(e @ Seq2SeqError::Device { .. })) => return Err(DoctorError::Device(Box::new(e))),
                Err(EncoderError::Runtime(e)) => return Err(DoctorError::Runtime(e)),
                Err(e) => problems.push(format!("{e}.")),
            },
            Ok(_) => match check_model(dir, opts) {
                Ok(report) => model = Some(report),
                Err(Seq2SeqError::Interface { problems: ps }) => problems.extend(ps.iter().map(|p| format!("{p}."))),
                Err(e @ Seq2SeqError::Device { .. }) => return Err(DoctorError::Device(Box::new(e))),
                Err(Seq2SeqError::Runtime(e)) => return Err(DoctorError::Runtime(e)),
                Err(e) => problems.push(format!("{e}.")),
            },
        }
    } else if let Device::Cuda(_) = opts.device {
        // No model to build sessions from: check the provider with the reorder graph alone.
        if let Err(e) = Seq2Seq::probe_device(opts.device) {
            return Err(DoctorError::Device(Box::new(e)));
        }
    }
    let ok = problems.is_empty();
    Ok(DoctorReport { runtime, device: opts.device.to_string(), model, encoder, problems, ok })
}

fn check_encoder(dir: &Path, opts: &DoctorOptions) -> Result<EncoderReport, EncoderError> {
    let ro = RuntimeOptions { device: opts.device, threads: opts.threads, sessions: 1, ..Default::default() };
    let report = |d: &EncoderDir, dimension, graph| EncoderReport {
        path: dir.into(),
        task: d.task(),
        pooling: (d.task() == EncoderTask::Dense).then_some(d.pooling()),
        normalize: (d.task() == EncoderTask::Dense).then_some(d.normalize()),
        max_length: d.max_length(),
        turns: d.turns(),
        tokenizer_tokens: d.tokenizer().get_vocab_size(true),
        dimension,
        graphs: vec![graph],
    };
    // One trial input through the graph: an output that disagrees with the model shows here.
    match EncoderDir::open(dir, None)?.task() {
        EncoderTask::Rerank => {
            let m = CrossEncoder::open(dir, &ro, 1)?;
            m.score(&[("trellis doctor", "a trial passage")])?;
            Ok(report(m.dir(), None, m.graph()))
        }
        EncoderTask::Subgraph => {
            // A two-entity, one-fact subgraph: a score per fact must come back.
            let m = SubgraphScorer::open(dir, &ro)?;
            let text = SubgraphText {
                query: "trellis doctor",
                entities: vec!["Trellis", "a trial entity"],
                mentioned: vec![true, false],
                relations: vec!["trial relation"],
                facts: vec![[0, 0, 1]],
            };
            m.score(&text)?;
            Ok(report(m.dir(), None, m.graph()))
        }
        _ => {
            let m = BiEncoder::open(dir, &ro, 1)?;
            let v = m.embed(&["trellis doctor"])?;
            Ok(report(m.dir(), v.first().map(Vec::len), m.graph()))
        }
    }
}

fn check_model(dir: &Path, opts: &DoctorOptions) -> Result<ModelReport, Seq2SeqError> {
    let ro = RuntimeOptions { device: opts.device, threads: opts.threads, sessions: 1, layout: opts.layout, ..Default::default() };
    let m = Seq2Seq::open(dir, &ro)?;
    let d = m.dir();
    // The task's own section of trellis.json, checked by the task's module.
    match d.trellis().task.as_str() {
        GenerationConfig::TASK => {
            d.section::<GenerationConfig>()?;
        }
        _ => {
            d.section::<DecodingConfig>()?;
        }
    }
    let c = d.config();
    Ok(ModelReport {
        path: dir.into(),
        layout: d.layout(),
        vocab_size: c.vocab_size,
        d_model: c.d_model,
        encoder_layers: c.num_layers,
        decoder_layers: c.num_decoder_layers,
        heads: c.num_heads,
        d_kv: c.d_kv,
        tokenizer_tokens: d.tokenizer().get_vocab_size(true),
        linearization: d.linearization().name.clone(),
        trellis_json: d.has_trellis_file(),
        graphs: m.graphs(),
    })
}
