//! `trellis.Linker` and `trellis.Retriever`.

use crate::convert;
use crate::errors;
use crate::run::{chunked, detached, monitored, never_closed, Handle};
use crate::store::{store_arg, PyStore};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::Value;
use std::sync::Arc;
use trellis::limits;
use trellis::link::{LinkConfig, Linker};
use trellis::pipeline::live::RefreshPolicy;
use trellis::retrieve::jsonl::{answer_batch, parse_request, AnswerOptions, Request};
use trellis::retrieve::{Retriever, RetrieverConfig};

/// Finds the entities a dialog mentions, against one store.
///
/// ``Linker(store, window=8, max_ngram=32, max_entities=3, min_word_chars=3, decay=0.5)``;
/// ``store`` is a ``Store`` or a path (opened read-only).
#[pyclass(module = "trellis._trellis", name = "Linker", frozen)]
pub struct PyLinker {
    store: Py<PyStore>,
    options: Py<PyDict>,
    cfg: LinkConfig,
    handle: Handle<Linker>,
}

impl PyLinker {
    fn get(&self, py: Python<'_>) -> PyResult<Arc<Linker>> {
        self.handle.get(|| Linker::new(self.store.bind(py).get().get()?, self.cfg.clone()).map_err(errors::to_py), never_closed)
    }
}

#[pymethods]
impl PyLinker {
    #[new]
    #[pyo3(signature = (store, **options))]
    fn new(py: Python<'_>, store: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyLinker> {
        let store = store_arg(py, store)?;
        let cfg = trellis::settings::link(&convert::settings(options)?).map_err(errors::to_py)?;
        let linker = Linker::new(store.bind(py).get().get()?, cfg.clone()).map_err(errors::to_py)?;
        let options = options.map_or_else(|| Ok(PyDict::new(py)), |d| d.copy())?.unbind();
        Ok(PyLinker { store, options, cfg, handle: Handle::new(linker) })
    }

    /// link(text_or_messages) -> list of mention dicts.
    ///
    /// A string is one message; a list is a dialog (each message a string or
    /// ``{"speaker", "text"}``), where a word of a multi-word name linked earlier also links.
    /// Each mention: ``{"message", "speaker", "start", "end", "char_start", "char_end",
    /// "text", "kind", "entities": [{"id", "name", "degree"}]}`` (``start``/``end`` are
    /// byte offsets in UTF-8, ``char_start``/``char_end`` index the Python string).
    fn link<'py>(&self, py: Python<'py>, what: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let linker = self.get(py)?;
        let mentions = if let Ok(text) = what.cast::<PyString>() {
            let text = text.to_cow()?.into_owned();
            detached(py, || linker.link_text(&text))?
        } else {
            let history = convert::history(what)?;
            detached(py, || linker.link_dialog(&history))?
        }
        .map_err(errors::to_py)?;
        convert::serialized(py, &mentions)
    }

    #[getter]
    fn store(&self, py: Python<'_>) -> Py<PyStore> {
        self.store.clone_ref(py)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let rebuild = py.import("trellis._pickle")?.getattr("linker")?;
        Ok((rebuild, PyTuple::new(py, [self.store.clone_ref(py).into_any(), self.options.clone_ref(py).into_any()])?))
    }
}

/// A retriever's configuration from its name, `model` (the gsr retriever's) and keyword
/// options: the library's settings (`trellis retrieve`'s flags without dashes), checked there.
pub fn retriever_config(kind: &str, model: Option<&std::path::Path>, options: Option<&Bound<'_, PyDict>>) -> PyResult<RetrieverConfig> {
    let mut s = convert::settings(options)?;
    if let Some(m) = model {
        s.set("model", m.display().to_string());
    }
    trellis::settings::retriever(kind, &s).map_err(errors::to_py)
}

/// Ranks knowledge paths (1 or 2 facts) for a dialog, against one store.
///
/// ``Retriever(store, kind, model=None, top=10, **options)``: ``kind`` is ``"all"``, ``"random"``,
/// ``"bm25"``, ``"katz"``, ``"pcst"``, ``"gsr"`` (generative retrieval; needs ``model``,
/// an exported retriever directory such as ``models/gsr-opendialkg``, and the store indexed
/// with its tokenizer: ``trellis.index_tokens``), ``"dense"`` (needs ``dense_model``, an
/// exported bi-encoder), ``"surge"`` (needs ``surge_model``, an exported subgraph model) or
/// ``"search"`` (needs ``search_producer`` and the store's text index: ``trellis.index_text``). ``options`` are ``trellis retrieve``'s flags without dashes
/// (``pcst_variant="g-retriever"``, ``pcst_scores="dense"``, ``bm25_turns=3``, ``beams=4``,
/// ``batch=8``, ``window=8``, ``rerank=DIR``, ``rerank_top=20``,
/// ``rerank_pool=["pcst"]``, ``rerank_fusion=1.0``, ...); a value outside its range, or an option this retriever
/// does not use, raises ``SettingError``.
///
/// ``retrieve(history)`` answers one dialog, ``retrieve_batch(histories)`` many (in
/// parallel, the generative retriever decoding ``batch`` of them together); both release
/// the GIL. Answers are dicts as ``trellis retrieve`` writes them:
/// ``{"mentioned": [names], "paths": [{"score", "explanation", "triples": [{"head",
/// "relation", "tail", "reverse"}]}]}``. A retriever pickles as its store, kind and options.
#[pyclass(module = "trellis._trellis", name = "Retriever", frozen)]
pub struct PyRetriever {
    store: Py<PyStore>,
    kind: String,
    model: Option<String>,
    options: Py<PyDict>,
    cfg: RetrieverConfig,
    top: usize,
    refresh: RefreshPolicy,
    handle: Handle<Retriever>,
}

impl PyRetriever {
    /// The retriever for the next call: under ``refresh="auto"``, moved to the newest
    /// generation first.
    fn get(&self, py: Python<'_>) -> PyResult<Arc<Retriever>> {
        let held = self.held(py)?;
        if self.refresh == RefreshPolicy::Auto && !held.store().is_current().map_err(errors::to_py)? {
            self.move_on(py, &held)?;
            return self.held(py);
        }
        Ok(held)
    }

    fn held(&self, py: Python<'_>) -> PyResult<Arc<Retriever>> {
        let store = self.store.bind(py).get().get()?;
        self.handle.get(|| detached(py, || Retriever::new(store, self.cfg.clone()))?.map_err(errors::to_py), never_closed)
    }

    fn move_on(&self, py: Python<'_>, held: &Arc<Retriever>) -> PyResult<bool> {
        let held = held.clone();
        match detached(py, move || held.refreshed())?.map_err(errors::to_py)? {
            Some(newer) => Ok(self.handle.replace(newer)),
            None => Ok(false),
        }
    }
}

/// The ``refresh`` argument, read by the library's parser (`RefreshPolicy`).
pub fn refresh_policy(text: &str) -> PyResult<RefreshPolicy> {
    text.parse::<RefreshPolicy>().map_err(|e| errors::setting(e.to_string()))
}

/// One item of a batch: a request dict (`{"id", "history", "entities"}`, as `trellis
/// retrieve` reads) or a plain history.
pub fn request(item: &Bound<'_, PyAny>, index: usize) -> PyResult<(Request, bool)> {
    if item.is_instance_of::<PyDict>() {
        let line = convert::from_py(item)?.to_string();
        let r = parse_request(&line).map_err(|e| errors::bad_input(format!("request {index}: {e}")))?;
        return Ok((r, true));
    }
    Ok((Request { id: Value::Null, history: convert::history(item)?, entities: None }, false))
}

/// An answer without its `"id"` when the request had none.
fn answer_dict<'py>(py: Python<'py>, mut v: Value, keep_id: bool) -> PyResult<Bound<'py, PyAny>> {
    if !keep_id {
        if let Value::Object(m) = &mut v {
            m.remove("id");
        }
    }
    convert::to_py(py, &v)
}

fn top_of(top: Option<&Bound<'_, PyAny>>, default: usize) -> PyResult<usize> {
    match top {
        None => Ok(default),
        Some(t) => convert::usize_arg(t, &limits::PATHS_TOP),
    }
}

#[pymethods]
impl PyRetriever {
    /// refresh() -> bool: moves this retriever to the newest generation of its store when
    /// one was committed since it was opened (its models kept; ``True`` when it moved).
    /// Calls running meanwhile finish on the generation they started with.
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        let held = self.held(py)?;
        self.move_on(py, &held)
    }

    #[new]
    #[pyo3(signature = (store, kind, model = None, top = convert::AnyInt::of(10), refresh = "manual", **options), text_signature = "(store, kind, model=None, top=10, refresh='manual', **options)")]
    fn new(
        py: Python<'_>,
        store: &Bound<'_, PyAny>,
        kind: &str,
        model: Option<std::path::PathBuf>,
        top: convert::AnyInt,
        refresh: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyRetriever> {
        let policy = refresh_policy(refresh)?;
        let store = store_arg(py, store)?;
        let cfg = retriever_config(kind, model.as_deref(), options)?;
        let top = top.check(&limits::PATHS_TOP)?;
        let arc = store.bind(py).get().get()?;
        let cfg2 = cfg.clone();
        let retriever = detached(py, move || Retriever::new(arc, cfg2))?.map_err(errors::to_py)?;
        let options = options.map_or_else(|| Ok(PyDict::new(py)), |d| d.copy())?;
        options.set_item("top", top)?;
        options.set_item("refresh", refresh)?;
        Ok(PyRetriever {
            store,
            kind: kind.to_owned(),
            model: model.map(|m| m.display().to_string()),
            options: options.unbind(),
            cfg,
            top,
            refresh: policy,
            handle: Handle::new(retriever),
        })
    }

    /// retrieve(history, top=None, entities=None) -> dict.
    ///
    /// ``history``: the dialog so far, oldest first (strings or ``{"speaker", "text"}``).
    /// ``entities``: entity keys to start from instead of linking the history. At most
    /// ``top`` paths (default: the retriever's ``top``), best first.
    #[pyo3(signature = (history, top = None, entities = None))]
    fn retrieve<'py>(
        &self,
        py: Python<'py>,
        history: &Bound<'py, PyAny>,
        top: Option<&Bound<'py, PyAny>>,
        entities: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = Request { id: Value::Null, history: convert::history(history)?, entities };
        let opts = AnswerOptions::new(top_of(top.filter(|t| !t.is_none()), self.top)?);
        let retriever = self.get(py)?;
        let mut out = detached(py, || answer_batch(retriever.store(), &retriever, &[&request], &opts))?.map_err(errors::to_py)?;
        let answer = out.pop().unwrap_or(Ok(Value::Null)).map_err(|e| errors::bad_input(e.to_string()))?;
        answer_dict(py, answer, false)
    }

    /// retrieve_batch(histories, top=None, on_error="stop", progress=None) -> list of dicts.
    ///
    /// Each item is a history (a list of messages) or a request dict ``{"id", "history",
    /// "entities"}`` as ``trellis retrieve`` reads (its answer keeps the ``"id"``). Requests
    /// are answered in parallel with the GIL released; the generative retriever decodes
    /// ``batch`` of them together. A bad request raises ``BadInputError`` naming its index,
    /// or with ``on_error="skip"`` gets ``None`` in its place and a ``SkippedRequestWarning``
    /// saying which request and why (as the command line reports a skipped line). ``progress`` is called on the
    /// calling thread (at most ten times a second) with ``{"work": "retrieve", "done",
    /// "total", "unit": "turns", ...}``; Ctrl-C stops the batch and raises
    /// ``KeyboardInterrupt``.
    #[pyo3(signature = (histories, top = None, on_error = "stop", progress = None))]
    fn retrieve_batch<'py>(
        &self,
        py: Python<'py>,
        histories: &Bound<'py, PyAny>,
        top: Option<&Bound<'py, PyAny>>,
        on_error: &str,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let skip = convert::skips_bad_requests(on_error)?;
        let opts = AnswerOptions::new(top_of(top.filter(|t| !t.is_none()), self.top)?);
        let mut requests: Vec<Result<(Request, bool), PyErr>> = Vec::new();
        for (i, item) in histories.try_iter()?.enumerate() {
            let r = request(&item?, i);
            if let (true, Err(e)) = (skip, &r) {
                errors::warn_skipped(py, i, &e.value(py).to_string())?;
            }
            requests.push(r);
        }
        // Bad items first: raise, or keep their place.
        if !skip {
            if let Some(i) = requests.iter().position(Result::is_err) {
                return Err(requests.swap_remove(i).err().expect("an error"));
            }
        }
        let retriever = self.get(py)?;
        let good: Vec<&Request> = requests.iter().filter_map(|r| r.as_ref().ok().map(|(r, _)| r)).collect();
        let chunk = retriever.batch_size().max(1);
        let answered =
            chunked(py, &good, chunk, ("retrieve", "turns"), progress, |c| answer_batch(retriever.store(), &retriever, c, &opts))?.map_err(errors::to_py)?;
        let mut answers = answered.into_iter();
        let list = PyList::empty(py);
        for (i, r) in requests.iter().enumerate() {
            match r {
                Err(_) => list.append(py.None())?,
                Ok((_, keep_id)) => match answers.next().unwrap_or(Ok(Value::Null)) {
                    Ok(v) => list.append(answer_dict(py, v, *keep_id)?)?,
                    Err(e) if skip => {
                        errors::warn_skipped(py, i, &e.to_string())?;
                        list.append(py.None())?
                    }
                    Err(e) => return Err(errors::bad_input(format!("request {i}: {e}"))),
                },
            }
        }
        Ok(list)
    }

    /// The retriever's name.
    #[getter]
    fn kind(&self) -> &str {
        &self.kind
    }

    /// The model directory (gsr), else None.
    #[getter]
    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    #[getter]
    fn store(&self, py: Python<'_>) -> Py<PyStore> {
        self.store.clone_ref(py)
    }

    /// Requests decoded together (1 for the retrievers that gain nothing from it).
    #[getter]
    fn batch_size(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.get(py)?.batch_size())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let model = self.model.as_ref().map_or(String::new(), |m| format!(", model={m:?}"));
        Ok(format!("Retriever({}, {:?}{model})", self.store.bind(py).get().path().display(), self.kind))
    }

    /// Pickles as what rebuilds it: the store, the kind, the model and the options.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let rebuild = py.import("trellis._pickle")?.getattr("retriever")?;
        let model = self.model.clone().into_pyobject(py)?.into_any();
        let args = PyTuple::new(
            py,
            [
                self.store.clone_ref(py).into_bound(py).into_any(),
                PyString::new(py, &self.kind).into_any(),
                model,
                self.options.clone_ref(py).into_bound(py).into_any(),
            ],
        )?;
        Ok((rebuild, args))
    }
}

impl PyRetriever {
    pub fn retriever(&self, py: Python<'_>) -> PyResult<Arc<Retriever>> {
        self.get(py)
    }

    pub fn store_handle(&self) -> &Py<PyStore> {
        &self.store
    }

    pub fn config(&self) -> &RetrieverConfig {
        &self.cfg
    }
}

/// evaluate_retrieval(retriever, dialogs, dataset="opendialkg", actions="all",
/// k=None, max_turns=None, progress=None) -> dict: ``trellis eval retrieval --json`` (path@k,
/// triple recall@k, MRR, hits@k, P/R/F1, latency) of ``retriever`` on the turns with a gold
/// path of ``dialogs`` (an OpenDialKG csv, or MetaQA JSON lines with
/// ``dataset="metaqa"``); ``progress`` and Ctrl-C as ``ingest`` has them (``"work":
/// "evaluate"``, in turns); ``k``: the cut-offs of path@k and triple recall@k (default 1, 3, 5,
/// 10); ``actions``: ``"all"``, ``"assistant"`` or ``"user"``.
#[pyfunction]
#[pyo3(signature = (retriever, dialogs, dataset = "opendialkg", actions = "all", k = None, max_turns = None, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn evaluate_retrieval<'py>(
    py: Python<'py>,
    retriever: &Bound<'py, PyRetriever>,
    dialogs: std::path::PathBuf,
    dataset: &str,
    actions: &str,
    k: Option<Vec<Bound<'py, PyAny>>>,
    max_turns: Option<&Bound<'py, PyAny>>,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let k = match k {
        None => vec![1, 3, 5, 10],
        Some(ks) => ks.iter().map(|v| convert::usize_arg(v, &limits::EVAL_K)).collect::<PyResult<Vec<usize>>>()?,
    };
    let max_turns = max_turns.filter(|m| !m.is_none()).map(|m| convert::usize_arg(m, &limits::MAX_TURNS)).transpose()?;
    let speaker = match actions {
        "all" => None,
        "assistant" | "user" => Some(actions.to_owned()),
        other => return Err(errors::setting(format!("actions must be \"all\", \"assistant\" or \"user\", not {other:?}"))),
    };
    let read = match dataset {
        "opendialkg" => trellis::dataset::opendialkg::read,
        "metaqa" => trellis::dataset::metaqa::read,
        other => return Err(errors::setting(format!("dataset must be \"opendialkg\" or \"metaqa\", not {other:?}"))),
    };
    let r = retriever.get().get(py)?;
    let report = monitored(py, progress, |monitor| -> Result<_, trellis::Error> {
        let mut dialogs = read(&dialogs)?;
        if let Some(s) = &speaker {
            trellis::dataset::opendialkg::keep_samples_of(&mut dialogs, s);
        }
        if let Some(mut n) = max_turns {
            for d in &mut dialogs {
                let keep = d.samples.len().min(n);
                d.samples.truncate(keep);
                n -= keep;
            }
        }
        Ok(trellis::eval::retrieval::evaluate(r.store(), &r, &dialogs, &k, monitor)?)
    })?
    .map_err(errors::to_py)?;
    convert::serialized(py, &report)
}

/// check_settings(component, kind=None, **options) -> None.
///
/// The library's check of settings alone, opening no store and no model: ``component`` is
/// ``"linker"``, ``"retriever"`` (``kind`` its name) or ``"pipeline"`` (``kind`` the
/// retriever's name; generator settings ``gen_*``). Raises ``SettingError`` with the sentence
/// ``Retriever``, ``Pipeline`` and the command line give; what a model's own ``trellis.json``
/// decides (a generator's strategy) is checked when the model is opened.
#[pyfunction]
#[pyo3(signature = (component, kind = None, **options))]
pub fn check_settings(component: &str, kind: Option<&str>, options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let s = convert::settings(options)?;
    let kind = || kind.ok_or_else(|| errors::setting(format!("check_settings(\"{component}\") needs kind= (the retriever's name)")));
    match component {
        "linker" => trellis::settings::link(&s).map(drop),
        "retriever" => trellis::settings::retriever(kind()?, &s).map(drop),
        "pipeline" => trellis::settings::PipelineSpec::read(kind()?, &s).map(drop),
        other => return Err(errors::setting(format!("component must be \"linker\", \"retriever\" or \"pipeline\", not {other:?}"))),
    }
    .map_err(errors::to_py)
}
