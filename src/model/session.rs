//! The T5 encoder-decoder on ONNX Runtime: a [`Seq2Seq`] handle built once and shared by
//! threads, holding a pool of sessions (`Session::run` takes `&mut self`), and the calls a
//! beam search makes: encode a batch once, start a decoder state with one row per beam,
//! step it one token (or several) per row, reorder its rows between steps.
//!
//! The KV cache stays in ONNX Runtime values from one step to the next: a step's
//! `present.*` outputs become the next step's `past_key_values.*` inputs without a copy.
//! Between steps only a reorder copies, and only what moved (`model::cache`): rows of the
//! self-attention cache are rewritten in place, in the step's own output, when a beam
//! branched (the beam search keeps a beam in its parent's row where it can); the
//! cross-attention K/V (computed once, at the first decoder step) move only when the
//! row -> input mapping changes: copied once into a reused buffer when the beams open,
//! compacted in place when finished inputs leave. Views of the kept rows are fed back.
//!
//! CUDA (`Device::Cuda`): the provider is registered with error-on-failure (never a silent
//! CPU fallback), decoder steps go through an `IoBinding` whose `present.*` outputs stay in
//! device memory and feed the next step there, logits come back to the host, and a reorder
//! gathers rows on the device with a one-node `Gather` graph built in memory. The same
//! binding path runs on CPU with [`RuntimeOptions::io_binding`] (the tests compare it with
//! the plain path); on CUDA it has not been run here (no GPU on this machine). Known cost
//! there: a graph that takes `encoder_hidden_states` at every step (the merged layout)
//! gets them copied from the host at each step; the split layout's with-past graph does
//! not take them.

use crate::model::cache::{reorder_all, split_threads, Kv, NotHostF32};
use crate::model::dir::{DecoderFiles, Layout, ModelDir, ModelDirError, T5Config};
use crate::model::interface::{check_decoder, check_encoder, type_name, DecoderIo, Names, Stage};
pub use crate::model::interface::{InterfaceIssue, InterfaceProblem};
use crate::model::runtime::{Runtime, RuntimeError};
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::{GraphOptimizationLevel, PrepackedWeights, SessionBuilder};
use ort::session::{IoBinding, Session, SessionInputValue};
use ort::value::{DynValue, Outlet, Tensor, TensorElementType, TensorRef, ValueType};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// One ONNX graph of a model as `trellis doctor` reports it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GraphReport {
    pub file: PathBuf,
    /// `name: type` of each input, in the graph's order.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// Where the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Device {
    #[default]
    Cpu,
    /// CUDA device N.
    Cuda(u32),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = crate::limits::UnknownName;
    /// `cpu`, `cuda` (device 0) or `cuda:N`.
    fn from_str(s: &str) -> Result<Device, Self::Err> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse::<u32>) {
                Some(Ok(n)) => Ok(Device::Cuda(n)),
                _ => Err(crate::limits::UnknownName { what: "device", value: s.into(), allowed: &["cpu", "cuda", "cuda:N"] }),
            },
        }
    }
}

/// How a [`Seq2Seq`] is built.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeOptions {
    pub device: Device,
    /// Intra-op threads of each session (0: ONNX Runtime's default, one per core).
    pub threads: usize,
    /// Sessions in the pool: how many threads can run the model at once. The default, 0,
    /// is one per core, each with `cores / sessions` intra-op threads when `threads` is 0 as
    /// well, so a host calling from many threads does not queue behind one session; a
    /// single caller wanting one call as fast as possible asks for 1.
    pub sessions: usize,
    /// Force a layout (default: split when both files are there, else merged).
    pub layout: Option<Layout>,
    /// ONNX Runtime's deterministic compute (bit-identical results across runs).
    pub deterministic: bool,
    /// Run decoder steps through an `IoBinding` and reorder the cache with a `Gather`
    /// graph, as on CUDA. Always on for CUDA; on CPU only to test that path.
    pub io_binding: bool,
    /// Let ONNX Runtime's intra-op threads spin-wait for work after a parallel section (its
    /// own default). Off by default: between decoder calls this process has its own work
    /// (automaton, prior, search) for the same cores, and threads spinning there take them
    /// (on the 2-core benchmark machine the tiny model's decoding took 1.7x as long with
    /// spinning; the t5-small shape's was no faster with it).
    pub spinning: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions { device: Device::Cpu, threads: 0, sessions: 0, layout: None, deterministic: true, io_binding: false, spinning: false }
    }
}

impl RuntimeOptions {
    /// The pool's size and each session's threads, with the defaults (0) resolved.
    pub(crate) fn resolved(&self) -> RuntimeOptions {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut r = self.clone();
        if self.sessions == 0 {
            r.sessions = cores;
            if self.threads == 0 {
                r.threads = (cores / r.sessions).max(1);
            }
        }
        r
    }
}

/// A call of the step API that does not fit the state (a bug of the caller, reported, never
/// a panic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    #[error("an empty batch")]
    EmptyBatch,
    #[error("input {index} has no token")]
    EmptyInput { index: usize },
    #[error("token id {token} is outside the model's vocabulary of {vocab}")]
    TokenOutOfRange { token: u32, vocab: u32 },
    #[error("row {row} names input {input}, but the batch has {batch}")]
    NoSuchInput { row: usize, input: usize, batch: usize },
    #[error("{got} tokens for {rows} rows of {per_row} each")]
    TokenCount { got: usize, rows: usize, per_row: usize },
    #[error("parent {parent} of new row {row} is not a row (the state has {rows})")]
    NoSuchParent { row: usize, parent: usize, rows: usize },
    #[error("a state with no rows")]
    NoRows,
    #[error("no logits yet: step the state first")]
    NoLogits,
}

/// Loading or running the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Seq2SeqError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Dir(#[from] ModelDirError),
    /// The CUDA provider could not be registered (no CUDA build of ONNX Runtime, no
    /// driver, no such device). Never a silent fallback to CPU.
    #[error(
        "device {device}: the CUDA execution provider could not be registered with {} ({source}); use an ONNX Runtime built with CUDA (the onnxruntime-gpu==1.31.1 wheel's library, via ORT_DYLIB_PATH) on a machine with a CUDA device, or the CPU",
        library.display()
    )]
    Device { device: Device, library: PathBuf, source: crate::BackendError },
    #[error("{}: ONNX Runtime cannot load this model: {source}", path.display())]
    Load { path: PathBuf, source: crate::BackendError },
    #[error("the model's inputs and outputs are not what the decoder needs: {}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Interface { problems: Vec<InterfaceProblem> },
    #[error("{}: running the model failed: {source}", path.display())]
    Run { path: PathBuf, source: crate::BackendError },
    /// The model ran but returned something else than its declared interface promised
    /// (a model whose shapes disagree with config.json).
    #[error("{}: output {name:?} has shape {found:?}, expected {expected:?}", path.display())]
    OutputShape { path: PathBuf, name: String, expected: Vec<i64>, found: Vec<i64> },
    #[error("{}: output {name:?} {problem}", path.display())]
    Output { path: PathBuf, name: String, problem: OutputProblem },
    #[error("building the {what} failed: {source}")]
    Internal { what: &'static str, source: crate::BackendError },
    #[error("decoder call: {0}")]
    Call(#[from] CallError),
}

/// What is wrong with an output the model returned. `found` is ONNX Runtime's type (data).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputProblem {
    #[error("was not returned")]
    NotReturned,
    #[error("is {found}, not a float32 tensor")]
    NotFloat { found: String },
    #[error("cannot be read on the host: {0}")]
    Extract(crate::BackendError),
}

type Result<T, E = Seq2SeqError> = std::result::Result<T, E>;

/// The sessions of one pool slot.
struct Slot {
    encoder: Session,
    /// `decoder_model.onnx`, or the merged graph.
    first: Session,
    /// `decoder_with_past_model.onnx`; `None` with the merged layout (`first` serves both).
    with_past: Option<Session>,
    binding: Option<Bindings>,
    /// Host cache buffers of finished decoder states, for the next state of this slot.
    pool: Vec<Vec<f32>>,
}

/// The binding path's extra state (CUDA, or CPU when asked).
struct Bindings {
    first: IoBinding,
    with_past: Option<IoBinding>,
    gather: Session,
    gather_binding: IoBinding,
    kv_memory: MemoryInfo<'static>,
    host_memory: MemoryInfo<'static>,
}

/// One session's decoder as the beam search sees it (`StepModel`):
/// the session and one request batch's decoder state.
pub struct SessionSteps<'g, 'm> {
    pub guard: &'g mut SessionGuard<'m>,
    pub state: DecoderState,
    pub vocab: usize,
}

impl Drop for SessionSteps<'_, '_> {
    fn drop(&mut self) {
        self.guard.recycle(&mut self.state);
    }
}

impl crate::decode::beam::StepModel for SessionSteps<'_, '_> {
    type Error = Seq2SeqError;
    fn vocab_size(&self) -> usize {
        self.vocab
    }
    fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Seq2SeqError> {
        self.guard.step(&mut self.state, tokens)
    }
    fn reorder(&mut self, parents: &[usize]) -> Result<(), Seq2SeqError> {
        self.guard.reorder(&mut self.state, parents)
    }
}

/// Time spent in decoder calls, for measuring what Trellis adds around ONNX Runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTimings {
    /// Decoder `step`/`step_many` calls.
    pub steps: u64,
    /// Nanoseconds inside `Session::run` for those steps.
    pub run_ns: u64,
    /// Nanoseconds of the steps outside `Session::run` (building inputs, checking and
    /// taking outputs) plus every `reorder`.
    pub outside_ns: u64,
}

#[derive(Default)]
struct Counters {
    steps: AtomicU64,
    run_ns: AtomicU64,
    outside_ns: AtomicU64,
}

/// A T5 encoder-decoder, built once and shared (`Send + Sync`).
pub struct Seq2Seq {
    dir: ModelDir,
    runtime: &'static Runtime,
    device: Device,
    names: Names,
    encoder_path: PathBuf,
    first_io: DecoderIo,
    with_past_io: DecoderIo,
    pool: Mutex<Vec<Slot>>,
    freed: Condvar,
    counters: Counters,
    /// Threads for the bulk work between decoder calls ([`host`](crate::model::host)): as
    /// many as the model's intra-op threads.
    host_threads: usize,
}

impl std::fmt::Debug for Seq2Seq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seq2Seq").field("dir", &self.dir).field("device", &self.device).finish()
    }
}

fn ort_msg(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn builder(rt: &Runtime, opts: &RuntimeOptions, prepacked: Option<&PrepackedWeights>) -> Result<SessionBuilder> {
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

fn commit(b: &mut SessionBuilder, path: &Path, device: Device, rt: &Runtime) -> Result<Session> {
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
        let packs = [PrepackedWeights::new(), PrepackedWeights::new(), PrepackedWeights::new()];
        let mut slots = Vec::with_capacity(opts.sessions.max(1));
        let mut ios = None;
        for _ in 0..opts.sessions.max(1) {
            let encoder = commit(&mut builder(rt, opts, Some(&packs[0]))?, dir.encoder_file(), opts.device, rt)?;
            let first = commit(&mut builder(rt, opts, Some(&packs[1]))?, &first_path, opts.device, rt)?;
            let with_past = match &with_past_path {
                Some(p) => Some(commit(&mut builder(rt, opts, Some(&packs[2]))?, p, opts.device, rt)?),
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
                if !problems.is_empty() {
                    return Err(Seq2SeqError::Interface { problems });
                }
                ios = Some((first_io, past_io));
            }
            let binding = if io_binding { Some(Self::bindings(rt, opts, &first, with_past.as_ref(), 2 * names.layers)?) } else { None };
            slots.push(Slot { encoder, first, with_past, binding, pool: Vec::new() });
        }
        let (first_io, with_past_io) = ios.expect("at least one slot");
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
            pool: Mutex::new(slots),
            freed: Condvar::new(),
            counters: Counters::default(),
        })
    }

    fn bindings(rt: &Runtime, opts: &RuntimeOptions, first: &Session, with_past: Option<&Session>, kv: usize) -> Result<Bindings> {
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
            gather_binding: gather.create_binding().map_err(internal)?,
            gather,
            kv_memory,
            host_memory,
        })
    }

    pub fn dir(&self) -> &ModelDir {
        &self.dir
    }

    pub fn config(&self) -> &T5Config {
        self.dir.config()
    }

    pub fn device(&self) -> Device {
        self.device
    }

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
            run_ns: self.counters.run_ns.load(Ordering::Relaxed),
            outside_ns: self.counters.outside_ns.load(Ordering::Relaxed),
        }
    }
}

/// A batch encoded once: the encoder output and the attention mask of the padded batch.
pub struct Encoded {
    batch: usize,
    seq: usize,
    hidden: Arc<DynValue>,
    mask: Vec<i64>,
}

impl Encoded {
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// Padded input length.
    pub fn seq_len(&self) -> usize {
        self.seq
    }
    /// The encoder output, `[batch x seq x d_model]` row-major (CPU).
    pub fn hidden_states(&self) -> Result<&[f32]> {
        self.hidden.try_extract_tensor::<f32>().map(|(_, d)| d).map_err(|e| Seq2SeqError::Output {
            path: PathBuf::new(),
            name: "last_hidden_state".into(),
            problem: OutputProblem::Extract(e.into()),
        })
    }
}

/// A decoder input: a value, or a host buffer with its shape.
enum Input<'a> {
    Value(&'a DynValue),
    Host(&'a [i64], &'a [f32]),
}

impl<'a> Input<'a> {
    /// A cache tensor: the value itself when it is fed whole, else a view of its rows.
    fn of(kv: &'a Kv) -> Result<Input<'a>> {
        match kv.whole_value() {
            Some(v) => Ok(Input::Value(v)),
            None => Ok(Input::Host(&kv.shape, kv.data().map_err(cache_error)?)),
        }
    }
}

fn cache_error(e: NotHostF32) -> Seq2SeqError {
    Seq2SeqError::Output { path: PathBuf::from("<cache reorder>"), name: "kv cache".into(), problem: OutputProblem::Extract(e.0.into()) }
}

/// A decoder's state: one row per hypothesis, each tied to an input of the batch.
pub struct DecoderState {
    /// row -> input index of the batch.
    rows: Vec<usize>,
    seq: usize,
    /// `[rows x seq]`.
    mask: DynValue,
    /// `[rows x seq x d_model]`, shared with the encoding while the rows are its inputs.
    hidden: Arc<DynValue>,
    past_len: usize,
    /// Self-attention K/V per layer (key, value), `[rows x heads x past x d_kv]`; empty
    /// before the first step.
    self_kv: Vec<Kv>,
    /// Host buffers for reorders that add rows, reused: a fresh allocation of the cache's
    /// size cost more than the copy itself (page faults). Taken from the session's slot at
    /// `start` and given back by `recycle`.
    pool: Vec<Vec<f32>>,
    /// Per cache tensor, the row an in-place reorder saves to turn a cycle of rows.
    scratch: Vec<Vec<f32>>,
    /// Cross-attention K/V, `[rows x heads x seq x d_kv]`, from the first step.
    cross_kv: Vec<Kv>,
    logits: Option<DynValue>,
    last_t: usize,
}

impl DecoderState {
    pub fn rows(&self) -> usize {
        self.rows.len()
    }
    /// The input index of each row.
    pub fn row_inputs(&self) -> &[usize] {
        &self.rows
    }
    /// Tokens fed so far (the start token included).
    pub fn past_len(&self) -> usize {
        self.past_len
    }
}

/// One pool slot, back to the pool on drop.
pub struct SessionGuard<'m> {
    model: &'m Seq2Seq,
    slot: Option<Slot>,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.model.pool.lock().unwrap_or_else(|e| e.into_inner()).push(slot);
            self.model.freed.notify_one();
        }
    }
}

fn host_tensor<T: ort::value::PrimitiveTensorElementType + std::fmt::Debug + Clone + 'static>(shape: Vec<i64>, data: Vec<T>) -> Result<DynValue> {
    Tensor::from_array((shape, data)).map(|t| t.into_dyn()).map_err(|source| Seq2SeqError::Internal { what: "input tensor", source: source.into() })
}

/// Copies whole rows (axis 0) of a CPU tensor: new row i is old row `parents[i]`.
fn gather_host<T: ort::value::PrimitiveTensorElementType + std::fmt::Debug + Copy + 'static>(v: &DynValue, parents: &[usize], what: &str) -> Result<DynValue> {
    let (shape, data) = v.try_extract_tensor::<T>().map_err(|e| Seq2SeqError::Output {
        path: PathBuf::from("<cache reorder>"),
        name: what.into(),
        problem: OutputProblem::Extract(e.into()),
    })?;
    let rows = shape.first().copied().unwrap_or(0).max(0) as usize;
    let row = data.len().checked_div(rows).unwrap_or(0);
    let mut out = Vec::with_capacity(parents.len() * row);
    for &p in parents {
        out.extend_from_slice(&data[p * row..(p + 1) * row]);
    }
    let mut new_shape = shape.to_vec();
    if let Some(first) = new_shape.first_mut() {
        *first = parents.len() as i64;
    }
    host_tensor(new_shape, out)
}

fn shape_of(v: &DynValue) -> Vec<i64> {
    match v.dtype() {
        ValueType::Tensor { shape, .. } => shape.to_vec(),
        _ => Vec::new(),
    }
}

impl SessionGuard<'_> {
    fn slot(&mut self) -> &mut Slot {
        self.slot.as_mut().expect("a guard holds its slot until dropped")
    }

    /// Encodes a batch once: pads with the pad id, masks the padding. Input ids must be
    /// in the vocabulary; no input may be empty.
    ///
    /// Every batch is padded to the model's `input.max_tokens` (longer inputs, which the
    /// input encodings never make, to the longest): the padded length is then the same
    /// whatever else is in the batch. With another padded length ONNX Runtime's results
    /// differ in the last bits (a request's logits moved by up to 1e-6 when a longer one
    /// joined its batch), which the per-row int8 quantization of the shipped models now and
    /// then turns into another rounding step; with one length, a row's numbers do not depend
    /// on its neighbours (tested on the shipped models in several batchings and orders).
    pub fn encode(&mut self, inputs: &[Vec<u32>]) -> Result<Encoded> {
        let cfg = self.model.config().clone();
        if inputs.is_empty() {
            return Err(CallError::EmptyBatch.into());
        }
        if let Some(index) = inputs.iter().position(Vec::is_empty) {
            return Err(CallError::EmptyInput { index }.into());
        }
        if let Some(&token) = inputs.iter().flatten().find(|&&t| t >= cfg.vocab_size) {
            return Err(CallError::TokenOutOfRange { token, vocab: cfg.vocab_size }.into());
        }
        let longest = inputs.iter().map(Vec::len).max().unwrap_or(0);
        let (b, s) = (inputs.len(), longest.max(self.model.dir.trellis().input.max_tokens));
        let mut ids = vec![i64::from(cfg.pad_token_id); b * s];
        let mut mask = vec![0i64; b * s];
        for (i, inp) in inputs.iter().enumerate() {
            for (j, &t) in inp.iter().enumerate() {
                ids[i * s + j] = i64::from(t);
                mask[i * s + j] = 1;
            }
        }
        let shape = vec![b as i64, s as i64];
        let ids_v = host_tensor(shape.clone(), ids)?;
        let mask_v = host_tensor(shape, mask.clone())?;
        let path = self.model.encoder_path.clone();
        let session = &mut self.slot().encoder;
        let inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![("input_ids".into(), (&ids_v).into()), ("attention_mask".into(), (&mask_v).into())];
        let mut outputs = session.run(inputs).map_err(|source| Seq2SeqError::Run { path: path.clone(), source: source.into() })?;
        let hidden = outputs.remove("last_hidden_state").ok_or_else(|| Seq2SeqError::Output {
            path: path.clone(),
            name: "last_hidden_state".into(),
            problem: OutputProblem::NotReturned,
        })?;
        let expected = vec![b as i64, s as i64, cfg.d_model as i64];
        check_f32(&path, "last_hidden_state", &hidden, &expected)?;
        Ok(Encoded { batch: b, seq: s, hidden: Arc::new(hidden), mask })
    }

    /// A decoder state with one row per entry of `rows` (row -> input index of `enc`).
    pub fn start(&mut self, enc: &Encoded, rows: &[usize]) -> Result<DecoderState> {
        if rows.is_empty() {
            return Err(CallError::NoRows.into());
        }
        if let Some((row, &input)) = rows.iter().enumerate().find(|(_, &i)| i >= enc.batch) {
            return Err(CallError::NoSuchInput { row, input, batch: enc.batch }.into());
        }
        let s = enc.seq;
        let mut mask = Vec::with_capacity(rows.len() * s);
        for &r in rows {
            mask.extend_from_slice(&enc.mask[r * s..(r + 1) * s]);
        }
        let mask = host_tensor(vec![rows.len() as i64, s as i64], mask)?;
        let identity = rows.len() == enc.batch && rows.iter().enumerate().all(|(i, &r)| i == r);
        let hidden = if identity { Arc::clone(&enc.hidden) } else { Arc::new(gather_host::<f32>(&enc.hidden, rows, "encoder_hidden_states")?) };
        Ok(DecoderState {
            rows: rows.to_vec(),
            seq: s,
            mask,
            hidden,
            past_len: 0,
            self_kv: Vec::new(),
            pool: std::mem::take(&mut self.slot().pool),
            scratch: Vec::new(),
            cross_kv: Vec::new(),
            logits: None,
            last_t: 0,
        })
    }

    /// Feeds one token per row (the first call: the decoder start token) and returns the
    /// logits of that position, `[rows x vocab]` row-major.
    pub fn step<'s>(&mut self, state: &'s mut DecoderState, tokens: &[u32]) -> Result<&'s [f32]> {
        self.step_many(state, tokens, 1)
    }

    /// Feeds `per_row` tokens to every row in one decoder call (`tokens` is
    /// `[rows x per_row]` row-major) and returns the logits of all of them,
    /// `[rows x per_row x vocab]`. Equal, up to float rounding, to `per_row` single steps.
    pub fn step_many<'s>(&mut self, state: &'s mut DecoderState, tokens: &[u32], per_row: usize) -> Result<&'s [f32]> {
        let t0 = Instant::now();
        let model = self.model;
        let cfg = model.config();
        let rows = state.rows.len();
        if per_row == 0 || tokens.len() != rows * per_row {
            return Err(CallError::TokenCount { got: tokens.len(), rows, per_row }.into());
        }
        if let Some(&token) = tokens.iter().find(|&&t| t >= cfg.vocab_size) {
            return Err(CallError::TokenOutOfRange { token, vocab: cfg.vocab_size }.into());
        }
        let stage = if state.self_kv.is_empty() { Stage::First } else { Stage::WithPast };
        let io = if stage == Stage::First { &model.first_io } else { &model.with_past_io };
        let ids = host_tensor(vec![rows as i64, per_row as i64], tokens.iter().map(|&t| i64::from(t)).collect())?;
        let (h, dkv) = (cfg.num_heads as i64, cfg.d_kv as i64);
        // The merged graph takes every input on both branches: the first step gets empty
        // pasts (its branch does not read them) and use_cache_branch = false.
        let mut dummies = Vec::new();
        let mut branch = None;
        if io.merged {
            branch = Some(host_tensor(vec![1], vec![stage == Stage::WithPast])?);
            if stage == Stage::First {
                for _ in 0..4 * model.names.layers {
                    dummies.push(host_tensor(vec![rows as i64, h, 0, dkv], Vec::<f32>::new())?);
                }
            }
        }
        let mut inputs: Vec<(&str, Input<'_>)> = vec![("input_ids", Input::Value(&ids))];
        if io.takes_mask {
            inputs.push(("encoder_attention_mask", Input::Value(&state.mask)));
        }
        if io.takes_hidden {
            inputs.push(("encoder_hidden_states", Input::Value(&state.hidden)));
        }
        if let Some(b) = &branch {
            inputs.push(("use_cache_branch", Input::Value(b)));
        }
        if io.merged || stage == Stage::WithPast {
            let names = &model.names;
            if stage == Stage::First {
                let (selfs, crosses) = dummies.split_at(2 * names.layers);
                inputs.extend(names.past_self.iter().map(String::as_str).zip(selfs.iter().map(Input::Value)));
                inputs.extend(names.past_cross.iter().map(String::as_str).zip(crosses.iter().map(Input::Value)));
            } else {
                for (name, kv) in names.past_self.iter().zip(&state.self_kv).chain(names.past_cross.iter().zip(&state.cross_kv)) {
                    inputs.push((name.as_str(), Input::of(kv)?));
                }
            }
        }
        let want_cross = stage == Stage::First;
        let mut wanted: Vec<&str> = vec!["logits"];
        wanted.extend(model.names.present_self.iter().map(String::as_str));
        if want_cross {
            wanted.extend(model.names.present_cross.iter().map(String::as_str));
        }
        let path = io.path.clone();
        let run_err = |source: ort::Error| Seq2SeqError::Run { path: path.clone(), source: source.into() };
        let slot = self.slot.as_mut().expect("a guard holds its slot until dropped");
        let session = match (stage, slot.with_past.as_mut()) {
            (Stage::WithPast, Some(s)) => s,
            _ => &mut slot.first,
        };
        let t_run;
        let run_ns;
        let mut taken: Vec<Option<DynValue>>;
        match slot.binding.as_mut() {
            None => {
                let mut list: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::with_capacity(inputs.len());
                for (n, v) in &inputs {
                    let value = match v {
                        Input::Value(v) => SessionInputValue::from(*v),
                        Input::Host(shape, data) => SessionInputValue::from(
                            TensorRef::from_array_view((shape.to_vec(), *data))
                                .map_err(|source| Seq2SeqError::Internal { what: "cache view", source: source.into() })?,
                        ),
                    };
                    list.push((Cow::Borrowed(*n), value));
                }
                t_run = Instant::now();
                let mut outputs = session.run(list).map_err(run_err)?;
                run_ns = t_run.elapsed().as_nanos() as u64;
                taken = wanted.iter().map(|n| outputs.remove(n)).collect();
            }
            Some(b) => {
                let binding = match (stage, b.with_past.as_mut()) {
                    (Stage::WithPast, Some(wp)) => wp,
                    _ => &mut b.first,
                };
                binding.clear();
                for (n, v) in &inputs {
                    match v {
                        Input::Value(v) => binding.bind_input(*n, *v).map_err(run_err)?,
                        // Not made on this path (its reorders stay on the device); bound by copy.
                        Input::Host(shape, data) => binding.bind_input(*n, &host_tensor(shape.to_vec(), data.to_vec())?).map_err(run_err)?,
                    }
                }
                binding.bind_output_to_device("logits", &b.host_memory).map_err(run_err)?;
                for n in &wanted[1..] {
                    binding.bind_output_to_device(*n, &b.kv_memory).map_err(run_err)?;
                }
                t_run = Instant::now();
                let mut outputs = session.run_binding(binding).map_err(run_err)?;
                run_ns = t_run.elapsed().as_nanos() as u64;
                taken = wanted.iter().map(|n| outputs.remove(n)).collect();
            }
        }
        // Check every output's shape before keeping anything: a model that disagrees with
        // config.json is an error here, never an out-of-bounds read later.
        let v = i64::from(cfg.vocab_size);
        let (r, t, past) = (rows as i64, per_row as i64, state.past_len as i64);
        let missing = |name: &str| Seq2SeqError::Output { path: path.clone(), name: name.into(), problem: OutputProblem::NotReturned };
        let logits = taken[0].take().ok_or_else(|| missing("logits"))?;
        check_f32(&path, "logits", &logits, &[r, t, v])?;
        let n_self = 2 * model.names.layers;
        let mut new_self = Vec::with_capacity(n_self);
        for (k, name) in model.names.present_self.iter().enumerate() {
            let val = taken[1 + k].take().ok_or_else(|| missing(name))?;
            check_shape(&path, name, &val, &[r, h, past + t, dkv])?;
            new_self.push(val);
        }
        if want_cross {
            let mut cross = Vec::with_capacity(n_self);
            for (k, name) in model.names.present_cross.iter().enumerate() {
                let val = taken[1 + n_self + k].take().ok_or_else(|| missing(name))?;
                check_shape(&path, name, &val, &[r, h, state.seq as i64, dkv])?;
                cross.push(Kv::from_ort(val));
            }
            state.cross_kv = cross;
        }
        for old in std::mem::replace(&mut state.self_kv, new_self.into_iter().map(Kv::from_ort).collect()) {
            old.recycle(&mut state.pool);
        }
        state.past_len += per_row;
        state.last_t = per_row;
        state.logits = Some(logits);
        let total = t0.elapsed().as_nanos() as u64;
        model.counters.steps.fetch_add(1, Ordering::Relaxed);
        model.counters.run_ns.fetch_add(run_ns, Ordering::Relaxed);
        model.counters.outside_ns.fetch_add(total.saturating_sub(run_ns), Ordering::Relaxed);
        Self::logits(state)
    }

    /// The logits of the last step (`[rows x per_row x vocab]`).
    pub fn logits(state: &DecoderState) -> Result<&[f32]> {
        let l = state.logits.as_ref().ok_or(CallError::NoLogits)?;
        l.try_extract_tensor::<f32>().map(|(_, d)| d).map_err(|e| Seq2SeqError::Output {
            path: PathBuf::new(),
            name: "logits".into(),
            problem: OutputProblem::Extract(e.into()),
        })
    }

    /// New row i continues old row `parents[i]` (the count may shrink when inputs finish,
    /// or grow when beams open). Gathers the self-attention cache (nothing when every row
    /// keeps its place), and the cross-attention K/V, mask and encoder states only when the
    /// row -> input mapping changes.
    pub fn reorder(&mut self, state: &mut DecoderState, parents: &[usize]) -> Result<()> {
        let t0 = Instant::now();
        let old = state.rows.len();
        if parents.is_empty() {
            return Err(CallError::NoRows.into());
        }
        if let Some((row, &parent)) = parents.iter().enumerate().find(|(_, &p)| p >= old) {
            return Err(CallError::NoSuchParent { row, parent, rows: old }.into());
        }
        if parents.len() == old && parents.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(());
        }
        let new_rows: Vec<usize> = parents.iter().map(|&p| state.rows[p]).collect();
        let inputs_changed = new_rows != state.rows;
        let on_device = self.slot.as_ref().is_some_and(|s| s.binding.is_some());
        if on_device {
            state.self_kv = self.gather_kv(std::mem::take(&mut state.self_kv), parents)?;
            if inputs_changed {
                state.cross_kv = self.gather_kv(std::mem::take(&mut state.cross_kv), parents)?;
            }
        } else {
            // The cross-attention rows depend on the input alone: they move only when the
            // inputs of the rows change.
            let cross = if inputs_changed { state.cross_kv.len() } else { 0 };
            let tensors: Vec<&mut Kv> = state.self_kv.iter_mut().chain(state.cross_kv.iter_mut().take(cross)).collect();
            let threads = split_threads(&tensors, parents, self.model.host_threads);
            reorder_all(tensors, parents, &mut state.pool, &mut state.scratch, threads).map_err(cache_error)?;
        }
        if inputs_changed {
            state.mask = gather_host::<i64>(&state.mask, parents, "encoder_attention_mask")?;
            // After the first step the encoder states are read again only by a with-past
            // graph that takes them (the cross-attention K/V stand for them otherwise).
            if state.self_kv.is_empty() || self.model.with_past_io.takes_hidden {
                state.hidden = Arc::new(gather_host::<f32>(&state.hidden, parents, "encoder_hidden_states")?);
            }
        }
        state.rows = new_rows;
        state.logits = None;
        self.model.counters.outside_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Gives a finished state's host cache buffers to this session's slot, for its next
    /// state (the state is left without a cache).
    pub fn recycle(&mut self, state: &mut DecoderState) {
        let mut pool = std::mem::take(&mut state.pool);
        for kv in state.self_kv.drain(..).chain(state.cross_kv.drain(..)) {
            kv.recycle(&mut pool);
        }
        // The biggest, enough for one state's self- and cross-attention tensors and their
        // growth.
        pool.sort_by_key(|b| std::cmp::Reverse(b.capacity()));
        pool.truncate(8 * self.model.names.layers);
        let slot = self.slot();
        if slot.pool.len() < pool.len() {
            slot.pool = pool;
        }
    }

    /// Reorders cache tensors on the device (the binding path) with the Gather graph.
    fn gather_kv(&mut self, kv: Vec<Kv>, parents: &[usize]) -> Result<Vec<Kv>> {
        if kv.is_empty() {
            return Ok(kv);
        }
        let kv = kv
            .into_iter()
            .map(|t| match t.into_whole_value() {
                Ok(v) => Ok(v),
                Err(t) => host_tensor(t.shape.clone(), t.data().map_err(cache_error)?.to_vec()),
            })
            .collect::<Result<Vec<DynValue>>>()?;
        let slot = self.slot.as_mut().expect("a guard holds its slot until dropped");
        let Some(b) = slot.binding.as_mut() else {
            return Err(Seq2SeqError::Internal {
                what: "cache reorder (no I/O binding)",
                source: ort::Error::new("the device path was taken without a binding").into(),
            });
        };
        // On the device: one Gather graph call for all layers' tensors.
        let internal = |source: ort::Error| Seq2SeqError::Internal { what: "cache reorder", source: source.into() };
        let idx = host_tensor(vec![parents.len() as i64], parents.iter().map(|&p| p as i64).collect())?;
        let binding = &mut b.gather_binding;
        binding.clear();
        binding.bind_input("idx", &idx).map_err(internal)?;
        for (k, v) in kv.iter().enumerate() {
            binding.bind_input(format!("x{k}"), v).map_err(internal)?;
            binding.bind_output_to_device(format!("y{k}"), &b.kv_memory).map_err(internal)?;
        }
        let mut outputs = b.gather.run_binding(binding).map_err(internal)?;
        (0..kv.len())
            .map(|k| {
                outputs.remove(format!("y{k}")).map(Kv::from_ort).ok_or_else(|| Seq2SeqError::Output {
                    path: PathBuf::from("<cache reorder>"),
                    name: format!("y{k}"),
                    problem: OutputProblem::NotReturned,
                })
            })
            .collect()
    }
}

fn check_shape(path: &Path, name: &str, v: &DynValue, expected: &[i64]) -> Result<()> {
    let found = shape_of(v);
    if found != expected {
        return Err(Seq2SeqError::OutputShape { path: path.into(), name: name.into(), expected: expected.to_vec(), found });
    }
    match v.dtype() {
        ValueType::Tensor { ty: TensorElementType::Float32, .. } => Ok(()),
        other => Err(Seq2SeqError::Output { path: path.into(), name: name.into(), problem: OutputProblem::NotFloat { found: type_name(other) } }),
    }
}

fn check_f32(path: &Path, name: &str, v: &DynValue, expected: &[i64]) -> Result<()> {
    check_shape(path, name, v, expected)
}

// The handle a host application builds once and shares across threads.
const _: () = {
    const fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Seq2Seq>();
    const fn sendable<T: Send + 'static>() {}
    sendable::<DecoderState>();
    sendable::<Encoded>();
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The default pool is one session per core, the cores shared between them; numbers
    /// given are kept.
    #[test]
    fn the_default_pool_serves_every_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let d = RuntimeOptions::default().resolved();
        assert_eq!((d.sessions, d.threads), (cores, 1), "{cores} cores");
        let o = RuntimeOptions { threads: 3, ..RuntimeOptions::default() };
        assert_eq!((o.resolved().sessions, o.resolved().threads), (cores, 3));
        let o = RuntimeOptions { sessions: 2, threads: 0, ..RuntimeOptions::default() };
        assert_eq!((o.resolved().sessions, o.resolved().threads), (2, 0), "0 threads: ONNX Runtime's own default");
    }

    #[test]
    fn devices_parse_and_print() {
        assert_eq!("cpu".parse::<Device>(), Ok(Device::Cpu));
        assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda(0)));
        assert_eq!("cuda:3".parse::<Device>(), Ok(Device::Cuda(3)));
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
        assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
        assert_eq!("merged".parse::<Layout>(), Ok(Layout::Merged));
        assert!("both".parse::<Layout>().is_err());
    }

    #[test]
    fn layer_names_follow_optimum() {
        let n = Names::new(2);
        assert_eq!(
            n.past_self,
            ["past_key_values.0.decoder.key", "past_key_values.0.decoder.value", "past_key_values.1.decoder.key", "past_key_values.1.decoder.value"]
        );
        assert_eq!(n.present_cross[3], "present.1.encoder.value");
    }
}
