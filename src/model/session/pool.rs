//! The handle: a pool of session sets built once per model (each session's options, the
//! graphs' interfaces checked at load, the in-memory `Gather` graph of device reorders), and
//! the guard that lends one set to a thread.

use super::error::{ListedProblem, Seq2SeqError};
use super::options::{Device, RuntimeOptions};
use super::Result;
use crate::model::dir::{DecoderFiles, ModelDir, T5Config, DECODER_WITH_PAST_FILE, MERGED_FILE};
use crate::model::interface::{check_decoder, check_encoder, DecoderIo, Names, Stage};
use crate::model::runtime::Runtime;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::{GraphOptimizationLevel, PrepackedWeights, SessionBuilder};
use ort::session::{IoBinding, Session};
use ort::value::{Outlet, TensorElementType, ValueType};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// One ONNX graph of a model as `trellis doctor` reports it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GraphReport {
    /// The graph's file.
    pub file: PathBuf,
    /// `name: type` of each input, in the graph's order.
    pub inputs: Vec<String>,
    /// `name: type` of each output, in the graph's order.
    pub outputs: Vec<String>,
}

/// The sessions of one pool slot.
pub(super) struct Slot {
    pub(super) encoder: Session,
    /// `decoder_model.onnx`, or the merged graph.
    pub(super) first: Session,
    /// `decoder_with_past_model.onnx`; `None` with the merged layout (`first` serves both).
    pub(super) with_past: Option<Session>,
    /// `decoder_listed_model.onnx` when the model has one and the decoding uses it.
    pub(super) listed: Option<Session>,
    pub(super) binding: Option<Bindings>,
    /// Host cache buffers of finished decoder states, for the next state of this slot.
    pub(super) pool: Vec<Vec<f32>>,
}

/// The binding path's extra state (CUDA, or CPU when asked).
pub(super) struct Bindings {
    pub(super) first: IoBinding,
    pub(super) with_past: Option<IoBinding>,
    /// The listed step's, when the slot has one.
    pub(super) listed: Option<IoBinding>,
    pub(super) gather: Session,
    pub(super) gather_binding: IoBinding,
    pub(super) kv_memory: MemoryInfo<'static>,
    pub(super) host_memory: MemoryInfo<'static>,
}

/// Time spent in decoder calls, for measuring what Trellis adds around ONNX Runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StepTimings {
    /// Decoder `step`/`step_many`/`step_listed` calls.
    pub steps: u64,
    /// Of those, the steps on the listed-logits graph (`decoder_listed_model.onnx`).
    pub listed_steps: u64,
    /// Tokens fed to the decoder in those calls (rows x tokens per row, beams and the
    /// placeholder rows of finished beams included): the decoder's tokens/s.
    pub tokens: u64,
    /// Nanoseconds inside `Session::run` for those steps.
    pub run_ns: u64,
    /// Nanoseconds of the steps outside `Session::run` (building inputs, checking and
    /// taking outputs) plus every `reorder`.
    pub outside_ns: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) steps: AtomicU64,
    pub(super) listed_steps: AtomicU64,
    pub(super) tokens: AtomicU64,
    pub(super) run_ns: AtomicU64,
    pub(super) outside_ns: AtomicU64,
}

/// A T5 encoder-decoder, built once and shared (`Send + Sync`).
pub struct Seq2Seq {
    pub(super) dir: ModelDir,
    pub(super) runtime: &'static Runtime,
    pub(super) device: Device,
    pub(super) names: Names,
    pub(super) encoder_path: PathBuf,
    pub(super) first_io: DecoderIo,
    pub(super) with_past_io: DecoderIo,
    /// The listed-logits step's interface, when its sessions are loaded.
    pub(super) listed_io: Option<DecoderIo>,
    pub(super) pool: Mutex<Vec<Slot>>,
    pub(super) freed: Condvar,
    pub(super) counters: Counters,
    /// Threads for the bulk work between decoder calls ([`host`](crate::model::host)): as
    /// many as the model's intra-op threads.
    pub(super) host_threads: usize,
}

impl std::fmt::Debug for Seq2Seq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seq2Seq").field("dir", &self.dir).field("device", &self.device).finish()
    }
}

fn ort_msg(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub(crate) fn builder(rt: &Runtime, opts: &RuntimeOptions, prepacked: Option<&PrepackedWeights>) -> Result<SessionBuilder> {
    let internal = |source: ort::Error| Seq2SeqError::Internal { what: "session options", source: source.into() };
    let mut b = Session::builder(rt.env()).map_err(internal)?;
    b = b.with_optimization_level(GraphOptimizationLevel::Level3).map_err(|e| internal(e.into()))?;
    if opts.threads > 0 {
        b = b.with_intra_threads(opts.threads).map_err(|e| internal(e.into()))?;
    }
    b = b.with_inter_threads(1).map_err(|e| internal(e.into()))?;
    b = b.with_intra_op_spinning(opts.spinning).map_err(|e| internal(e.into()))?;
    if opts.deterministic {
        b = b.with_deterministic_compute(true).map_err(|e| internal(e.into()))?;
    }
    if let Some(p) = prepacked {
        b = b.with_prepacked_weights(p).map_err(|e| internal(e.into()))?;
    }
    if let Device::Cuda(n) = opts.device {
        let ep = ort::ep::CUDA::default().with_device_id(n as i32).build().error_on_failure();
        b = b.with_execution_providers([ep]).map_err(|e| Seq2SeqError::Device {
            device: opts.device,
            library: rt.library().into(),
            source: ort::Error::new(e.message().to_owned()).into(),
        })?;
    }
    Ok(b)
}

pub(crate) fn commit(b: &mut SessionBuilder, path: &Path, device: Device, rt: &Runtime) -> Result<Session> {
    b.commit_from_file(path).map_err(|e| {
        let message = ort_msg(&e);
        // Providers may fail at commit too: a CUDA failure is the device's, not the file's.
        if matches!(device, Device::Cuda(_)) && (message.contains("CUDA") || message.contains("cuda") || message.contains("execution provider")) {
            Seq2SeqError::Device { device, library: rt.library().into(), source: e.into() }
        } else {
            Seq2SeqError::Load { path: path.into(), source: e.into() }
        }
    })
}

/// The `Gather` graph a binding-path reorder runs: inputs `idx` (int64 [n]) and `x0..`
/// (float32, rank 4), outputs `y0..` = `Gather(x_k, idx, axis 0)`.
fn gather_session(rt: &Runtime, opts: &RuntimeOptions, inputs: usize) -> Result<Session> {
    use ort::editor::{Graph, Model, Node, Opset, ONNX_DOMAIN};
    use ort::value::{Shape, SymbolicDimensions};
    let internal = |source: ort::Error| Seq2SeqError::Internal { what: "cache reorder graph", source: source.into() };
    let tensor = |ty, rank: usize| ValueType::Tensor { ty, shape: Shape::new(vec![-1; rank]), dimension_symbols: SymbolicDimensions::empty(rank) };
    let mut graph = Graph::new().map_err(internal)?;
    let mut ins = vec![Outlet::new("idx", tensor(TensorElementType::Int64, 1))];
    ins.extend((0..inputs).map(|k| Outlet::new(format!("x{k}"), tensor(TensorElementType::Float32, 4))));
    graph.set_inputs(ins).map_err(internal)?;
    graph.set_outputs((0..inputs).map(|k| Outlet::new(format!("y{k}"), tensor(TensorElementType::Float32, 4)))).map_err(internal)?;
    for k in 0..inputs {
        let axis = ort::operator::Attribute::new("axis", 0i64).map_err(internal)?;
        graph
            .add_node(Node::new("Gather", ONNX_DOMAIN, format!("gather{k}"), [format!("x{k}"), "idx".into()], [format!("y{k}")], [axis]).map_err(internal)?)
            .map_err(internal)?;
    }
    let mut model = Model::new([Opset::new(ONNX_DOMAIN, 17).map_err(internal)?]).map_err(internal)?;
    model.set_graph(graph).map_err(internal)?;
    let b = builder(rt, opts, None)?;
    model.into_session(&b).map_err(|e| {
        if matches!(opts.device, Device::Cuda(_)) {
            Seq2SeqError::Device { device: opts.device, library: rt.library().into(), source: e.into() }
        } else {
            internal(e)
        }
    })
}

/// The metadata key `tools/train/listed_logits.py` records the cached decoder it cut the
/// listed step from under: `NAME:SIZE:CRC32` (the file name, decimal bytes, eight lowercase
/// hex digits of its IEEE CRC-32).
pub const LISTED_SOURCE_KEY: &str = "trellis.listed_source";

/// A listed step is the cached decoder it was cut from with another projection: one made
/// from another decoder (re-exported, re-quantized beside an old listed file) would score
/// with stale weights, so its record must match the decoder file's bytes. Whether to use
/// it: `false` when it was cut from the other layout's decoder and that file is beside it
/// (a folder holding both layouts, opened with the other forced): not the one that runs.
fn check_listed_source(listed: &Session, listed_path: &Path, source: &Path) -> Result<bool> {
    let stale = |problem| Seq2SeqError::ListedStale { listed: listed_path.into(), decoder: source.into(), problem };
    let metadata = listed.metadata().map_err(|e| Seq2SeqError::Load { path: listed_path.into(), source: e.into() })?;
    let recorded = metadata.custom(LISTED_SOURCE_KEY).ok_or_else(|| stale(ListedProblem::NoRecord))?;
    let name = source.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let recorded_name = recorded.split(':').next().unwrap_or_default();
    let other_layout = [DECODER_WITH_PAST_FILE, MERGED_FILE].contains(&recorded_name) && recorded_name != name;
    if other_layout && listed_path.with_file_name(recorded_name).is_file() {
        return Ok(false);
    }
    let (size, crc) = crate::files::size_and_crc32(source).map_err(|e| Seq2SeqError::ReadFile { path: source.into(), source: e })?;
    let found = format!("{name}:{size}:{crc:08x}");
    if recorded != found {
        return Err(stale(ListedProblem::Differs { recorded, found }));
    }
    Ok(true)
}

impl Seq2Seq {
    /// Reads the model directory, loads the runtime, builds `opts.sessions` session sets
    /// sharing prepacked weights, and checks every graph's inputs and outputs against what
    /// the decoder needs.
    pub fn open(dir: &Path, opts: &RuntimeOptions) -> Result<Seq2Seq> {
        let model_dir = ModelDir::open(dir, opts.layout)?;
        Self::with_dir(model_dir, opts)
    }

    /// [`open`](Self::open) with a directory already read.
    pub fn with_dir(dir: ModelDir, opts: &RuntimeOptions) -> Result<Seq2Seq> {
        Self::with_dir_listing(dir, opts, true)
    }

    /// [`with_dir`](Self::with_dir), loading the directory's listed-logits step
    /// (`decoder_listed_model.onnx`) only when `lists` (a decoding that never uses it
    /// need not hold its weights).
    pub fn with_dir_listing(dir: ModelDir, opts: &RuntimeOptions, lists: bool) -> Result<Seq2Seq> {
        let opts = &opts.resolved();
        let rt = Runtime::get()?;
        let cfg = dir.config().clone();
        let names = Names::new(cfg.num_decoder_layers);
        let io_binding = opts.io_binding || matches!(opts.device, Device::Cuda(_));
        let (first_path, with_past_path) = match dir.decoder_files() {
            DecoderFiles::Split { first, with_past } => (first.clone(), Some(with_past.clone())),
            DecoderFiles::Merged { merged } => (merged.clone(), None),
        };
        // One container per file: sessions of the same file share their prepacked weights.
        let packs = [PrepackedWeights::new(), PrepackedWeights::new(), PrepackedWeights::new(), PrepackedWeights::new()];
        let mut listed_path = if lists { dir.listed_file().map(Path::to_path_buf) } else { None };
        let mut slots = Vec::with_capacity(opts.sessions.max(1));
        let mut ios = None;
        for _ in 0..opts.sessions.max(1) {
            let encoder = commit(&mut builder(rt, opts, Some(&packs[0]))?, dir.encoder_file(), opts.device, rt)?;
            let first = commit(&mut builder(rt, opts, Some(&packs[1]))?, &first_path, opts.device, rt)?;
            let with_past = match &with_past_path {
                Some(p) => Some(commit(&mut builder(rt, opts, Some(&packs[2]))?, p, opts.device, rt)?),
                None => None,
            };
            let mut listed = match &listed_path {
                Some(p) => Some(commit(&mut builder(rt, opts, Some(&packs[3]))?, p, opts.device, rt)?),
                None => None,
            };
            if ios.is_none() {
                let mut problems = check_encoder(dir.encoder_file(), &encoder, &cfg);
                let merged = with_past.is_none();
                let (first_io, p) = check_decoder(&first_path, &first, &cfg, &names, Stage::First, merged);
                problems.extend(p);
                let (past_io, p) = match (&with_past, &with_past_path) {
                    (Some(s), Some(path)) => check_decoder(path, s, &cfg, &names, Stage::WithPast, false),
                    _ => (first_io.clone(), Vec::new()),
                };
                problems.extend(p);
                let listed_io = match (&listed, &listed_path) {
                    (Some(s), Some(path)) => {
                        let (io, p) = check_decoder(path, s, &cfg, &names, Stage::Listed, false);
                        problems.extend(p);
                        Some(io)
                    }
                    _ => None,
                };
                if !problems.is_empty() {
                    return Err(Seq2SeqError::Interface { problems });
                }
                let mut listed_io = listed_io;
                if let (Some(s), Some(path)) = (&listed, &listed_path) {
                    if !check_listed_source(s, path, with_past_path.as_deref().unwrap_or(&first_path))? {
                        // The other layout's step: this pool decodes without it.
                        (listed, listed_path, listed_io) = (None, None, None);
                    }
                }
                ios = Some((first_io, past_io, listed_io));
            }
            let binding = if io_binding { Some(Self::bindings(rt, opts, &first, with_past.as_ref(), listed.as_ref(), 2 * names.layers)?) } else { None };
            slots.push(Slot { encoder, first, with_past, listed, binding, pool: Vec::new() });
        }
        let (first_io, with_past_io, listed_io) = ios.expect("at least one slot");
        let host_threads = if opts.threads > 0 { opts.threads } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
        Ok(Seq2Seq {
            host_threads,
            encoder_path: dir.encoder_file().into(),
            dir,
            runtime: rt,
            device: opts.device,
            names,
            first_io,
            with_past_io,
            listed_io,
            pool: Mutex::new(slots),
            freed: Condvar::new(),
            counters: Counters::default(),
        })
    }

    fn bindings(rt: &Runtime, opts: &RuntimeOptions, first: &Session, with_past: Option<&Session>, listed: Option<&Session>, kv: usize) -> Result<Bindings> {
        let internal = |source: ort::Error| Seq2SeqError::Internal { what: "I/O binding", source: source.into() };
        let gather = gather_session(rt, opts, kv)?;
        let kv_memory = match opts.device {
            Device::Cuda(n) => MemoryInfo::new(AllocationDevice::CUDA, n as i32, AllocatorType::Device, MemoryType::Default),
            Device::Cpu => MemoryInfo::new(AllocationDevice::CPU, 0, AllocatorType::Device, MemoryType::Default),
        }
        .map_err(internal)?;
        let host_memory = MemoryInfo::new(AllocationDevice::CPU, 0, AllocatorType::Device, MemoryType::Default).map_err(internal)?;
        Ok(Bindings {
            first: first.create_binding().map_err(internal)?,
            with_past: with_past.map(|s| s.create_binding()).transpose().map_err(internal)?,
            listed: listed.map(|s| s.create_binding()).transpose().map_err(internal)?,
            gather_binding: gather.create_binding().map_err(internal)?,
            gather,
            kv_memory,
            host_memory,
        })
    }

    /// The model directory it was loaded from.
    pub fn dir(&self) -> &ModelDir {
        &self.dir
    }

    /// The model's `config.json`.
    pub fn config(&self) -> &T5Config {
        self.dir.config()
    }

    /// The device its sessions run on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether its cached steps can compute only listed tokens' logits
    /// (`decoder_listed_model.onnx` loaded).
    pub fn lists_logits(&self) -> bool {
        self.listed_io.is_some()
    }

    /// The ONNX Runtime library it runs on.
    pub fn runtime(&self) -> &'static Runtime {
        self.runtime
    }

    /// A session set from the pool, for one thread; waits while all are in use.
    pub fn session(&self) -> Result<SessionGuard<'_>> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(slot) = pool.pop() {
                return Ok(SessionGuard { model: self, slot: Some(slot) });
            }
            pool = self.freed.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Every graph's inputs and outputs (`name: type`), from a pool slot.
    pub fn graphs(&self) -> Vec<GraphReport> {
        let describe = |o: &Outlet| format!("{}: {}", o.name(), o.dtype());
        let guard = match self.session() {
            Ok(g) => g,
            Err(_) => return Vec::new(),
        };
        let slot = guard.slot.as_ref().expect("a guard holds its slot until dropped");
        let mut files = vec![(self.encoder_path.clone(), &slot.encoder), (self.first_io.path.clone(), &slot.first)];
        if let Some(s) = &slot.with_past {
            files.push((self.with_past_io.path.clone(), s));
        }
        if let (Some(s), Some(io)) = (&slot.listed, &self.listed_io) {
            files.push((io.path.clone(), s));
        }
        files
            .into_iter()
            .map(|(file, s)| GraphReport { file, inputs: s.inputs().iter().map(describe).collect(), outputs: s.outputs().iter().map(describe).collect() })
            .collect()
    }

    /// Registers `device`'s execution provider on a session of the in-memory reorder graph:
    /// whether the device can be used at all, without a model.
    pub fn probe_device(device: Device) -> Result<()> {
        let rt = Runtime::get()?;
        gather_session(rt, &RuntimeOptions { device, ..Default::default() }, 1).map(|_| ())
    }

    /// Decoder-call timings summed over every session since open.
    pub fn timings(&self) -> StepTimings {
        StepTimings {
            steps: self.counters.steps.load(Ordering::Relaxed),
            listed_steps: self.counters.listed_steps.load(Ordering::Relaxed),
            tokens: self.counters.tokens.load(Ordering::Relaxed),
            run_ns: self.counters.run_ns.load(Ordering::Relaxed),
            outside_ns: self.counters.outside_ns.load(Ordering::Relaxed),
        }
    }
}

/// One pool slot, back to the pool on drop.
pub struct SessionGuard<'m> {
    pub(super) model: &'m Seq2Seq,
    pub(super) slot: Option<Slot>,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.model.pool.lock().unwrap_or_else(|e| e.into_inner()).push(slot);
            self.model.freed.notify_one();
        }
    }
}

impl SessionGuard<'_> {
    pub(super) fn slot(&mut self) -> &mut Slot {
        self.slot.as_mut().expect("a guard holds its slot until dropped")
    }
}
