//! `trellis.Store`: a store directory opened for reading (or for writing), and its reads.

use crate::convert;
use crate::errors;
use crate::run::{detached, Handle};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyTuple};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use trellis::graph::neighborhood;
use trellis::limits;
use trellis::store::EntityMatch;
use trellis::{Direction, EntityId, RelationId};

/// A Trellis store: a directory of RocksDB generations (`trellis ingest` makes one).
///
/// Open one with ``Store.open_read_only(path)`` (any number of readers, also while a load
/// writes a new generation) or ``Store.open(path)`` (holds the writer lock while open,
/// migrating an older format first); ``Store(path)`` is ``open_read_only``. Reads release
/// the GIL. A handle pickles as its path and mode, and reopens itself when used in a
/// forked child, so it can be shipped to worker processes.
#[pyclass(module = "trellis._trellis", name = "Store", frozen)]
pub struct PyStore {
    path: PathBuf,
    read_only: bool,
    handle: Handle<trellis::Store>,
}

fn open(path: &std::path::Path, read_only: bool) -> Result<trellis::Store, trellis::OpenError> {
    if read_only {
        trellis::Store::open_read_only(path)
    } else {
        trellis::Store::open(path)
    }
}

/// The store directories this process holds open for writing (`Store.open`), with the
/// process that registered them: a load or token index of the same directory from this
/// process is refused at once, naming the handle to close, instead of waiting for a lock
/// this process itself holds.
static WRITERS: std::sync::Mutex<Vec<(u32, PathBuf)>> = std::sync::Mutex::new(Vec::new());

/// A directory's identity for [`WRITERS`]: its canonical path where it exists.
fn writer_key(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn writers() -> std::sync::MutexGuard<'static, Vec<(u32, PathBuf)>> {
    WRITERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// `Err` when this process holds `dir` open for writing through a `Store` handle.
pub fn check_not_held_for_writing(dir: &std::path::Path) -> PyResult<()> {
    let key = writer_key(dir);
    if writers().iter().any(|(pid, p)| *pid == std::process::id() && *p == key) {
        return Err(errors::store_error(
            dir,
            format!(
                "{}: this process holds the store open for writing (trellis.Store.open): close that handle first (store.close(), or open it in a `with` block)",
                dir.display()
            ),
        ));
    }
    Ok(())
}

impl PyStore {
    pub fn open_with(py: Python<'_>, path: PathBuf, read_only: bool) -> PyResult<PyStore> {
        if !read_only {
            check_not_held_for_writing(&path)?;
        }
        let store = detached(py, || open(&path, read_only))?.map_err(errors::to_py)?;
        if !read_only {
            writers().push((std::process::id(), writer_key(&path)));
        }
        Ok(PyStore { handle: Handle::new(store), path, read_only })
    }

    /// The library's store of this process.
    pub fn get(&self) -> PyResult<Arc<trellis::Store>> {
        self.handle.get(
            || open(&self.path, self.read_only).map_err(errors::to_py),
            || pyo3::exceptions::PyValueError::new_err(format!("the store {} is closed", self.path.display())),
        )
    }

    /// Lets go of the store (and, for a writer, of its entry in [`WRITERS`]).
    fn release(&self) {
        if self.handle.is_closed() {
            return;
        }
        self.handle.close();
        if !self.read_only {
            let key = writer_key(&self.path);
            let pid = std::process::id();
            let mut w = writers();
            if let Some(i) = w.iter().position(|(p, k)| *p == pid && *k == key) {
                w.remove(i);
            }
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for PyStore {
    /// A handle collected without `close()` lets go of its entry in [`WRITERS`] too.
    fn drop(&mut self) {
        self.release();
    }
}

/// How an entity was found, as the command line's `entity --json` names it.
fn match_name(m: Option<EntityMatch>) -> &'static str {
    match m {
        None => "id",
        Some(EntityMatch::Key) => "key",
        Some(EntityMatch::Prefixed) => "prefixed",
        Some(EntityMatch::LocalName) => "local_name",
        Some(EntityMatch::Name) => "name",
        Some(EntityMatch::Alias) => "alias",
    }
}

/// The entities `what` names: an int is an id; a string is `#ID`, or what
/// `Store::resolve_entity` finds (key, prefixed IRI, local name, name, alias).
fn resolve(store: &trellis::Store, what: &Target) -> Result<Vec<(EntityId, Option<EntityMatch>)>, trellis::ReadError> {
    match what {
        Target::Id(id) => Ok(if u64::from(*id) < store.entity_count() { vec![(EntityId(*id), None)] } else { Vec::new() }),
        Target::Text(text) => {
            if let Some(id) = text.strip_prefix('#').and_then(|n| n.parse::<u32>().ok()) {
                return resolve(store, &Target::Id(id));
            }
            Ok(store.resolve_entity(text)?.into_iter().map(|c| (c.id, Some(c.matched))).collect())
        }
    }
}

enum Target {
    Id(u32),
    Text(String),
}

fn target(obj: &Bound<'_, PyAny>) -> PyResult<Target> {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<pyo3::types::PyBool>() {
        // As text: an int of any size is refused with the same sentence, not an OverflowError.
        let id = obj.str()?.to_cow()?.into_owned();
        return id.parse::<u32>().map(Target::Id).map_err(|_| errors::bad_input(format!("no entity #{id}: ids are 0..2^32")));
    }
    Ok(Target::Text(obj.extract::<String>().map_err(|_| pyo3::exceptions::PyTypeError::new_err("an entity is a name or key (str) or an id (int)"))?))
}

#[pymethods]
impl PyStore {
    /// Store(path, read_only=True): the store at ``path``.
    #[new]
    #[pyo3(signature = (path, read_only = true))]
    fn new(py: Python<'_>, path: PathBuf, read_only: bool) -> PyResult<PyStore> {
        PyStore::open_with(py, path, read_only)
    }

    /// Opens the store for reading and writing (migrating an older format first). The
    /// writer lock is held until the handle is garbage-collected: loads wait for it.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<PyStore> {
        PyStore::open_with(py, path, false)
    }

    /// Opens the store for reading only: it keeps the generation it opened, registered
    /// as a reader, so a load committed meanwhile does not remove it.
    #[staticmethod]
    fn open_read_only(py: Python<'_>, path: PathBuf) -> PyResult<PyStore> {
        PyStore::open_with(py, path, true)
    }

    /// The generation this handle reads (``gen-NNNNNN``): every load, update, token index and
    /// migration commits the next one.
    #[getter]
    fn generation(&self) -> PyResult<u64> {
        Ok(self.get()?.generation())
    }

    /// refresh() -> bool: moves this handle to the newest generation when one was committed
    /// since it was opened (``True`` when it moved). Retrievers and pipelines built on it
    /// keep the generation they read until their own ``refresh()``.
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        let store = self.get()?;
        match detached(py, || store.refresh())?.map_err(errors::to_py)? {
            Some(newer) => Ok(self.handle.replace(newer)),
            None => Ok(false),
        }
    }

    /// update(changes=None, add=None, retract=None, format=None, delete=None, rename=None,
    /// alias=None, unalias=None, retract_source=None, source=None, on_error="stop", lang="en",
    /// progress=None) -> dict
    ///
    /// ``trellis.update`` on this store's directory, then ``refresh()``: this handle reads
    /// the updated store. Refused on a handle opened for writing (it holds the lock).
    #[pyo3(signature = (changes = None, add = None, retract = None, format = None, delete = None, rename = None, alias = None, unalias = None, retract_source = None, source = None, on_error = "stop", lang = "en", progress = None))]
    #[allow(clippy::too_many_arguments)]
    fn update<'py>(
        &self,
        py: Python<'py>,
        changes: Option<&Bound<'py, PyAny>>,
        add: Option<&Bound<'py, PyAny>>,
        retract: Option<&Bound<'py, PyAny>>,
        format: Option<&str>,
        delete: Option<&Bound<'py, PyAny>>,
        rename: Option<&Bound<'py, PyAny>>,
        alias: Option<&Bound<'py, PyAny>>,
        unalias: Option<&Bound<'py, PyAny>>,
        retract_source: Option<&Bound<'py, PyAny>>,
        source: Option<String>,
        on_error: &str,
        lang: &str,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let changes = crate::ingest::changes_of(changes, add, retract, format, delete, rename, alias, unalias, retract_source)?;
        let report = crate::ingest::run_update(py, &self.path, changes, on_error, lang, source, progress)?;
        self.refresh(py)?;
        convert::serialized(py, &report)
    }

    /// The store's directory.
    #[getter(path)]
    fn path_str(&self) -> String {
        self.path.display().to_string()
    }

    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// Entities of the open generation.
    #[getter]
    fn entity_count(&self) -> PyResult<u64> {
        Ok(self.get()?.entity_count())
    }

    #[getter]
    fn relation_count(&self) -> PyResult<u64> {
        Ok(self.get()?.relation_count())
    }

    /// Counts, format, loads, size on disk (per column family) and the token indexes, as a
    /// dict (``trellis stats --json``).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = self.get()?;
        let (stats, tokenizers) = detached(py, || (store.stats(), store.tokenizers()))?;
        let mut v = serde_json::to_value(&stats).map_err(|e| errors::setting(e.to_string()))?;
        v["token_indexes"] = serde_json::to_value(tokenizers.map_err(errors::to_py)?).map_err(|e| errors::setting(e.to_string()))?;
        convert::to_py(py, &v)
    }

    /// entity(what) -> list of dicts: the entities ``what`` names (an id, ``"#ID"``, an
    /// exact key, a prefixed IRI, a local name, a name or alias, case-insensitive), each
    /// ``{"id", "kind", "key", "name", "aliases", "out_degree", "in_degree", "matched"}``.
    /// Empty when nothing matches.
    fn entity<'py>(&self, py: Python<'py>, what: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let what = target(what)?;
        let store = self.get()?;
        let found = detached(py, || -> Result<_, trellis::ReadError> {
            let mut out = Vec::new();
            for (id, matched) in resolve(&store, &what)? {
                if let Some(info) = store.entity_info(id)? {
                    out.push((info, matched));
                }
            }
            Ok(out)
        })?
        .map_err(errors::to_py)?;
        let list = PyList::empty(py);
        for (info, matched) in found {
            let d = convert::serialized(py, &info)?;
            d.set_item("matched", match_name(matched))?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// neighbors(entity, relation=None, hops=1, limit=100) -> list of dicts: the facts
    /// around each entity ``entity`` names (as ``entity``), ``{"start", "head", "relation",
    /// "tail", "reverse", "hop"}`` (``trellis neighbors --json`` plus the start's name);
    /// ``relation`` (a key or name) keeps the first hop to it; ``hops`` is 1 or 2; at most
    /// ``limit`` facts per start entity.
    #[pyo3(signature = (entity, relation = None, hops = convert::AnyInt::of(1), limit = convert::AnyInt::of(100)), text_signature = "($self, entity, relation=None, hops=1, limit=100)")]
    fn neighbors<'py>(
        &self,
        py: Python<'py>,
        entity: &Bound<'py, PyAny>,
        relation: Option<String>,
        hops: convert::AnyInt,
        limit: convert::AnyInt,
    ) -> PyResult<Bound<'py, PyList>> {
        let what = target(entity)?;
        let hops = hops.check(&limits::HOPS)? as u8;
        let limit = limit.check(&limits::LIMIT)?;
        let store = self.get()?;
        let rows = detached(py, || -> PyResult<Vec<serde_json::Value>> {
            let read = |e: trellis::ReadError| errors::to_py(e);
            let relation: Option<RelationId> = match &relation {
                None => None,
                Some(text) => match store.resolve_relation(text).map_err(read)?.as_slice() {
                    [] => return Err(errors::bad_input(format!("no relation named {text:?}"))),
                    [r] => Some(*r),
                    many => return Err(errors::bad_input(format!("{} relations are named {text:?}; give the exact key", many.len()))),
                },
            };
            let name = |e: EntityId| -> PyResult<String> { Ok(store.entity(e).map_err(read)?.map_or_else(|| format!("#{}", e.0), |r| r.name)) };
            let rel_name = |r: RelationId| -> PyResult<String> { Ok(store.relation(r).map_err(read)?.map_or_else(|| format!("r{}", r.0), |r| r.name)) };
            let mut rows = Vec::new();
            for (start, _) in resolve(&store, &what).map_err(read)? {
                let mut steps = Vec::new();
                neighborhood(&store, start, relation, hops, limit, |s| steps.push(s)).map_err(read)?;
                let start_name = name(start)?;
                for step in steps {
                    let (h, r, t) = step.fact();
                    rows.push(json!({"start": start_name, "head": name(h)?, "relation": rel_name(r)?, "tail": name(t)?, "reverse": step.edge.direction == Direction::In, "hop": step.hop}));
                }
            }
            Ok(rows)
        })??;
        let list = PyList::empty(py);
        for row in &rows {
            list.append(convert::to_py(py, row)?)?;
        }
        Ok(list)
    }

    /// search(text, top=10, exact=False) -> list of dicts: the entities whose text-index
    /// documents best match ``text`` (``trellis search --json``'s hits): ``{"rank",
    /// "entity", "name", "score", "aliases", "matched_facts": [[subject, relation, object],
    /// ...]}`` (and ``"text"`` for an entity a documents input gave one), best first. Needs the store's text index (``trellis index-text``); a stale or
    /// missing one raises ``StoreError`` naming the command, a text without words
    /// ``BadInputError``, ``top`` outside 1..=1000 ``SettingError``.
    #[pyo3(signature = (text, top = convert::AnyInt::of(10), exact = false), text_signature = "($self, text, top=10, exact=False)")]
    fn search<'py>(&self, py: Python<'py>, text: String, top: convert::AnyInt, exact: bool) -> PyResult<Bound<'py, PyList>> {
        let top = top.check(&limits::TOP)?;
        let store = self.get()?;
        let rows = detached(py, || -> Result<Vec<serde_json::Value>, trellis::text::TextError> {
            let index = trellis::text::TextIndex::open(&store)?;
            let hits = index.search(&text, top, trellis::text::SearchOptions { fuzzy: !exact })?;
            Ok(hits
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let facts: Vec<[&str; 3]> = h
                        .matched
                        .iter()
                        .map(|&f| {
                            let (s, r, o) = h.document.facts[f].triple(&h.document.name);
                            [s, r, o]
                        })
                        .collect();
                    let mut row = json!({"rank": i + 1, "entity": h.entity.0, "name": h.document.name, "score": h.score, "aliases": h.document.aliases, "matched_facts": facts});
                    if !h.document.text.is_empty() {
                        row["text"] = json!(h.document.text);
                    }
                    row
                })
                .collect())
        })?
        .map_err(errors::to_py)?;
        let list = PyList::empty(py);
        for row in &rows {
            list.append(convert::to_py(py, row)?)?;
        }
        Ok(list)
    }

    /// Checks that every index agrees with every other; a dict (``trellis validate
    /// --json``) whose ``"problems"`` list is empty for a sound store.
    fn validate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = self.get()?;
        let report = detached(py, || store.validate())?.map_err(errors::to_py)?;
        convert::serialized(py, &report)
    }

    /// Closes the handle: a writer's lock is released (once no retriever or pipeline built
    /// on this handle holds the store), later reads raise ``ValueError``. Closing twice is
    /// harmless. ``with trellis.Store.open(path) as store:`` closes at the block's end.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.release());
    }

    /// Whether ``close`` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "Store({:?}, read_only={}){}",
            self.path.display().to_string(),
            if self.read_only { "True" } else { "False" },
            if self.handle.is_closed() { " (closed)" } else { "" }
        )
    }

    /// Pickles as what reopens it: the path and the mode.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let me = slf.get();
        let args =
            PyTuple::new(py, [me.path.display().to_string().into_pyobject(py)?.into_any(), pyo3::types::PyBool::new(py, me.read_only).to_owned().into_any()])?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// A store argument: a `Store`, or a path opened read-only.
pub fn store_arg(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyStore>> {
    if let Ok(s) = obj.cast::<PyStore>() {
        return Ok(s.clone().unbind());
    }
    let path = convert::path(obj).map_err(|_| pyo3::exceptions::PyTypeError::new_err("a store is a trellis.Store or a path"))?;
    Py::new(py, PyStore::open_with(py, path, true)?)
}
