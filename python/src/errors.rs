//! Rust errors as Python exceptions. The classes live in `trellis/errors.py` (a Python
//! hierarchy can inherit from two built-ins: `BadInputError(TrellisError, ValueError)`,
//! `StoreError(TrellisError, OSError)`); this module only decides which class an error is
//! and which attributes it carries.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};
use trellis::Error;

/// Which Python class an error becomes.
pub enum Kind {
    /// Bad input data (a file's line, a request): `BadInputError`, a `ValueError`.
    BadInput { path: Option<PathBuf>, line: Option<u64> },
    /// A setting outside its range or an unknown name: `SettingError`, a `ValueError`.
    Setting,
    /// The store or a file: `StoreError`, an `OSError`.
    Store { path: Option<PathBuf> },
    /// A model directory, ONNX Runtime, a tokenizer: `ModelError`.
    Model,
    /// Work stopped by a cancel: `CancelledError`.
    Cancelled,
    /// Anything else: `TrellisError`.
    Other,
}

fn open_path(e: &trellis::OpenError) -> Option<PathBuf> {
    use trellis::OpenError as O;
    match e {
        O::NotAStore { path }
        | O::Missing { path }
        | O::NotADirectory { path }
        | O::TooNew { path, .. }
        | O::NeedsMigration { path, .. }
        | O::Locked { path, .. } => Some(path.clone()),
        O::Layout { path, .. } | O::Io { path, .. } | O::Rocks { path, .. } => Some(path.clone()),
        _ => None,
    }
}

fn retrieve_kind(e: &trellis::retrieve::RetrieveError) -> Kind {
    use trellis::retrieve::RetrieveError as R;
    match e {
        R::Read(_) => Kind::Store { path: None },
        R::Gsr(g) => gsr_kind(g),
        R::Encoder(_) => Kind::Model,
        R::Setting(_) => Kind::Setting,
        R::Vectors(v) => vectors_kind(v),
        _ => Kind::Other,
    }
}

fn vectors_kind(v: &trellis::vectors::VectorsError) -> Kind {
    use trellis::vectors::VectorsError as V;
    match v {
        V::Corrupt { path, .. } | V::Format { path, .. } | V::Io { path, .. } => Kind::Store { path: Some(path.clone()) },
        V::Encoder(_) | V::Widths { .. } => Kind::Model,
        V::OutOfRange(_) => Kind::Setting,
        V::Open(o) => Kind::Store { path: open_path(o) },
        V::Cancelled => Kind::Cancelled,
        _ => Kind::Store { path: None },
    }
}

fn gsr_kind(e: &trellis::retrieve::gsr::GsrError) -> Kind {
    use trellis::retrieve::gsr::GsrError as G;
    match e {
        G::Read(_) => Kind::Store { path: None },
        // The store lacks the model's token index: `index_tokens` on the store fixes it.
        G::TokenIndex { .. } | G::TokenIndexWithDefaults { .. } => Kind::Store { path: None },
        G::Setting(_) | G::Memory(_) => Kind::Setting,
        _ => Kind::Model,
    }
}

fn generate_kind(e: &trellis::generate::GenerateError) -> Kind {
    use trellis::generate::GenerateError as G;
    match e {
        G::Setting(_) | G::Memory(_) | G::EmptyStop | G::StopIdOutOfRange { .. } | G::Linearize(_) => Kind::Setting,
        G::Knowledge { .. } => Kind::BadInput { path: None, line: None },
        _ => Kind::Model,
    }
}

pub fn kind(e: &Error) -> Kind {
    use trellis::IngestError as I;
    if e.is_cancelled() {
        return Kind::Cancelled;
    }
    match e {
        Error::Open(o) => Kind::Store { path: open_path(o) },
        Error::Read(_) | Error::Write(_) | Error::Migrate(_) | Error::TokenIndex(_) => Kind::Store { path: None },
        Error::Ingest(i) => match i {
            I::BadLine { file, line, .. } | I::Truncated { file, line, .. } | I::ChangeFile { file, line, .. } => {
                Kind::BadInput { path: Some(file.clone()), line: Some(*line) }
            }
            I::UpdateRefused { .. } => Kind::BadInput { path: None, line: None },
            I::UnknownFormat { path } => Kind::BadInput { path: Some(path.clone()), line: None },
            I::Io { path, .. } => Kind::Store { path: Some(path.clone()) },
            I::Cancelled => Kind::Cancelled,
            I::Tokenizer(_) | I::ReservedToken { .. } => Kind::Model,
            I::Open(o) => Kind::Store { path: open_path(o) },
            I::Read(_) | I::Write(_) | I::Rocks(_) => Kind::Store { path: None },
            _ => Kind::Other,
        },
        Error::Dataset(trellis::dataset::DatasetError::Io { path, .. }) => Kind::Store { path: Some(path.clone()) },
        Error::Dataset(trellis::dataset::DatasetError::Bad { path, line, .. }) => Kind::BadInput { path: Some(path.clone()), line: Some(*line) },
        Error::Responses(trellis::eval::responses::ResponsesError::Io { path, .. }) => Kind::Store { path: Some(path.clone()) },
        Error::Responses(trellis::eval::responses::ResponsesError::Bad { path, line, .. }) => Kind::BadInput { path: Some(path.clone()), line: Some(*line) },
        Error::Responses(_) => Kind::BadInput { path: None, line: None },
        Error::Tokenizer(_) | Error::Decode(_) | Error::Runtime(_) | Error::ModelDir(_) | Error::Seq2Seq(_) | Error::Doctor(_) => Kind::Model,
        Error::Retrieve(r) => retrieve_kind(r),
        Error::Gsr(g) => gsr_kind(g),
        Error::Generate(g) => generate_kind(g),
        Error::Pipeline(p) => match p {
            trellis::pipeline::PipelineError::Read(_) => Kind::Store { path: None },
            trellis::pipeline::PipelineError::Retrieve(r) => retrieve_kind(r),
            trellis::pipeline::PipelineError::Generate(g) => generate_kind(g),
            trellis::pipeline::PipelineError::RewriteWithoutLinker => Kind::Setting,
            trellis::pipeline::PipelineError::Check(trellis::check::FactCheckError::Read(_)) => Kind::Store { path: None },
            _ => Kind::Other,
        },
        Error::Setting(_) | Error::Settings(_) | Error::Memory(_) | Error::Template(_) | Error::Linearize(_) => Kind::Setting,
        Error::Request(_) | Error::Line(_) | Error::Change(_) | Error::Update(_) => Kind::BadInput { path: None, line: None },
        Error::Answer(trellis::retrieve::jsonl::AnswerError::Request(_)) => Kind::BadInput { path: None, line: None },
        Error::Answer(trellis::retrieve::jsonl::AnswerError::Retrieve(r)) => retrieve_kind(r),
        Error::Encoder(_) => Kind::Model,
        Error::Text(t) => text_kind(t),
        Error::Vectors(v) => vectors_kind(v),
        Error::Query(trellis::queries::QueryError::Text(t)) => text_kind(t),
        Error::Query(trellis::queries::QueryError::Read(_)) => Kind::Store { path: None },
        Error::Query(trellis::queries::QueryError::Scorer(_)) | Error::Scorer(_) | Error::Checker(_) => Kind::Model,
        Error::FactCheck(trellis::check::FactCheckError::Read(_)) => Kind::Store { path: None },
        Error::FactCheck(_) => Kind::Setting,
        Error::CheckLine(_) => Kind::BadInput { path: None, line: None },
        _ => Kind::Other,
    }
}

fn text_kind(t: &trellis::text::TextError) -> Kind {
    use trellis::text::TextError as T;
    match t {
        T::Missing { dir } | T::Stale { dir, .. } => Kind::Store { path: Some(dir.clone()) },
        T::Format { path, .. } | T::Corrupt { path, .. } | T::Engine { path, .. } => Kind::Store { path: Some(path.clone()) },
        T::NoWords { .. } => Kind::BadInput { path: None, line: None },
        T::Documents(d) => Kind::BadInput { path: Some(d.path.clone()), line: Some(d.line) },
        T::DocumentsIo { path, .. } => Kind::BadInput { path: Some(path.clone()), line: None },
        T::OutOfRange(_) => Kind::Setting,
        T::Open(o) => Kind::Store { path: open_path(o) },
        T::Cancelled => Kind::Cancelled,
        _ => Kind::Store { path: None },
    }
}

fn path_obj(py: Python<'_>, p: Option<&Path>) -> PyResult<Py<PyAny>> {
    Ok(match p {
        Some(p) => p.display().to_string().into_pyobject(py)?.into_any().unbind(),
        None => py.None(),
    })
}

/// The exception of class `kind` with message `msg`.
pub fn raise(py: Python<'_>, kind: Kind, msg: String) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let errors = py.import("trellis.errors")?;
        let kwargs = PyDict::new(py);
        let class = match &kind {
            Kind::BadInput { path, line } => {
                kwargs.set_item("path", path_obj(py, path.as_deref())?)?;
                kwargs.set_item("line", *line)?;
                "BadInputError"
            }
            Kind::Setting => "SettingError",
            Kind::Store { path } => {
                kwargs.set_item("path", path_obj(py, path.as_deref())?)?;
                "StoreError"
            }
            Kind::Model => "ModelError",
            Kind::Cancelled => "CancelledError",
            Kind::Other => "TrellisError",
        };
        let value = errors.getattr(class)?.call((msg,), Some(&kwargs))?;
        Ok(PyErr::from_value(value))
    };
    // Failing to build the exception (trellis.errors not importable) is itself reported.
    build().unwrap_or_else(|e| e)
}

/// Any library error as its Python exception, its causes (`source()`, each in its own
/// words) as the exception's `__cause__` chain, each a `TrellisError`: the message keeps the
/// whole story, the chain keeps its parts apart.
pub fn to_py(e: impl Into<Error>) -> PyErr {
    let e = e.into();
    Python::attach(|py| {
        let top = raise(py, kind(&e), e.to_string());
        let mut causes = Vec::new();
        let mut source = std::error::Error::source(&e);
        // The umbrella's own variant is transparent: its source is the family's error,
        // whose text is the top's; start below it.
        while let Some(s) = source {
            if s.to_string() != e.to_string() {
                causes.push(s.to_string());
            }
            source = s.source();
        }
        let mut below: Option<PyErr> = None;
        for text in causes.into_iter().rev() {
            let err = raise(py, Kind::Other, text);
            err.set_cause(py, below.take());
            below = Some(err);
        }
        top.set_cause(py, below);
        top
    })
}

/// Bad input found by the glue (a request, a message): `BadInputError` without a file.
pub fn bad_input(msg: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, Kind::BadInput { path: None, line: None }, msg.into()))
}

/// A store the glue refuses (one this process holds for writing): `StoreError`.
pub fn store_error(path: &Path, msg: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, Kind::Store { path: Some(path.to_path_buf()) }, msg.into()))
}

/// Says that request `index` of a batch was skipped and why: a
/// `trellis.errors.SkippedRequestWarning` (the command line's `FILE:LINE: ... (skipped)`).
pub fn warn_skipped(py: Python<'_>, index: usize, reason: &str) -> PyResult<()> {
    let category = py.import("trellis.errors")?.getattr("SkippedRequestWarning")?;
    let reason = reason.strip_prefix(&format!("request {index}: ")).unwrap_or(reason);
    PyErr::warn(py, &category, &std::ffi::CString::new(format!("request {index}: {reason} (skipped)")).unwrap_or_default(), 2)
}

/// A setting the glue refuses: `SettingError`.
pub fn setting(msg: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, Kind::Setting, msg.into()))
}
