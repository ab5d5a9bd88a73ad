//! `trellis.FactChecker`.

use crate::convert;
use crate::errors;
use crate::run::{detached, never_closed, Handle};
use crate::store::{store_arg, PyStore};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::path::PathBuf;
use std::sync::Arc;
use trellis::check::{CheckerModel, FactChecker};
use trellis::link::LinkConfig;

/// Judges replies against one store: each claim supported, refuted or not enough information.
///
/// ``FactChecker(store, checker=None, **options)``: ``checker`` a fact checker's directory
/// (``models/check-opendialkg``) or ``checker.json``; without one, relations are matched by
/// their names only and nothing is refuted. ``options`` are the linker's (``window``,
/// ``rewrite``, ...). ``check(history, reply)`` answers as ``trellis check --json`` does:
/// ``{"fact_score", "neip", "supported", "refuted", "not_enough_info", "claims": [...]}``.
#[pyclass(module = "trellis._trellis", name = "FactChecker", frozen)]
pub struct PyFactChecker {
    store: Py<PyStore>,
    checker: Option<PathBuf>,
    options: Py<PyDict>,
    model: Option<CheckerModel>,
    cfg: LinkConfig,
    handle: Handle<FactChecker>,
}

impl PyFactChecker {
    fn get(&self, py: Python<'_>) -> PyResult<Arc<FactChecker>> {
        self.handle.get(
            || {
                let store = self.store.bind(py).get().get()?;
                FactChecker::new(store, self.model.as_ref(), self.cfg.clone()).map_err(|e| errors::to_py(trellis::Error::from(e)))
            },
            never_closed,
        )
    }
}

#[pymethods]
impl PyFactChecker {
    #[new]
    #[pyo3(signature = (store, checker=None, **options))]
    fn new(py: Python<'_>, store: &Bound<'_, PyAny>, checker: Option<PathBuf>, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyFactChecker> {
        let store = store_arg(py, store)?;
        let cfg = trellis::settings::link(&convert::settings(options)?).map_err(errors::to_py)?;
        let model = match &checker {
            Some(p) => Some(detached(py, || CheckerModel::from_path(p))?.map_err(|e| errors::to_py(trellis::Error::from(e)))?),
            None => None,
        };
        let arc = store.bind(py).get().get()?;
        let made = detached(py, || FactChecker::new(arc, model.as_ref(), cfg.clone()))?.map_err(|e| errors::to_py(trellis::Error::from(e)))?;
        let options = options.map_or_else(|| Ok(PyDict::new(py)), |d| d.copy())?.unbind();
        Ok(PyFactChecker { store, checker, options, model, cfg, handle: Handle::new(made) })
    }

    /// check(history, reply) -> the reply's claims and scores.
    ///
    /// ``history``: the dialog before the reply (each message a string or ``{"speaker",
    /// "text"}``; may be empty). Each claim: ``{"sentence", "subject", "object", "phrase",
    /// "relations", "verdict", "evidence"}``, ``verdict`` one of ``"supported"``,
    /// ``"refuted"``, ``"not_enough_info"``, ``evidence`` the facts it rests on.
    fn check<'py>(&self, py: Python<'py>, history: &Bound<'py, PyAny>, reply: &str) -> PyResult<Bound<'py, PyAny>> {
        let history = if history.cast::<PyList>().is_ok() || history.cast::<PyTuple>().is_ok() {
            convert::history(history)?
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err("history must be a list of messages"));
        };
        let mut all = history.clone();
        all.push(trellis::link::Message { speaker: String::new(), text: reply.to_owned() });
        trellis::link::check_dialog_size(&all).map_err(|e| errors::to_py(trellis::Error::from(trellis::retrieve::jsonl::RequestError::from(e))))?;
        let checker = self.get(py)?;
        let reply = reply.to_owned();
        let r = detached(py, || checker.check(&history, &reply))?.map_err(|e| errors::to_py(trellis::Error::from(e)))?;
        let mut v = trellis::pipeline::jsonl::render_check(&serde_json::Value::Null, &r);
        if let Some(o) = v.as_object_mut() {
            o.remove("id");
        }
        convert::serialized(py, &v)
    }

    #[getter]
    fn store(&self, py: Python<'_>) -> Py<PyStore> {
        self.store.clone_ref(py)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let rebuild = py.import("trellis._pickle")?.getattr("fact_checker")?;
        let checker = self.checker.as_ref().map(|p| p.display().to_string());
        Ok((
            rebuild,
            PyTuple::new(py, [self.store.clone_ref(py).into_any(), checker.into_pyobject(py)?.into_any().unbind(), self.options.clone_ref(py).into_any()])?,
        ))
    }
}
