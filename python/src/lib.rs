//! The native module of the `trellis` Python package (`trellis._trellis`): a thin layer
//! that converts Python values to the library's and back, releases the GIL around every
//! store read, retrieval, generation and load, and maps errors to the exception classes of
//! `trellis/errors.py`. The Python API is documented in `python/README.md` and the stubs.

mod check;
mod convert;
mod errors;
mod generate;
mod ingest;
mod metrics;
mod retrieve;
mod run;
mod store;

use pyo3::prelude::*;

#[pymodule]
fn _trellis(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::PyStore>()?;
    m.add_class::<retrieve::PyLinker>()?;
    m.add_class::<check::PyFactChecker>()?;
    m.add_class::<retrieve::PyRetriever>()?;
    m.add_class::<generate::PyGenerator>()?;
    m.add_class::<generate::PyPipeline>()?;
    m.add_function(wrap_pyfunction!(ingest::ingest, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::index_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::index_text, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::index_vectors, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::update, m)?)?;
    m.add_function(wrap_pyfunction!(retrieve::evaluate_retrieval, m)?)?;
    m.add_function(wrap_pyfunction!(retrieve::check_settings, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::_score, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build", trellis::build_name())?;
    Ok(())
}
