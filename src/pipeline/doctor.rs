//! What `trellis doctor` checks: the ONNX Runtime library (where, which version, which
//! execution providers) and, given a model directory, its files and every graph's inputs
//! and outputs against what the decoder needs. Problems of the model are collected, one
//! sentence each; a runtime or device that cannot be used is an error.

use crate::generate::GenerationConfig;
use crate::model::dir::{Layout, TaskSection};
use crate::model::runtime::{self, Runtime, RuntimeError};
use crate::model::session::GraphReport;
use crate::model::session::{Device, RuntimeOptions, Seq2Seq, Seq2SeqError};
use crate::retrieve::gsr::DecodingConfig;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct DoctorOptions {
    pub model: Option<PathBuf>,
    pub device: Device,
    pub threads: usize,
    pub layout: Option<Layout>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RuntimeReport {
    pub library: PathBuf,
    /// How the library was found (`ORT_DYLIB_PATH`, the cache, next to the executable).
    pub found_by: String,
    pub version: String,
    /// Providers the library was built with.
    pub providers: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    pub path: PathBuf,
    pub layout: Layout,
    pub vocab_size: u32,
    pub d_model: usize,
    pub encoder_layers: usize,
    pub decoder_layers: usize,
    pub heads: usize,
    pub d_kv: usize,
    pub tokenizer_tokens: usize,
    pub linearization: String,
    /// False when there is no trellis.json (defaults used).
    pub trellis_json: bool,
    pub graphs: Vec<GraphReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DoctorReport {
    pub runtime: RuntimeReport,
    pub device: String,
    pub model: Option<ModelReport>,
    /// Each problem of the model, one sentence.
    pub problems: Vec<String>,
    pub ok: bool,
}

/// Why `doctor` could not check anything: no usable runtime, or the device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoctorError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Device(Box<Seq2SeqError>),
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
    if let Some(dir) = &opts.model {
        match check_model(dir, opts) {
            Ok(report) => model = Some(report),
            Err(Seq2SeqError::Interface { problems: ps }) => problems.extend(ps.iter().map(|p| format!("{p}."))),
            Err(e @ Seq2SeqError::Device { .. }) => return Err(DoctorError::Device(Box::new(e))),
            Err(Seq2SeqError::Runtime(e)) => return Err(DoctorError::Runtime(e)),
            Err(e) => problems.push(format!("{e}.")),
        }
    } else if let Device::Cuda(_) = opts.device {
        // No model to build sessions from: check the provider with the reorder graph alone.
        if let Err(e) = Seq2Seq::probe_device(opts.device) {
            return Err(DoctorError::Device(Box::new(e)));
        }
    }
    let ok = problems.is_empty();
    Ok(DoctorReport { runtime, device: opts.device.to_string(), model, problems, ok })
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
