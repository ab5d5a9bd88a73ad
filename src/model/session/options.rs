//! How a model is built: the device, the pool's size and each session's threads.

use crate::model::dir::Layout;

/// Where the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Device {
    /// The CPU (ONNX Runtime's default provider).
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

/// How a [`Seq2Seq`](super::Seq2Seq) is built.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeOptions {
    /// Where the model runs (default the CPU; CUDA never falls back silently).
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
