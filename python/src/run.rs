//! How the glue runs library work: with the GIL released, on a thread pool that a forked
//! child rebuilds, and (for long work) on a worker thread while the calling thread watches
//! for Ctrl-C and delivers progress.

use crate::errors;
use pyo3::prelude::*;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The glue's rayon pool and the process that built it. A pool's threads do not survive
/// `fork()`: a child that finds another process's pool builds its own (and leaks the old
/// one, whose threads it does not have). Library work runs inside `install`, so rayon's
/// global pool, equally dead in a child, is never used.
static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

pub fn pool() -> PyResult<Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let mut slot = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, pool)) = slot.as_ref() {
        if *owner == pid {
            return Ok(pool.clone());
        }
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("trellis-py-{i}"))
            .build()
            .map_err(|e| errors::setting(format!("cannot start the thread pool: {e}")))?,
    );
    if let Some(stale) = slot.replace((pid, pool.clone())) {
        std::mem::forget(stale);
    }
    Ok(pool)
}

/// Runs `f` with the GIL released, on the glue's pool.
pub fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    let pool = pool()?;
    Ok(py.detach(|| pool.install(f)))
}

/// A handle's library object, reopened in a process other than the one that opened it
/// (a forked child): the parent's object (RocksDB's background threads, ONNX Runtime's
/// sessions) is not usable there, and is leaked rather than dropped, since its destructor
/// would wait for threads the child does not have.
pub struct Handle<T> {
    /// `None` once closed (and in `drop`).
    slot: Mutex<Option<(u32, Arc<T>)>>,
}

impl<T> Handle<T> {
    pub fn new(value: T) -> Handle<T> {
        Handle { slot: Mutex::new(Some((std::process::id(), Arc::new(value)))) }
    }

    /// The object of this process, reopened with `reopen` when the handle was inherited;
    /// `closed()` once [`close`](Self::close) was called.
    pub fn get(&self, reopen: impl FnOnce() -> PyResult<T>, closed: impl FnOnce() -> PyErr) -> PyResult<Arc<T>> {
        let pid = std::process::id();
        {
            let slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            match slot.as_ref() {
                Some((owner, value)) if *owner == pid => return Ok(value.clone()),
                Some(_) => {}
                None => return Err(closed()),
            }
        }
        let fresh = Arc::new(reopen()?);
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((owner, value)) if *owner == pid => Ok(value.clone()),
            None => Err(closed()),
            _ => {
                if let Some((_, stale)) = slot.replace((pid, fresh.clone())) {
                    std::mem::forget(stale);
                }
                Ok(fresh)
            }
        }
    }
}

impl<T> Handle<T> {
    /// Puts `value` in place of this process's object (a refresh to a newer generation):
    /// calls already running keep the old one until they end. `false` when closed.
    pub fn replace(&self, value: T) -> bool {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_mut() {
            Some(held) => {
                let (owner, old) = std::mem::replace(held, (std::process::id(), Arc::new(value)));
                if owner != std::process::id() {
                    std::mem::forget(old);
                }
                true
            }
            None => false,
        }
    }

    /// Lets go of this handle's object (dropped once nothing built on it holds it); later
    /// `get`s fail. Another process's object is leaked, as in `drop`.
    pub fn close(&self) {
        let taken = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((owner, value)) = taken {
            if owner != std::process::id() {
                std::mem::forget(value);
            }
        }
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some((owner, value)) = slot.take() {
            if owner != std::process::id() {
                // Another process's object: see the type's documentation.
                std::mem::forget(value);
            }
        }
    }
}

/// The `closed` error of handles that have no `close` (only a store closes).
pub fn never_closed() -> PyErr {
    errors::setting("this handle was closed")
}

/// Set by the worker when it is done; the caller waits on it in short slices.
#[derive(Default)]
struct Done {
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Done {
    fn set(&self) {
        *self.flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Waits up to `slice`; true once done.
    fn wait(&self, slice: Duration) -> bool {
        let flag = self.flag.lock().unwrap_or_else(|e| e.into_inner());
        let (flag, _) = self.cv.wait_timeout_while(flag, slice, |done| !*done).unwrap_or_else(|e| e.into_inner());
        *flag
    }
}

/// How often the calling thread wakes to check for Ctrl-C and deliver progress.
const SLICE: Duration = Duration::from_millis(100);

/// What the worker of [`interruptible`] returned: whether it did its work (for work that
/// commits, whether it committed).
pub trait Outcome {
    fn succeeded(&self) -> bool;
}

impl<T, E> Outcome for Result<T, E> {
    fn succeeded(&self) -> bool {
        self.is_ok()
    }
}

/// Runs `f` on a worker thread with the GIL released. Every `SLICE` the calling thread
/// takes the GIL, calls `tick` (progress delivery; an error from it cancels) and checks for
/// signals: on KeyboardInterrupt (or any error) it calls `cancel`, waits for the worker
/// to stop, and raises. `tick` runs once more after the worker finished.
///
/// Work that commits (a load) may pass its commit point before the cancel reaches it
/// (`trellis::Monitor::cancel` is then refused) and go on; `committed` says whether it did.
/// When it did and then succeeded, the exception raised says so: a note (PEP 678,
/// `__notes__`) and `committed = True` on it, so the caller is never told "cancelled" about a
/// load that took effect.
pub fn interruptible<T: Send + Outcome>(
    py: Python<'_>,
    cancel: &(dyn Fn() + Sync),
    committed: &(dyn Fn() -> bool + Sync),
    tick: &mut dyn FnMut(Python<'_>) -> PyResult<()>,
    f: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    let pool = pool()?;
    let done = Done::default();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let out = pool.install(f);
            done.set();
            out
        });
        loop {
            let finished = py.detach(|| done.wait(SLICE));
            // Signals are checked in the last slice too: a Ctrl-C that came as the work
            // finished is raised here, with the note when the work had committed.
            if let Err(e) = tick(py).and_then(|()| py.check_signals()) {
                cancel();
                let out = py.detach(|| worker.join());
                if committed() && out.as_ref().is_ok_and(Outcome::succeeded) {
                    note_committed(py, &e);
                }
                return Err(e);
            }
            if finished {
                break;
            }
        }
        py.detach(|| worker.join()).map_err(|_| errors::setting("the worker thread panicked (a bug in Trellis: please report it)"))
    })
}

/// Marks an exception raised while the work it interrupted went on to completion.
fn note_committed(py: Python<'_>, e: &PyErr) {
    let value = e.value(py);
    let note = "trellis: the work had already passed its commit point and completed: its result is stored";
    // add_note is Python 3.11+; older ones get the attribute alone.
    if value.hasattr("add_note").unwrap_or(false) {
        let _ = value.call_method1("add_note", (note,));
    }
    let _ = value.setattr("committed", true);
}

/// A library progress report as the dict `progress` callbacks get.
pub fn progress_value(p: &trellis::Progress) -> serde_json::Value {
    serde_json::json!({
        "work": p.work.name(), "step": p.step, "steps": p.steps, "stage": p.stage,
        "done": p.done, "total": p.total, "unit": p.unit.name(), "facts": p.facts,
    })
}

/// The progress dict of a batch the glue chunks itself: `done` of `total` items, in the
/// library's shape (what `Retriever::retrieve_many` reports).
fn batch_progress(work: &str, unit: &str, done: u64, total: u64) -> serde_json::Value {
    serde_json::json!({"work": work, "step": 1, "steps": 1, "stage": unit, "done": done, "total": total, "unit": unit, "facts": null})
}

/// Runs `f` with a [`trellis::Monitor`] as [`interruptible`] runs work: the monitor keeps
/// the latest report of each step for the calling thread to hand to `progress` (with the
/// GIL, once a `SLICE`: a step's reports in between are dropped, its last one never, so a
/// step that ends within a slice is still seen finished), and Ctrl-C (or an exception from
/// `progress`) cancels it.
pub fn monitored<T: Send + Outcome>(py: Python<'_>, progress: Option<&Bound<'_, PyAny>>, f: impl FnOnce(&trellis::Monitor) -> T + Send) -> PyResult<T> {
    if let Some(cb) = progress {
        if !cb.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err("progress must be callable"));
        }
    }
    let pending: Arc<Mutex<Vec<trellis::Progress>>> = Arc::default();
    let monitor = match progress {
        None => trellis::Monitor::new(),
        Some(_) => {
            let sink = pending.clone();
            trellis::Monitor::with_callback(move |p| {
                let mut pending = sink.lock().unwrap_or_else(|e| e.into_inner());
                match pending.last_mut() {
                    Some(last) if (last.work, last.step) == (p.work, p.step) => *last = p.clone(),
                    _ => pending.push(p.clone()),
                }
            })
        }
    };
    let mut tick = |py: Python<'_>| -> PyResult<()> {
        let Some(cb) = progress else { return Ok(()) };
        let reports = std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        for p in &reports {
            cb.call1((crate::convert::to_py(py, &progress_value(p))?,))?;
        }
        Ok(())
    };
    let canceller = monitor.clone();
    let cancel = || {
        // Refused past the commit point: `committed` then says so.
        let _ = canceller.cancel();
    };
    interruptible(py, &cancel, &|| canceller.committed(), &mut tick, || f(&monitor))
}

/// Runs `f` over `items` a chunk at a time, chunks in parallel, results in input order, as
/// [`interruptible`] runs work: Ctrl-C (or an exception from `progress`) stops the chunks
/// not yet started and is raised; `progress` gets `{"work", "done", "total", "unit", ...}`
/// when the count of finished items changed. (Retrieval answers go through the library's
/// JSON renderer, `retrieve::jsonl::answer_batch`, a chunk at a time; the library's own
/// `retrieve_many` returns paths without names.)
pub fn chunked<T: Sync, R: Send, E: Send>(
    py: Python<'_>,
    items: &[T],
    chunk: usize,
    (work, unit): (&str, &str),
    progress: Option<&Bound<'_, PyAny>>,
    f: impl Fn(&[T]) -> Result<Vec<R>, E> + Sync,
) -> PyResult<Result<Vec<R>, E>> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let cancel = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let total = items.len() as u64;
    let mut reported = None;
    let mut tick = |py: Python<'_>| -> PyResult<()> {
        let Some(cb) = progress else { return Ok(()) };
        let now = done.load(Ordering::Relaxed);
        if reported == Some(now) {
            return Ok(());
        }
        reported = Some(now);
        cb.call1((crate::convert::to_py(py, &batch_progress(work, unit, now, total))?,)).map(|_| ())
    };
    interruptible(py, &|| cancel.store(true, Ordering::Relaxed), &|| false, &mut tick, || {
        let out: Result<Vec<Vec<R>>, E> = items
            .par_chunks(chunk.max(1))
            .map(|c| {
                // Cancelled: the result is thrown away, so a chunk not started does nothing.
                if cancel.load(Ordering::Relaxed) {
                    return Ok(Vec::new());
                }
                let r = f(c)?;
                done.fetch_add(c.len() as u64, Ordering::Relaxed);
                Ok(r)
            })
            .collect();
        out.map(|v| v.into_iter().flatten().collect())
    })
}
