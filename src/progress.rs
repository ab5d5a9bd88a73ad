//! One shape for following and stopping long work: a bulk load, token indexing, batch
//! retrieval, batch replies and the evaluations all take a [`Monitor`], report
//! [`Progress`] through it and stop at its next check once it is cancelled.
//!
//! A monitor is a cheap handle (clones share one state), so a host keeps a clone to cancel
//! from another thread (a Ctrl-C handler, a Python binding polling for KeyboardInterrupt, a
//! UI's stop button) while the work runs with the other. Cancelled work ends with its
//! family's `Cancelled` error (`IngestError::Cancelled`, `RetrieveError::Cancelled`,
//! `PipelineError::Cancelled`; `trellis::Error::is_cancelled` asks any of them) and leaves
//! what it writes as a crash would: a load or an index not committed, the store unchanged.
//!
//! The callback runs on whichever thread did the work (batch work reports from rayon's
//! threads), so it is `Fn + Send + Sync`; it is called after each unit of work finishes,
//! often enough for a progress bar and rarely enough not to cost time (a batch of names,
//! a parsed chunk of input, a batch of turns).

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// What kind of work a report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Work {
    /// A bulk load (`BulkLoader::load`).
    Load,
    /// Building a tokenizer's token index (`Store::index_tokens`).
    IndexTokens,
    /// Building the text index (`text::index_text`).
    IndexText,
    /// Embedding a store's facts and names (`vectors::index_vectors`).
    IndexVectors,
    /// A live update (`Updater::apply`).
    Update,
    /// Ranking paths for a batch of dialog turns (`Retriever::retrieve_many`).
    Retrieve,
    /// Answering a batch of requests (`Pipeline::respond_many`).
    Respond,
    /// An evaluation over dialog turns (`eval::retrieval::evaluate`, `eval::pipeline::evaluate`).
    Evaluate,
}

impl Work {
    /// The lower-case name (`load`, `index-tokens`, `update`, `retrieve`, `respond`, `evaluate`).
    pub fn name(self) -> &'static str {
        match self {
            Work::Load => "load",
            Work::IndexTokens => "index-tokens",
            Work::IndexText => "index-text",
            Work::IndexVectors => "index-vectors",
            Work::Update => "update",
            Work::Retrieve => "retrieve",
            Work::Respond => "respond",
            Work::Evaluate => "evaluate",
        }
    }
}

/// What `done` and `total` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unit {
    /// Bytes of an input file (compressed bytes for a compressed file).
    Bytes,
    /// Facts (triples).
    Facts,
    /// Entity or relation names.
    Names,
    /// Dialog turns.
    Turns,
    /// Requests of a batch.
    Requests,
    /// Changes of an update.
    Changes,
    /// Entity documents of the text index.
    Documents,
}

impl Unit {
    /// The lower-case plural name (`bytes`, `facts`, `names`, `turns`, `requests`).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Facts => "facts",
            Unit::Names => "names",
            Unit::Turns => "turns",
            Unit::Requests => "requests",
            Unit::Changes => "changes",
            Unit::Documents => "documents",
        }
    }
}

/// One report: where the work stands in its current step.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The work reporting.
    pub work: Work,
    /// The current step, from 1 (a load: one step per input file, then its writing steps
    /// and the commit).
    pub step: usize,
    /// The number of steps of the whole work.
    pub steps: usize,
    /// What the step does, for people (`read kg.tsv`, `write incoming adjacency`,
    /// `entity names`, `turns`).
    pub stage: String,
    /// Units of the step done so far.
    pub done: u64,
    /// Units of the step in all, when known (an input read from a pipe has no size).
    pub total: Option<u64>,
    /// What `done` and `total` count.
    pub unit: Unit,
    /// Facts read so far in the whole load, while a load reads its inputs (the bytes read
    /// say how far a file is, this says what came out of it); `None` elsewhere.
    pub facts: Option<u64>,
}

impl Progress {
    /// A report of `done` of `total` `unit`s in step `step` of `steps`.
    pub(crate) fn new(work: Work, (step, steps): (usize, usize), stage: impl Into<String>, done: u64, total: Option<u64>, unit: Unit) -> Progress {
        Progress { work, step, steps, stage: stage.into(), done, total, unit, facts: None }
    }

    pub(crate) fn with_facts(mut self, facts: u64) -> Progress {
        self.facts = Some(facts);
        self
    }
}

/// Long work stopped because its [`Monitor`] was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

type Callback = Box<dyn Fn(&Progress) + Send + Sync>;

/// The states of `Shared::state`: running until cancelled or past its commit point,
/// which exclude each other (the first to happen wins).
const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const COMMITTING: u8 = 2;

struct Shared {
    state: AtomicU8,
    /// Commits completed under this monitor (a monitor may serve one piece of work after
    /// another: a load, then a token index).
    commits: std::sync::atomic::AtomicU64,
    callback: Option<Callback>,
}

/// Follows and stops long work: gets its [`Progress`] reports and can cancel it from any
/// thread. Clones share one state: cancelling one cancels the work any clone was given to.
/// `Monitor::default()` reports nowhere and is never cancelled unless asked.
#[derive(Clone)]
pub struct Monitor {
    shared: Arc<Shared>,
}

impl Monitor {
    /// A monitor without a callback (cancel only).
    pub fn new() -> Monitor {
        Monitor { shared: Arc::new(Shared { state: AtomicU8::new(RUNNING), commits: Default::default(), callback: None }) }
    }

    /// A monitor that sends every report to `callback`.
    pub fn with_callback(callback: impl Fn(&Progress) + Send + Sync + 'static) -> Monitor {
        Monitor { shared: Arc::new(Shared { state: AtomicU8::new(RUNNING), commits: Default::default(), callback: Some(Box::new(callback)) }) }
    }

    /// Asks the work to stop; it stops at its next check (after the unit of work under
    /// way: a chunk of input, a batch of names or turns) with its `Cancelled` error.
    /// `false` when the work had already passed its commit point (the moment just before
    /// its result becomes visible; [`committed`](Self::committed) then says so): it goes on
    /// and commits, and the cancel has no effect.
    pub fn cancel(&self) -> bool {
        match self.shared.state.compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(now) => now == CANCELLED,
        }
    }

    /// Whether [`cancel`](Self::cancel) took effect on this monitor or a clone.
    pub fn is_cancelled(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) == CANCELLED
    }

    /// Whether work under this monitor passed its commit point: its result is (or is being)
    /// made visible, and a cancel that came meanwhile was refused.
    pub fn committed(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) == COMMITTING || self.shared.commits.load(Ordering::Acquire) > 0
    }

    /// The last check of work that commits, made just before its result becomes visible:
    /// `Err(Cancelled)` when cancelled; otherwise a [`cancel`](Self::cancel) is refused until
    /// the guard is dropped (the commit done), after which the monitor can stop the next
    /// piece of work again. Atomic with `cancel`, so a cancel is either before it (nothing
    /// committed) or during the commit (reported as too late), never lost between the two.
    pub(crate) fn commit_point(&self) -> Result<CommitGuard<'_>, Cancelled> {
        loop {
            match self.shared.state.compare_exchange(RUNNING, COMMITTING, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(CommitGuard { monitor: self }),
                Err(CANCELLED) => return Err(Cancelled),
                // Another commit under the same monitor holds the state: wait for it.
                Err(_) => std::thread::yield_now(),
            }
        }
    }

    /// `Err(Cancelled)` once cancelled: the check long work makes between units.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Sends `progress` to the callback, if there is one.
    pub(crate) fn report(&self, progress: &Progress) {
        if let Some(f) = &self.shared.callback {
            f(progress);
        }
    }

    /// Whether reports go anywhere (work skips building them when not).
    pub(crate) fn reports(&self) -> bool {
        self.shared.callback.is_some()
    }
}

/// Held while work commits ([`Monitor::commit_point`]); dropping it ends the commit.
pub(crate) struct CommitGuard<'m> {
    monitor: &'m Monitor,
}

impl Drop for CommitGuard<'_> {
    fn drop(&mut self) {
        let shared = &self.monitor.shared;
        shared.commits.fetch_add(1, Ordering::AcqRel);
        let _ = shared.state.compare_exchange(COMMITTING, RUNNING, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl Default for Monitor {
    fn default() -> Monitor {
        Monitor::new()
    }
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor").field("cancelled", &self.is_cancelled()).field("callback", &self.shared.callback.is_some()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn clones_share_cancel_and_callback() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let m = Monitor::with_callback(move |p| sink.lock().unwrap().push((p.step, p.done)));
        let other = m.clone();
        assert_eq!(m.check(), Ok(()));
        other.report(&Progress::new(Work::Retrieve, (1, 1), "turns", 3, Some(9), Unit::Turns));
        m.report(&Progress::new(Work::Retrieve, (1, 1), "turns", 9, Some(9), Unit::Turns));
        assert_eq!(*seen.lock().unwrap(), vec![(1, 3), (1, 9)]);
        assert!(other.cancel());
        assert!(m.is_cancelled());
        assert_eq!(m.check(), Err(Cancelled));
        // A cancelled work never passes its commit point.
        assert!(m.commit_point().is_err());
        assert!(!m.committed());
        // A fresh monitor is independent of the cancelled one.
        assert!(!Monitor::default().is_cancelled());
    }

    #[test]
    fn a_cancel_after_the_commit_point_is_refused_until_the_commit_ends() {
        let m = Monitor::new();
        let guard = m.commit_point().unwrap();
        assert!(m.committed());
        assert!(!m.clone().cancel(), "too late: the work commits");
        assert!(!m.is_cancelled());
        assert_eq!(m.check(), Ok(()));
        drop(guard);
        // The commit is done: the monitor stops the next piece of work again.
        assert!(m.committed());
        assert!(m.cancel());
        assert_eq!(m.check(), Err(Cancelled));
        assert!(m.commit_point().is_err());
    }

    #[test]
    fn cancel_and_commit_race_to_exactly_one_winner() {
        for _ in 0..200 {
            let m = Monitor::new();
            let other = m.clone();
            let canceller = std::thread::spawn(move || other.cancel());
            // The guard held until the canceller is done: the commit is under way meanwhile.
            let guard = m.commit_point();
            let committed = guard.is_ok();
            let cancelled = canceller.join().unwrap();
            assert_ne!(committed, cancelled, "exactly one of the two takes effect");
            assert_eq!(m.committed(), committed);
            assert_eq!(m.is_cancelled(), cancelled);
            drop(guard);
        }
    }

    #[test]
    fn names() {
        assert_eq!(Work::IndexTokens.name(), "index-tokens");
        assert_eq!(Unit::Bytes.name(), "bytes");
        let p = Progress::new(Work::Load, (2, 5), "read b.tsv", 10, None, Unit::Bytes).with_facts(4);
        assert_eq!((p.facts, p.total), (Some(4), None));
    }
}
