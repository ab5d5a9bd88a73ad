//! `trellis.ingest` and `trellis.index_tokens`: the writers.

use crate::convert;
use crate::errors;
use crate::run::{detached, monitored};
use crate::store::PyStore;
use pyo3::prelude::*;
use std::path::PathBuf;
use trellis::ingest::{BulkLoader, Compression, Format, InputSpec, NameTokenizer, OnError};
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
/// memory_mb=1024, threads=None, reverse_prefix="~", lang="en", progress=None) -> dict
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
#[pyfunction]
#[pyo3(
    signature = (store, files, format = None, compression = None, on_error = "stop", rejects = None, memory_mb = convert::AnyInt::of(1024), threads = None, reverse_prefix = "~", lang = "en", progress = None),
    text_signature = "(store, files, format=None, compression=None, on_error='stop', rejects=None, memory_mb=1024, threads=None, reverse_prefix='~', lang='en', progress=None)"
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
