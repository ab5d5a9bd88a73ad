//! Plain data between Python and Rust: JSON values both ways (results are the library's own
//! JSON shapes, as the command line writes them), dialog messages, and keyword options
//! checked against the library's ranges (`trellis::limits`).

use crate::errors;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;
use std::path::PathBuf;
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
        return match obj.extract::<i64>() {
            Ok(i) => Ok(Value::from(i)),
            Err(_) => Err(errors::bad_input(format!("the integer {} is outside the range JSON numbers are read in (-2^63..2^64)", obj.str()?))),
        };
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
    trellis::link::check_dialog_size(&out).map_err(|e| errors::bad_input(e.to_string()))?;
    Ok(out)
}

/// A path argument: str or os.PathLike.
pub fn path(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    obj.extract::<PathBuf>()
}

/// Keyword arguments as the library's settings (`trellis::settings`), converted by syntax
/// alone: a number as Python writes it (`str`, `repr`: an int of any size, `nan`), a string
/// or path as its text, a list as its items; `None` as not given. The library checks every
/// value, combination and name, so Python refuses what the command line refuses, with the
/// same sentence.
pub fn settings(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<trellis::settings::Settings> {
    let mut s = trellis::settings::Settings::new();
    let Some(kwargs) = kwargs else { return Ok(s) };
    for (k, v) in kwargs.iter() {
        let name = k.cast::<PyString>().map_err(|_| PyTypeError::new_err("setting names are strings"))?.to_cow()?.into_owned();
        if v.is_none() {
            continue;
        }
        if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            let items = v.try_iter()?.map(|item| setting_text(&name, &item?)).collect::<PyResult<Vec<_>>>()?;
            s.set_list(name, items);
        } else {
            let text = setting_text(&name, &v)?;
            s.set(name, text);
        }
    }
    Ok(s)
}

/// One value of a setting as text.
fn setting_text(name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(t) = v.cast::<PyString>() {
        return Ok(t.to_cow()?.into_owned());
    }
    if v.is_instance_of::<PyBool>() {
        // Not an int here (no setting is a switch): the library refuses the word.
        return Ok(if v.is_truthy()? { "True" } else { "False" }.to_owned());
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(v.str()?.to_cow()?.into_owned());
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(v.repr()?.to_cow()?.into_owned());
    }
    if let Ok(p) = v.extract::<PathBuf>() {
        return Ok(p.display().to_string());
    }
    Err(errors::setting(format!("`{name}` cannot be a {}: a setting is a string, a number, a path or a list of them", v.get_type().name()?)))
}

/// A whole-number argument within `range`: any Python int (one past 2^64 too) is checked
/// by the library's own parser, so it is refused with the range, never an OverflowError.
pub fn int_arg(v: &Bound<'_, PyAny>, range: &trellis::limits::IntRange) -> PyResult<u64> {
    let text = if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() { v.str()?.to_cow()?.into_owned() } else { v.repr()?.to_cow()?.into_owned() };
    range.parse(&text).map_err(errors::to_py)
}

/// A whole-number argument with a default: any Python int, kept as its decimal text and
/// checked by the library's own parser ([`AnyInt::check`]), so an int of any size is refused
/// with the range, never an OverflowError; anything else is a TypeError.
pub struct AnyInt(String);

impl AnyInt {
    /// The default given in a signature.
    pub fn of(v: u64) -> AnyInt {
        AnyInt(v.to_string())
    }

    /// The value within `range`, as a `usize`.
    pub fn check(&self, range: &trellis::limits::IntRange) -> PyResult<usize> {
        let n = range.parse(&self.0).map_err(errors::to_py)?;
        usize::try_from(n).map_err(|_| errors::to_py(range.refuse(n)))
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for AnyInt {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<AnyInt> {
        if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
            return Ok(AnyInt(obj.str()?.to_cow()?.into_owned()));
        }
        Err(PyTypeError::new_err(format!("expected an int, not {}", obj.get_type().name()?)))
    }
}

/// [`int_arg`] as a `usize`.
pub fn usize_arg(v: &Bound<'_, PyAny>, range: &trellis::limits::IntRange) -> PyResult<usize> {
    let n = int_arg(v, range)?;
    usize::try_from(n).map_err(|_| errors::to_py(range.refuse(n)))
}

/// Whether a batch call's `on_error` skips bad requests: the library's error policy names
/// (`stop`, `skip`), as `ingest` and the command line's `--on-error` take them.
pub fn skips_bad_requests(on_error: &str) -> PyResult<bool> {
    let policy: trellis::ingest::OnError = on_error.parse().map_err(|e: trellis::limits::UnknownName| errors::setting(format!("on_error: {e}")))?;
    Ok(policy == trellis::ingest::OnError::Skip)
}
