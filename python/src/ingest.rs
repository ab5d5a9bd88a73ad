//! `trellis.ingest`, `trellis.index_tokens` and `trellis.index_text`: the writers.

use crate::convert;
use crate::errors;
use crate::run::{detached, monitored};
use crate::store::PyStore;
use pyo3::prelude::*;
use std::path::PathBuf;
use trellis::ingest::{BulkLoader, Change, Compression, Format, InputSpec, NameTokenizer, OnError, UpdateReport, Updater};
use trellis::limits;
use trellis::linearize::Linearization;

/// A store argument of a writer: its directory (a `Store` handle gives its path).
fn store_dir(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    if let Ok(s) = obj.cast::<PyStore>() {
        return Ok(s.get().path().to_path_buf());
    }
    convert::path(obj).map_err(|_| pyo3::exceptions::PyTypeError::new_err("a store is a path or a trellis.Store"))
}

fn named<T: std::str::FromStr>(v: Option<&str>) -> PyResult<Option<T>>
where
    T::Err: std::fmt::Display,
{
    v.map(|s| s.parse::<T>().map_err(|e| errors::setting(e.to_string()))).transpose()
}

/// ingest(store, files, format=None, compression=None, on_error="stop", rejects=None,
/// memory_mb=1024, threads=None, reverse_prefix="~", lang="en", progress=None, source=None) -> dict
///
/// Loads triple files (TSV, pipe-separated or N-Triples, optionally gzip, bzip2 or zstd)
/// into the store at ``store`` (a path, created when missing; a second load adds to it) as
/// one new generation, like ``trellis ingest``; returns its load report. ``on_error="stop"``
/// raises ``BadInputError`` (with ``.path`` and ``.line``) at the first malformed line and
/// stores nothing; ``"skip"`` loads the rest and writes rejected lines to ``rejects``.
/// ``progress`` is called about ten times a second on the calling thread with a dict
/// ``{"work", "step", "steps", "stage", "done", "total", "unit", "facts"}`` (the library's
/// ``trellis::Progress``: one step per input file, in bytes, with the facts read so far;
/// then the writing steps, in facts). The GIL is
/// released; Ctrl-C (or an exception raised by ``progress``) cancels the load, leaving the
/// store as it was, and is re-raised; a cancel that comes after the load's commit point is
/// too late: the load completes and the exception has ``committed = True`` and a note.
/// ``source`` names the load's facts (provenance: ``update(retract_source=...)``).
#[pyfunction]
#[pyo3(
    signature = (store, files, format = None, compression = None, on_error = "stop", rejects = None, memory_mb = convert::AnyInt::of(1024), threads = None, reverse_prefix = "~", lang = "en", progress = None, source = None),
    text_signature = "(store, files, format=None, compression=None, on_error='stop', rejects=None, memory_mb=1024, threads=None, reverse_prefix='~', lang='en', progress=None, source=None)"
)]
#[allow(clippy::too_many_arguments)]
pub fn ingest<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    files: &Bound<'py, PyAny>,
    format: Option<&str>,
    compression: Option<&str>,
    on_error: &str,
    rejects: Option<PathBuf>,
    memory_mb: convert::AnyInt,
    threads: Option<convert::AnyInt>,
    reverse_prefix: &str,
    lang: &str,
    progress: Option<&Bound<'py, PyAny>>,
    source: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let dir = store_dir(store)?;
    crate::store::check_not_held_for_writing(&dir)?;
    let files: Vec<PathBuf> =
        if files.is_instance_of::<pyo3::types::PyString>() || convert::path(files).is_ok() && !files.is_instance_of::<pyo3::types::PyList>() {
            vec![convert::path(files)?]
        } else {
            files.try_iter()?.map(|f| convert::path(&f?)).collect::<PyResult<_>>()?
        };
    let format: Option<Format> = named(format)?;
    let compression: Option<Compression> = named(compression)?;
    let on_error: OnError = named(Some(on_error))?.unwrap_or_default();
    let memory_mb = memory_mb.check(&limits::MEMORY_MB)?;
    let threads = threads.map(|t| t.check(&limits::THREADS)).transpose()?.filter(|&t| t > 0);
    let inputs: Vec<InputSpec> = files.iter().map(|p| InputSpec { path: p.clone(), format, compression }).collect();
    let mut loader = BulkLoader::new(&dir).with_memory_mb(memory_mb).on_error(on_error).with_reverse_prefix(reverse_prefix).with_lang(lang);
    if let Some(t) = threads {
        loader = loader.with_threads(t);
    }
    if let Some(r) = rejects {
        loader = loader.with_rejects_file(r);
    }
    if let Some(s) = source {
        loader = loader.with_source(s);
    }
    let report = monitored(py, progress, |monitor| loader.with_monitor(monitor.clone()).load(&inputs))?.map_err(errors::to_py)?;
    convert::serialized(py, &report)
}

/// index_tokens(store, tokenizer, name=None, linearization="trellis", progress=None) -> dict
///
/// Builds the token index of a model's tokenizer (``tokenizer.json``) in the store at
/// ``store``, as ``trellis index-tokens`` does: what the generative retriever decodes
/// against. ``linearization`` is ``"trellis"``, ``"dialoggsr"`` or a JSON file. Returns the
/// index's record. ``progress`` gets the same dicts as ``ingest``'s (``"work":
/// "index-tokens"``, in names). The GIL is released; Ctrl-C cancels the indexing (nothing
/// is committed) and is re-raised.
#[pyfunction]
#[pyo3(signature = (store, tokenizer, name = None, linearization = "trellis", progress = None))]
pub fn index_tokens<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    tokenizer: PathBuf,
    name: Option<String>,
    linearization: &str,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let dir = store_dir(store)?;
    crate::store::check_not_held_for_writing(&dir)?;
    let linearization = Linearization::from_arg(linearization).map_err(errors::to_py)?;
    let name = name.unwrap_or_else(|| tokenizer.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
    let tok = detached(py, || NameTokenizer::from_file(&tokenizer, linearization))?.map_err(errors::to_py)?;
    let info = monitored(py, progress, |monitor| trellis::Store::index_tokens(&dir, &tok, &name, monitor))?.map_err(errors::to_py)?;
    convert::serialized(py, &info)
}

/// index_text(store, documents=None, on_error="stop", progress=None) -> dict
///
/// Builds the store's text index, as ``trellis index-text`` does: one document per entity
/// (name, aliases, up to 32 facts), what ``Store.search`` and the query producer read.
/// ``documents``: a JSON-lines file of ``{"title", "text"}`` whose texts join the documents
/// of the entities their titles name; ``on_error="skip"`` leaves out documents whose title
/// names no entity (``"stop"`` refuses the file, naming the line).
/// Returns ``{"record": ..., "documents": N, "texts": {"read", "matched", "skipped"}}``.
/// ``progress`` gets the same dicts as ``ingest``'s (``"work": "index-text"``, in
/// documents). The GIL is released; Ctrl-C cancels (nothing is committed) and is re-raised.
#[pyfunction]
#[pyo3(signature = (store, documents = None, on_error = "stop", progress = None))]
pub fn index_text<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    documents: Option<&Bound<'py, PyAny>>,
    on_error: &str,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let dir = store_dir(store)?;
    crate::store::check_not_held_for_writing(&dir)?;
    let on_error: OnError = named(Some(on_error))?.unwrap_or_default();
    let documents = match documents {
        None => None,
        Some(p) => Some(trellis::text::DocumentsInput {
            path: convert::path(p)?,
            unmatched: if on_error == OnError::Skip { trellis::text::Unmatched::Skip } else { trellis::text::Unmatched::Stop },
        }),
    };
    let report = monitored(py, progress, |monitor| trellis::Store::index_text(&dir, documents.as_ref(), monitor))?.map_err(errors::to_py)?;
    convert::serialized(py, &report)
}

/// Pairs `(key, text)` from a dict ``{key: text}`` or an iterable of pairs.
fn pairs(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Vec<(String, String)>> {
    let Some(obj) = obj else { return Ok(Vec::new()) };
    if let Ok(d) = obj.cast::<pyo3::types::PyDict>() {
        return d
            .iter()
            .map(|(k, v)| Ok((k.extract::<String>()?, v.extract::<String>()?)))
            .collect::<PyResult<_>>()
            .map_err(|_: PyErr| pyo3::exceptions::PyTypeError::new_err(format!("{what} is a dict of str to str or a list of (key, text) pairs")));
    }
    obj.try_iter()?
        .map(|p| p?.extract::<(String, String)>())
        .collect::<PyResult<_>>()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("{what} is a dict of str to str or a list of (key, text) pairs")))
}

fn strings(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Vec<String>> {
    let Some(obj) = obj else { return Ok(Vec::new()) };
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Ok(vec![obj.extract()?]);
    }
    obj.try_iter()?
        .map(|p| p?.extract::<String>())
        .collect::<PyResult<_>>()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("{what} is a str or a list of str")))
}

fn paths(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<PathBuf>> {
    let Some(obj) = obj else { return Ok(Vec::new()) };
    if obj.is_instance_of::<pyo3::types::PyString>() || (convert::path(obj).is_ok() && !obj.is_instance_of::<pyo3::types::PyList>()) {
        return Ok(vec![convert::path(obj)?]);
    }
    obj.try_iter()?.map(|f| convert::path(&f?)).collect()
}

/// The changes of `update`'s arguments, in its documented order.
#[allow(clippy::too_many_arguments)]
pub fn changes_of(
    changes: Option<&Bound<'_, PyAny>>,
    add: Option<&Bound<'_, PyAny>>,
    retract: Option<&Bound<'_, PyAny>>,
    format: Option<&str>,
    delete: Option<&Bound<'_, PyAny>>,
    rename: Option<&Bound<'_, PyAny>>,
    alias: Option<&Bound<'_, PyAny>>,
    unalias: Option<&Bound<'_, PyAny>>,
    retract_source: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<trellis::ingest::SourcedChange>> {
    let format: Option<Format> = named(format)?;
    let mut out = Vec::new();
    if let Some(list) = changes {
        for (i, item) in list.try_iter()?.enumerate() {
            let value = convert::from_py(&item?)?;
            let change = Change::from_json(&value, std::path::Path::new("")).map_err(|e| errors::bad_input(format!("changes[{i}]: {e}")))?;
            out.push((None, change));
        }
    }
    let file = |p: PathBuf| InputSpec { path: p, format, compression: None };
    out.extend(paths(add)?.into_iter().map(|p| (None, Change::AddFile(file(p)))));
    out.extend(paths(retract)?.into_iter().map(|p| (None, Change::RetractFile(file(p)))));
    out.extend(strings(delete, "delete")?.into_iter().map(|e| (None, Change::DeleteEntity(e))));
    out.extend(pairs(rename, "rename")?.into_iter().map(|(key, name)| (None, Change::Rename { key, name })));
    out.extend(pairs(alias, "alias")?.into_iter().map(|(key, alias)| (None, Change::Alias { key, alias })));
    out.extend(pairs(unalias, "unalias")?.into_iter().map(|(key, alias)| (None, Change::Unalias { key, alias })));
    out.extend(strings(retract_source, "retract_source")?.into_iter().map(|s| (None, Change::RetractSource(s))));
    if out.is_empty() {
        return Err(errors::setting("nothing to change: give changes, add, retract, delete, rename, alias, unalias or retract_source"));
    }
    Ok(out)
}

/// Runs an update of the store at `dir` (the writer lock taken by the library).
pub fn run_update(
    py: Python<'_>,
    dir: &std::path::Path,
    changes: Vec<trellis::ingest::SourcedChange>,
    on_error: &str,
    lang: &str,
    source: Option<String>,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<UpdateReport> {
    crate::store::check_not_held_for_writing(dir)?;
    let on_error: OnError = named(Some(on_error))?.unwrap_or_default();
    let mut updater = Updater::new(dir).on_error(on_error).with_lang(lang);
    if let Some(s) = source {
        updater = updater.with_source(s);
    }
    monitored(py, progress, |monitor| updater.with_monitor(monitor.clone()).apply(changes))?.map_err(errors::to_py)
}

/// update(store, changes=None, add=None, retract=None, format=None, delete=None,
/// rename=None, alias=None, unalias=None, retract_source=None, source=None, on_error="stop",
/// lang="en", progress=None) -> dict
///
/// Changes the store at ``store`` while it serves, as ``trellis update`` does, in one atomic
/// commit whose cost follows the change: ``changes`` (a list of dicts in the change file's
/// shape, ``{"op": "add", "subject", "relation", "object"}`` etc., applied first, in order),
/// then the facts of the ``add`` and ``retract`` files (any ingest format), the ``delete``d
/// entities (keys or names), ``rename`` (``{key: name}`` or pairs), ``alias`` and ``unalias``
/// (pairs of key and alias), ``retract_source`` (names: what those sources asserted and no
/// other load or update asserts is retracted); ``source`` names what this update adds.
/// ``on_error="stop"`` raises ``BadInputError`` listing every change
/// that cannot be applied and commits nothing; ``"skip"`` commits the rest and lists them in
/// the report's ``"skipped"``. Open handles keep their generation until ``refresh()``.
#[pyfunction]
#[pyo3(signature = (store, changes = None, add = None, retract = None, format = None, delete = None, rename = None, alias = None, unalias = None, retract_source = None, source = None, on_error = "stop", lang = "en", progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn update<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
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
    let dir = store_dir(store)?;
    let changes = changes_of(changes, add, retract, format, delete, rename, alias, unalias, retract_source)?;
    let report = run_update(py, &dir, changes, on_error, lang, source, progress)?;
    convert::serialized(py, &report)
}

/// index_vectors(store, dense_model, progress=None, **options) -> dict
///
/// Writes the store's vectors of a bi-encoder, as ``trellis index-vectors`` does: every
/// entity name's and every fact's vector, read by ``dense_paths="facts"`` and PCST's dense
/// prizes instead of running the encoder per turn (answers are the same with or without
/// them). ``options``: ``encoder_batch``, ``device``, ``model_threads``, ``sessions``,
/// checked by the library as every front end's. Returns ``{"path", "header", "bytes"}``.
/// ``progress`` gets the same dicts as ``ingest``'s (``"work": "index-vectors"``). The GIL
/// is released; Ctrl-C cancels (the store unchanged) and is re-raised.
#[pyfunction]
#[pyo3(signature = (store, dense_model, progress = None, **options))]
pub fn index_vectors<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    dense_model: &Bound<'py, PyAny>,
    progress: Option<&Bound<'py, PyAny>>,
    options: Option<&Bound<'py, pyo3::types::PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let dir = store_dir(store)?;
    crate::store::check_not_held_for_writing(&dir)?;
    let mut settings = convert::settings(options)?;
    settings.set("dense_model", convert::path(dense_model)?.to_string_lossy().into_owned());
    let opts = trellis::settings::vector_encoder(&settings).map_err(errors::to_py)?;
    let report = monitored(py, progress, |monitor| trellis::vectors::index_vectors(&dir, &opts, monitor))?.map_err(errors::to_py)?;
    convert::serialized(py, &report)
}
