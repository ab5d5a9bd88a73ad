//! Plain data between Python and Rust: JSON values both ways (results are the library's own
//! JSON shapes, as the command line writes them), dialog messages, and keyword options
//! checked against the library's ranges (`trellis::limits`).

use crate::errors;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;
use std::path::PathBuf;
use trellis::limits::{FloatRange, IntRange};
use trellis::link::Message;

/// A JSON value as plain Python objects (dict, list, str, int, float, bool, None).
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Any serializable library value (reports, records) as plain Python objects.
pub fn serialized<'py>(py: Python<'py>, v: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let v = serde_json::to_value(v).map_err(|e| errors::setting(format!("cannot convert a result: {e}")))?;
    to_py(py, &v)
}

/// A Python value as JSON: dict (string keys), list, tuple, str, int, float, bool, None.
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Ok(Value::from(obj.extract::<i64>()?));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(serde_json::Number::from_f64(f.value()).map_or(Value::Null, Value::Number));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in d.iter() {
            let key = k.cast::<PyString>().map_err(|_| PyTypeError::new_err("dictionary keys must be strings"))?.to_cow()?.into_owned();
            map.insert(key, from_py(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return Ok(Value::Array(obj.try_iter()?.map(|item| from_py(&item?)).collect::<PyResult<_>>()?));
    }
    Err(PyTypeError::new_err(format!("cannot read a {} here (expected str, int, float, bool, None, list or dict)", obj.get_type().name()?)))
}

/// A dialog: a list of messages, each a string or a dict {"speaker"|"sender", "text"|"message"}.
pub fn history(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Message>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("a history is a list of messages, not a string (wrap it: [text])"));
    }
    let items = obj.try_iter().map_err(|_| PyTypeError::new_err("a history is a list of messages"))?;
    let mut out = Vec::new();
    for (index, item) in items.enumerate() {
        let v = from_py(&item?)?;
        out.push(Message::from_json(&v).map_err(|problem| errors::bad_input(format!("history[{index}] {problem}")))?);
    }
    Ok(out)
}

/// A path argument: str or os.PathLike.
pub fn path(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    obj.extract::<PathBuf>()
}

/// Keyword options, consumed one by one; what is left at the end is an unknown option.
pub struct Options<'py> {
    dict: Bound<'py, PyDict>,
    what: &'static str,
}

impl<'py> Options<'py> {
    /// A copy of `kwargs` (the caller's dict is left alone).
    pub fn new(py: Python<'py>, kwargs: Option<&Bound<'py, PyDict>>, what: &'static str) -> PyResult<Options<'py>> {
        let dict = match kwargs {
            Some(d) => d.copy()?,
            None => PyDict::new(py),
        };
        Ok(Options { dict, what })
    }

    fn take(&self, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let v = self.dict.get_item(name)?;
        if v.is_some() {
            self.dict.del_item(name)?;
        }
        Ok(v.filter(|v| !v.is_none()))
    }

    /// An integer option within `range`.
    pub fn int(&self, name: &str, range: &IntRange) -> PyResult<Option<u64>> {
        let Some(v) = self.take(name)? else { return Ok(None) };
        if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
            return Err(errors::setting(format!("{name} must be an integer, not {}", v.get_type().name()?)));
        }
        let n: i128 = v.extract()?;
        let n = u64::try_from(n).map_err(|_| errors::to_py(range.refuse(n)))?;
        Ok(Some(range.check(n).map_err(errors::to_py)?))
    }

    pub fn usize(&self, name: &str, range: &IntRange) -> PyResult<Option<usize>> {
        Ok(self.int(name, range)?.map(|n| n as usize))
    }

    /// A number option within `range`.
    pub fn float(&self, name: &str, range: &FloatRange) -> PyResult<Option<f64>> {
        let Some(v) = self.take(name)? else { return Ok(None) };
        if v.is_instance_of::<PyBool>() || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()) {
            return Err(errors::setting(format!("{name} must be a number, not {}", v.get_type().name()?)));
        }
        Ok(Some(range.check(v.extract::<f64>()?).map_err(errors::to_py)?))
    }

    /// A path option: str or os.PathLike.
    pub fn path(&self, name: &str) -> PyResult<Option<PathBuf>> {
        let Some(v) = self.take(name)? else { return Ok(None) };
        Ok(Some(v.extract::<PathBuf>().map_err(|_| errors::setting(format!("{name} must be a path (str or os.PathLike)")))?))
    }

    pub fn string(&self, name: &str) -> PyResult<Option<String>> {
        let Some(v) = self.take(name)? else { return Ok(None) };
        Ok(Some(v.extract::<String>().map_err(|_| errors::setting(format!("{name} must be a string")))?))
    }

    /// A named choice (`FromStr` with the library's own error for an unknown name).
    pub fn named<T: std::str::FromStr>(&self, name: &str) -> PyResult<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        match self.string(name)? {
            None => Ok(None),
            Some(s) => s.parse::<T>().map(Some).map_err(|e| errors::setting(e.to_string())),
        }
    }

    pub fn strings(&self, name: &str) -> PyResult<Option<Vec<String>>> {
        let Some(v) = self.take(name)? else { return Ok(None) };
        if v.is_instance_of::<PyString>() {
            return Ok(Some(vec![v.extract()?]));
        }
        Ok(Some(v.extract::<Vec<String>>().map_err(|_| errors::setting(format!("{name} must be a list of strings")))?))
    }

    /// Refuses the options nobody took.
    pub fn finish(self) -> PyResult<()> {
        let left: Vec<String> = self.dict.keys().iter().map(|k| k.to_string()).collect();
        if left.is_empty() {
            return Ok(());
        }
        Err(PyTypeError::new_err(format!("{}: unknown option(s) {}", self.what, left.join(", "))))
    }
}

/// Whether a batch call's `on_error` skips bad requests: the library's error policy names
/// (`stop`, `skip`), as `ingest` and the command line's `--on-error` take them.
pub fn skips_bad_requests(on_error: &str) -> PyResult<bool> {
    let policy: trellis::ingest::OnError = on_error.parse().map_err(|e: trellis::limits::UnknownName| errors::setting(format!("on_error: {e}")))?;
    Ok(policy == trellis::ingest::OnError::Skip)
}
