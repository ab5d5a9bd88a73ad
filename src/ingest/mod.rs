//! Bulk loading of triple dumps into a store.
//!
//! ```text
//! reader thread          parser thread (rayon)        loader thread
//! decompress, cut   -->  parse chunks in parallel -->  intern names -> ids, push id
//! into line chunks       into records (in order)       triples into the external sorter
//!                                                      then: sorted streams -> SST files
//!                                                      -> new generation -> commit
//! ```
//!
//! Nothing becomes visible until the commit (see `store::layout`): a failed, cancelled or
//! killed load leaves the store as it was.
//!
//! Files: `build` (the steps in order, and the commit), `input` (decompression, format
//! detection, line chunks), `pipeline` (the threads of one input), `parse` (lines into
//! records), `intern` (records into ids and sorter triples), `dict` (the interner),
//! `rejects` (the `--on-error skip` file), `sort` (the external sort), `adjacency` (the
//! merge of sorted runs into id lists and degrees), `dictionaries` (term records, keys,
//! names, aliases, labels), `naming` (RDF naming rules), `sst` (the SST file sink),
//! `tokens` (the token index), `change` (what a live update's change is, change files),
//! `update` and `overlay` (live updates).

mod adjacency;
mod build;
mod change;
pub(crate) mod dict;
mod dictionaries;
pub(crate) mod error;
pub(crate) mod input;
mod intern;
mod naming;
mod overlay;
pub(crate) mod parse;
mod pipeline;
mod records;
mod rejects;
pub(crate) mod sort;
mod sst;
pub(crate) mod tokenizer;
pub(crate) mod tokens;
mod update;

pub use change::{read_change_file, Change, ChangeFileProblem, FactKeys, SourcedChange};
pub use error::{IngestError, LineError, LineErrorKind, LineProblem};
pub use input::{Compression, Format, InputSpec};
pub use tokenizer::{NameTokenizer, PositionDependence, TokenizerError};
pub use tokens::TokenUpkeep;
pub use update::{ChangeOrigin, ChangeProblem, UpdateProblem, UpdateReport, Updater};

use crate::progress::Monitor;
use crate::store::meta::InputRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to do with a malformed line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnError {
    /// Stop at the first malformed line; nothing of the load becomes visible.
    #[default]
    Stop,
    /// Load every good line, count rejects per kind, write rejected lines to a file.
    Skip,
}

/// Loads triple files into the store at `dir`, creating it when it does not exist.
pub struct BulkLoader {
    dir: PathBuf,
    memory_mb: usize,
    sort_run_triples: Option<usize>,
    threads: usize,
    on_error: OnError,
    rejects: Option<PathBuf>,
    reverse_prefix: String,
    lang: String,
    source: Option<String>,
    monitor: Monitor,
}

/// What a load did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    /// Each input: its path, format, lines, facts read and lines rejected.
    pub inputs: Vec<InputRecord>,
    /// Fact lines read (before deduplication).
    pub facts_read: u64,
    /// Facts the store did not have before.
    pub new_facts: u64,
    /// Entities the store did not have before.
    pub new_entities: u64,
    /// Relations the store did not have before.
    pub new_relations: u64,
    /// Aliases the store did not have before.
    pub new_aliases: u64,
    /// Rejected lines per kind (`--on-error skip`).
    pub rejected: BTreeMap<LineErrorKind, u64>,
    /// The file rejected lines were written to (`None`: no line was rejected).
    pub rejects_file: Option<PathBuf>,
    /// Labels whose subject is in no fact of the store (dropped, as the format says).
    pub unused_labels: u64,
    /// Store totals after the load.
    pub entities: u64,
    /// Relations in the store after the load.
    pub relations: u64,
    /// Facts in the store after the load.
    pub facts: u64,
    /// Sorted runs spilled to disk by the external sort and merged into the adjacency (0: it
    /// fit in the budget).
    pub sort_runs: usize,
    /// Sorted runs spilled to disk while writing the dictionaries' keys and `names` entries
    /// (0: they fit in what the budget left beside the dictionaries).
    pub dictionary_runs: usize,
    /// The token indexes brought up to date with the load (only its new and relabeled
    /// names encoded), and those left stale.
    pub token_indexes: TokenUpkeep,
    /// What the load did to the text index (a load leaves one stale).
    pub text_index: crate::text::TextUpkeep,
    /// Wall time of the load.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Rejected lines of every kind.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }
}

impl BulkLoader {
    /// A loader for the store at `dir`: 1024 MB, all cores, stop at the first bad line,
    /// reverse prefix `~`, English labels.
    pub fn new(dir: impl AsRef<Path>) -> BulkLoader {
        BulkLoader {
            dir: dir.as_ref().to_path_buf(),
            memory_mb: 1024,
            sort_run_triples: None,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            on_error: OnError::Stop,
            rejects: None,
            reverse_prefix: "~".into(),
            lang: "en".into(),
            source: None,
            monitor: Monitor::new(),
        }
    }

    /// Names the source of the load's facts (format 4 provenance): `Updater::retract_source`
    /// (`trellis update --retract-source NAME`) later removes what it asserted and no other
    /// load or update also asserts.
    pub fn with_source(mut self, name: impl Into<String>) -> Self {
        self.source = Some(name.into());
        self
    }

    /// Memory budget for the sort buffers and dictionaries of the load (default 1024 MB).
    pub fn with_memory_mb(mut self, mb: usize) -> Self {
        self.memory_mb = mb.max(16);
        self
    }

    /// Caps the external sort's buffer at `triples`: a sorted run is spilled every
    /// `triples` fact lines whatever the memory budget (`LoadReport::sort_runs` counts
    /// them), and the dictionaries' key and name sorts spill past as many bytes as that
    /// buffer holds (`LoadReport::dictionary_runs`). For tests and measurements of the
    /// run merges on small inputs; the default lets the budget decide.
    pub fn with_sort_run_triples(mut self, triples: usize) -> Self {
        self.sort_run_triples = Some(triples.max(1));
        self
    }

    /// Parser threads (default: all cores).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// What to do with a malformed line (default [`OnError::Stop`]).
    pub fn on_error(mut self, policy: OnError) -> Self {
        self.on_error = policy;
        self
    }

    /// Where `OnError::Skip` writes rejected lines (default `DIR/rejected-gen-NNNNNN.tsv`).
    pub fn with_rejects_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.rejects = Some(path.into());
        self
    }

    /// Relations starting with this prefix are reverses (`~r(a, b)` is stored as `r(b, a)`);
    /// empty disables it. Default `~`.
    pub fn with_reverse_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.reverse_prefix = prefix.into();
        self
    }

    /// Language of the RDF labels kept (labels without a language are always kept); empty
    /// keeps every language. Default `en`.
    pub fn with_lang(mut self, lang: impl Into<String>) -> Self {
        self.lang = lang.into();
        self
    }

    /// Reports the load's progress to `monitor` (one step per input, read in bytes with
    /// the facts read so far, then the writing steps in facts, then the commit) and stops
    /// it with `IngestError::Cancelled`, the store unchanged, once `monitor` is cancelled.
    pub fn with_monitor(mut self, monitor: Monitor) -> Self {
        self.monitor = monitor;
        self
    }

    /// Loads `inputs` (in order) and commits them as one new generation of the store.
    pub fn load(self, inputs: &[InputSpec]) -> Result<LoadReport, IngestError> {
        build::run(self, inputs)
    }
}

crate::limits::named_choices!(OnError, "error policy", { Stop => "stop", Skip => "skip" });
