//! The response metrics (`trellis.metrics` wraps this in Python).

use crate::convert;
use crate::errors;
use crate::run::detached;
use pyo3::prelude::*;
use trellis::eval::responses::{score, ResponsePair};

/// _score(predictions, references, knowledge=None, entities=None) -> dict: every response
/// metric of ``trellis eval responses`` (see ``trellis.metrics``).
#[pyfunction]
#[pyo3(signature = (predictions, references, knowledge = None, entities = None))]
pub fn _score<'py>(
    py: Python<'py>,
    predictions: Vec<String>,
    references: Vec<String>,
    knowledge: Option<Vec<Option<String>>>,
    entities: Option<Vec<Option<Vec<String>>>>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = predictions.len();
    if references.len() != n {
        return Err(errors::bad_input(format!("{n} predictions but {} references", references.len())));
    }
    if knowledge.as_ref().is_some_and(|k| k.len() != n) || entities.as_ref().is_some_and(|e| e.len() != n) {
        return Err(errors::bad_input(format!("knowledge and entities need one item per prediction ({n})")));
    }
    let mut knowledge = knowledge.map(Vec::into_iter);
    let mut entities = entities.map(Vec::into_iter);
    let pairs: Vec<ResponsePair> = predictions
        .into_iter()
        .zip(references)
        .map(|(prediction, reference)| {
            let mut p = ResponsePair { prediction, reference, ..ResponsePair::default() };
            p.knowledge = knowledge.as_mut().and_then(Iterator::next).flatten();
            p.entities = entities.as_mut().and_then(Iterator::next).flatten();
            p
        })
        .collect();
    let scores = detached(py, || score(&pairs))?.map_err(errors::to_py)?;
    convert::serialized(py, &scores)
}
