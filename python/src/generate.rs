//! `trellis.Generator` and `trellis.Pipeline`.

use crate::convert;
use crate::errors;
use crate::run::{chunked, detached, never_closed, Handle};
use crate::store::{store_arg, PyStore};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use trellis::generate::{GenerateSettings, Generated, GenerationInput, Generator};
use trellis::limits;
use trellis::model::RuntimeOptions;
use trellis::pipeline::jsonl::{parse_line, render, PipelineLine};
use trellis::pipeline::{KnowledgeSource, Pipeline, PipelineRequest, PipelineSettings};
use trellis::retrieve::jsonl::resolve_entities;
use trellis::retrieve::RetrieverConfig;
use trellis::settings::GeneratorSpec;

/// A `seed=` argument: any int, checked by the library's range (never an OverflowError).
fn seed_arg(seed: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    seed.filter(|s| !s.is_none()).map(|s| convert::int_arg(s, &limits::SEED)).transpose()
}

/// One generated sequence, and the others when more were asked for.
fn generated_dict<'py>(py: Python<'py>, all: &[Generated]) -> PyResult<Bound<'py, PyAny>> {
    let best = all.first().ok_or_else(|| errors::setting("the generator returned no sequence"))?;
    let mut v = json!({"text": best.text, "tokens": best.tokens, "score": best.score, "finish": best.finish});
    if all.len() > 1 {
        v["responses"] = json!(all.iter().map(|g| json!({"text": g.text, "tokens": g.tokens, "score": g.score, "finish": g.finish})).collect::<Vec<_>>());
    }
    convert::to_py(py, &v)
}

/// A request as `trellis run` reads one: a dict `{"id", "history", "entities",
/// "knowledge", "seed"}`, or a plain history (with `knowledge` and `seed` given apart).
fn pipeline_line(item: &Bound<'_, PyAny>, index: Option<usize>, knowledge: Option<&Bound<'_, PyAny>>, seed: Option<u64>) -> PyResult<(PipelineLine, bool)> {
    let at = |e: &dyn std::fmt::Display| errors::bad_input(index.map_or_else(|| e.to_string(), |i| format!("request {i}: {e}")));
    let (mut v, keep_id) = if item.is_instance_of::<PyDict>() {
        (convert::from_py(item)?, true)
    } else {
        // Checked here so that a string is not read as a list of characters.
        let _ = convert::history(item)?;
        (json!({"history": convert::from_py(item)?}), false)
    };
    if let Some(k) = knowledge {
        v["knowledge"] = convert::from_py(k)?;
    }
    if let Some(s) = seed {
        v["seed"] = s.into();
    }
    let line = parse_line(&v.to_string()).map_err(|e| at(&e))?;
    Ok((line, keep_id))
}

/// Writes replies grounded in knowledge paths with an exported generator.
///
/// ``Generator(model, device="cpu", model_threads=0, sessions=0, **settings)``: ``model``
/// is a generator directory such as ``models/generator-opendialkg``; ``settings`` override
/// its ``trellis.json`` (``trellis respond``'s ``--gen-*`` flags without the prefix:
/// ``strategy="beam"``, ``beams=4``, ``return_sequences``, ``max_new_tokens``,
/// ``temperature``, ``top_k``, ``top_p``, ``seed``, ``stop``, ``no_repeat_ngram_size``,
/// ``min_new_tokens``, ``repetition_penalty``, ``encoding``, ``batch``). Generation
/// releases the GIL. It pickles as its model directory and settings.
#[pyclass(module = "trellis._trellis", name = "Generator", frozen)]
pub struct PyGenerator {
    model: PathBuf,
    options: Py<PyDict>,
    runtime: RuntimeOptions,
    settings: GenerateSettings,
    handle: Handle<Generator>,
}

#[pymethods]
impl PyGenerator {
    #[new]
    #[pyo3(signature = (model, **options))]
    fn new(py: Python<'_>, model: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyGenerator> {
        let spec = GeneratorSpec::read(&convert::settings(options)?).map_err(errors::to_py)?;
        let runtime = spec.runtime.clone();
        let generator = detached(py, || Generator::open(&model, &runtime))?.map_err(errors::to_py)?;
        let settings = spec.apply(generator.settings()).map_err(errors::to_py)?;
        generator.check(&settings).map_err(errors::to_py)?;
        let options = options.map_or_else(|| Ok(PyDict::new(py)), |d| d.copy())?.unbind();
        Ok(PyGenerator { model, options, runtime, settings, handle: Handle::new(generator) })
    }

    /// generate(history, knowledge=None, seed=None) -> dict.
    ///
    /// ``knowledge``: paths to ground the reply in, each a list of triples ``[head,
    /// relation, tail]`` in walking order (``~relation`` walks a fact backwards) or
    /// ``{"head", "relation", "tail", "reverse"}`` as a retriever returns them. Returns
    /// ``{"text", "tokens", "score", "finish"}`` (``finish``: ``"eos"``, ``"stop"`` or
    /// ``"length"``), with ``"responses"`` listing every sequence when more were asked for.
    #[pyo3(signature = (history, knowledge = None, seed = None))]
    fn generate<'py>(
        &self,
        py: Python<'py>,
        history: &Bound<'py, PyAny>,
        knowledge: Option<&Bound<'py, PyAny>>,
        seed: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let list = self.generate_batch(py, &PyList::new(py, [history])?.into_any(), knowledge, seed, None)?;
        list.get_item(0)
    }

    /// generate_batch(requests, knowledge=None, seed=None, progress=None) -> list of dicts.
    ///
    /// Each request is a history or a dict ``{"history", "knowledge", "seed"}``; requests
    /// are generated ``batch`` at a time, batches in parallel, with the GIL released.
    /// ``knowledge`` and ``seed`` given here apply to every request. ``progress`` and Ctrl-C
    /// as in ``Retriever.retrieve_batch`` (``"work": "respond"``, ``"unit": "requests"``).
    #[pyo3(signature = (requests, knowledge = None, seed = None, progress = None))]
    fn generate_batch<'py>(
        &self,
        py: Python<'py>,
        requests: &Bound<'py, PyAny>,
        knowledge: Option<&Bound<'py, PyAny>>,
        seed: Option<&Bound<'py, PyAny>>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let seed = seed_arg(seed)?;
        let mut lines = Vec::new();
        for (i, item) in requests.try_iter()?.enumerate() {
            lines.push(pipeline_line(&item?, Some(i), knowledge, seed)?.0);
        }
        let generator = self.handle.get(|| Generator::open(&self.model, &self.runtime).map_err(errors::to_py), never_closed)?;
        let settings = &self.settings;
        let inputs: Vec<GenerationInput<'_>> =
            lines.iter().map(|l| GenerationInput { history: &l.request.history, knowledge: l.knowledge.as_deref().unwrap_or(&[]), seed: l.seed }).collect();
        let generated =
            chunked(py, &inputs, settings.batch, ("respond", "requests"), progress, |c| generator.generate_batch(c, settings))?.map_err(errors::to_py)?;
        let list = PyList::empty(py);
        for g in generated {
            list.append(generated_dict(py, &g)?)?;
        }
        Ok(list)
    }

    #[getter]
    fn model(&self) -> String {
        self.model.display().to_string()
    }

    fn __repr__(&self) -> String {
        format!("Generator({:?})", self.model.display().to_string())
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let rebuild = py.import("trellis._pickle")?.getattr("generator")?;
        Ok((
            rebuild,
            PyTuple::new(py, [PyString::new(py, &self.model.display().to_string()).into_any(), self.options.clone_ref(py).into_bound(py).into_any()])?,
        ))
    }
}

/// Everything a pipeline is rebuilt from.
struct PipelineSpec {
    cfg: RetrieverConfig,
    generator: PathBuf,
    runtime: RuntimeOptions,
    settings: PipelineSettings,
}

fn open_pipeline(store: Arc<trellis::Store>, spec: &PipelineSpec) -> Result<Pipeline, trellis::Error> {
    let retriever = trellis::retrieve::Retriever::new(store, spec.cfg.clone())?;
    let generator = Generator::open(&spec.generator, &spec.runtime)?;
    Ok(Pipeline::new(retriever, generator, Some(spec.settings.clone()))?)
}

/// Link, retrieve, generate: a dialog in, a reply out.
///
/// ``Pipeline(store, retriever="gsr", model=None, generator=DIR, top=3, batch=8,
/// sessions=0, device="cpu", model_threads=0, **options)`` (``sessions=0``: one per core,
/// the library's default, as ``trellis respond``): the retriever as
/// ``Retriever(store, retriever, model, **options)`` takes it, the generator's settings as
/// ``gen_*`` options (``gen_strategy="beam"``, ``gen_beams=4``, ``gen_max_new_tokens``,
/// ...; ``trellis respond``'s flags), ``top`` retrieved paths handed to the generator,
/// ``batch`` requests retrieved and generated together. ``respond`` and ``respond_batch``
/// release the GIL. It pickles as its store and options.
#[pyclass(module = "trellis._trellis", name = "Pipeline", frozen)]
pub struct PyPipeline {
    store: Py<PyStore>,
    args: Py<PyDict>,
    spec: PipelineSpec,
    refresh: trellis::pipeline::live::RefreshPolicy,
    handle: Handle<Pipeline>,
}

impl PyPipeline {
    /// The pipeline for the next call: under ``refresh="auto"``, moved to the newest
    /// generation first.
    fn get(&self, py: Python<'_>) -> PyResult<Arc<Pipeline>> {
        let held = self.held(py)?;
        if self.refresh == trellis::pipeline::live::RefreshPolicy::Auto && !held.retriever().store().is_current().map_err(errors::to_py)? {
            self.move_on(py, &held)?;
            return self.held(py);
        }
        Ok(held)
    }

    fn held(&self, py: Python<'_>) -> PyResult<Arc<Pipeline>> {
        let store = self.store.bind(py).get().get()?;
        self.handle.get(|| detached(py, || open_pipeline(store, &self.spec))?.map_err(errors::to_py), never_closed)
    }

    fn move_on(&self, py: Python<'_>, held: &Arc<Pipeline>) -> PyResult<bool> {
        let held = held.clone();
        match detached(py, move || held.refreshed())?.map_err(errors::to_py)? {
            Some(newer) => Ok(self.handle.replace(newer)),
            None => Ok(false),
        }
    }
}

/// The library's request of a parsed line (entity keys resolved): the line's fault inside.
fn request_of<'l>(store: &trellis::Store, line: &'l PipelineLine) -> Result<Result<PipelineRequest<'l>, String>, trellis::ReadError> {
    let entities = match &line.request.entities {
        None => None,
        Some(keys) => match resolve_entities(store, keys)? {
            Ok(ids) => Some(ids),
            Err(e) => return Ok(Err(e.to_string())),
        },
    };
    let knowledge = match &line.knowledge {
        None => KnowledgeSource::Retrieved,
        Some(k) if k.is_empty() => KnowledgeSource::Nothing,
        Some(k) => KnowledgeSource::Given(k.as_slice()),
    };
    Ok(Ok(PipelineRequest { history: &line.request.history, entities, knowledge, seed: line.seed }))
}

#[pymethods]
impl PyPipeline {
    /// refresh() -> bool: moves this pipeline's retriever to the newest generation of its
    /// store (models and generator kept; ``True`` when it moved).
    fn refresh(&self, py: Python<'_>) -> PyResult<bool> {
        let held = self.held(py)?;
        self.move_on(py, &held)
    }

    #[new]
    #[pyo3(signature = (store, retriever = "gsr", model = None, generator = None, top = convert::AnyInt::of(3), refresh = "manual", **options), text_signature = "(store, retriever='gsr', model=None, generator=None, top=3, refresh='manual', **options)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: &Bound<'_, PyAny>,
        retriever: &str,
        model: Option<PathBuf>,
        generator: Option<PathBuf>,
        top: convert::AnyInt,
        refresh: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyPipeline> {
        let policy = crate::retrieve::refresh_policy(refresh)?;
        let generator = generator.ok_or_else(|| errors::setting("a pipeline needs generator=DIR (an exported generator: see schema/model.md)"))?;
        let store = store_arg(py, store)?;
        let top = top.check(&limits::KNOWLEDGE_TOP)?;
        let mut given = convert::settings(options)?;
        if let Some(m) = &model {
            given.set("model", m.display().to_string());
        }
        let read = trellis::settings::PipelineSpec::read(retriever, &given).map_err(errors::to_py)?;
        let runtime = read.runtime.clone();
        let opened = {
            let r = detached(py, || Generator::open(&generator, &runtime))?.map_err(errors::to_py)?;
            let settings = read.generator.apply(r.settings()).map_err(errors::to_py)?;
            (r, settings)
        };
        let settings = detached(py, || read.settings(top, opened.1))?.map_err(|e| errors::to_py(trellis::Error::from(e)))?;
        let spec = PipelineSpec { cfg: read.retriever, generator, runtime, settings };
        let arc = store.bind(py).get().get()?;
        let pipeline = detached(py, || -> Result<Pipeline, trellis::Error> {
            let retriever = trellis::retrieve::Retriever::new(arc, spec.cfg.clone())?;
            Ok(Pipeline::new(retriever, opened.0, Some(spec.settings.clone()))?)
        })?
        .map_err(errors::to_py)?;
        let args = options.map_or_else(|| Ok(PyDict::new(py)), |d| d.copy())?;
        args.set_item("retriever", retriever)?;
        args.set_item("model", model.map(|m| m.display().to_string()))?;
        args.set_item("generator", spec.generator.display().to_string())?;
        args.set_item("top", top)?;
        args.set_item("refresh", refresh)?;
        Ok(PyPipeline { store, args: args.unbind(), spec, refresh: policy, handle: Handle::new(pipeline) })
    }

    /// respond(history, knowledge=None, seed=None) -> dict.
    ///
    /// ``history`` is the dialog so far (or a request dict as ``trellis run`` reads:
    /// ``{"id", "history", "entities", "knowledge", "seed"}``); ``knowledge`` replaces
    /// retrieval (``[]``: none). Returns ``trellis respond --json``'s answer:
    /// ``{"response", "mentioned", "knowledge", "paths", "timings"}`` (and ``"id"`` for a
    /// request dict that has one).
    #[pyo3(signature = (history, knowledge = None, seed = None))]
    fn respond<'py>(
        &self,
        py: Python<'py>,
        history: &Bound<'py, PyAny>,
        knowledge: Option<&Bound<'py, PyAny>>,
        seed: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let list = self.answer(py, vec![pipeline_line(history, None, knowledge, seed_arg(seed)?)], false, None)?;
        list.get_item(0)
    }

    /// respond_batch(requests, on_error="stop", progress=None) -> list of dicts, in order.
    ///
    /// Each request is a history or a request dict; ``batch`` of them are retrieved and
    /// generated together, batches in parallel, with the GIL released. A bad request raises
    /// ``BadInputError`` naming its index, or with ``on_error="skip"`` gets ``None`` and a
    /// ``SkippedRequestWarning`` saying which request and why.
    /// ``progress`` and Ctrl-C as in ``Retriever.retrieve_batch`` (``"work": "respond"``).
    #[pyo3(signature = (requests, on_error = "stop", progress = None))]
    fn respond_batch<'py>(
        &self,
        py: Python<'py>,
        requests: &Bound<'py, PyAny>,
        on_error: &str,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let skip = convert::skips_bad_requests(on_error)?;
        let mut lines = Vec::new();
        for (i, item) in requests.try_iter()?.enumerate() {
            lines.push(pipeline_line(&item?, Some(i), None, None));
        }
        self.answer(py, lines, skip, progress)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Pipeline({}, {:?}, generator={:?})",
            self.store.bind(py).get().path().display(),
            self.spec.cfg.kind.name(),
            self.spec.generator.display().to_string()
        )
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let rebuild = py.import("trellis._pickle")?.getattr("pipeline")?;
        Ok((rebuild, PyTuple::new(py, [self.store.clone_ref(py).into_bound(py).into_any(), self.args.clone_ref(py).into_bound(py).into_any()])?))
    }
}

impl PyPipeline {
    fn answer<'py>(
        &self,
        py: Python<'py>,
        lines: Vec<PyResult<(PipelineLine, bool)>>,
        skip: bool,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut parsed = Vec::with_capacity(lines.len());
        for (i, l) in lines.into_iter().enumerate() {
            match l {
                Ok(l) => parsed.push(Some(l)),
                Err(e) if !skip => return Err(e),
                Err(e) => {
                    errors::warn_skipped(py, i, &e.value(py).to_string())?;
                    parsed.push(None)
                }
            }
        }
        let pipeline = self.get(py)?;
        let batch = self.spec.settings.generate.batch.max(1);
        // Per request: its answer, or what is wrong with it (its own fault).
        let store = pipeline.retriever().store();
        let good: Vec<&PipelineLine> = parsed.iter().flatten().map(|(l, _)| l).collect();
        let requests = detached(py, || good.iter().map(|l| request_of(store, l)).collect::<Result<Vec<_>, _>>())?.map_err(errors::to_py)?;
        let ok: Vec<PipelineRequest<'_>> = requests.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
        let replies = chunked(py, &ok, batch, ("respond", "requests"), progress, |c| pipeline.respond_batch(c))?.map_err(errors::to_py)?;
        let mut replies = replies.into_iter();
        let answered: Vec<Result<Value, String>> = good
            .iter()
            .zip(requests)
            .map(|(l, r)| match r {
                Err(e) => Err(e),
                Ok(_) => Ok(replies.next().map_or(Value::Null, |reply| render(&l.request.id, &reply))),
            })
            .collect();
        let mut answered = answered.into_iter();
        let list = PyList::empty(py);
        for (i, p) in parsed.iter().enumerate() {
            let Some((_, keep_id)) = p else {
                list.append(py.None())?;
                continue;
            };
            match answered.next().unwrap_or(Ok(Value::Null)) {
                Ok(mut v) => {
                    if !keep_id {
                        if let Value::Object(m) = &mut v {
                            m.remove("id");
                        }
                    }
                    list.append(convert::to_py(py, &v)?)?;
                }
                Err(e) if skip => {
                    errors::warn_skipped(py, i, &e)?;
                    list.append(py.None())?
                }
                Err(e) => return Err(errors::bad_input(format!("request {i}: {e}"))),
            }
        }
        Ok(list)
    }
}
