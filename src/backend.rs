//! [`BackendError`]: an error of a library Trellis builds on (RocksDB, ONNX Runtime, the
//! tokenizers crate, tantivy), carried inside Trellis's own errors as their source. Its message and
//! its chain are kept; its type is not part of Trellis's API, so those crates (`ort` is a
//! release candidate) can change version without changing Trellis's.

use std::fmt;

/// Which library an error came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// RocksDB (`rocksdb` crate).
    RocksDb,
    /// ONNX Runtime (`ort` crate).
    OnnxRuntime,
    /// The `tokenizers` crate.
    Tokenizers,
    /// The system's dynamic loader (opening a shared library).
    Loader,
    /// The text index's engine (`tantivy` crate).
    Tantivy,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::RocksDb => "RocksDB",
            Backend::OnnxRuntime => "ONNX Runtime",
            Backend::Tokenizers => "tokenizers",
            Backend::Loader => "dynamic loader",
            Backend::Tantivy => "tantivy",
        })
    }
}

/// An error of a backend library, opaque: its text is the backend's message, its
/// [`source`](std::error::Error::source) the backend error's own source.
pub struct BackendError {
    backend: Backend,
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl BackendError {
    /// Which library failed.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub(crate) fn new(backend: Backend, inner: Box<dyn std::error::Error + Send + Sync>) -> BackendError {
        BackendError { backend, inner }
    }

    /// The RocksDB error inside, for the store's own checks of its kind.
    pub(crate) fn as_rocksdb(&self) -> Option<&rocksdb::Error> {
        self.inner.downcast_ref::<rocksdb::Error>()
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BackendError({}: {:?})", self.backend, self.inner)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

impl From<rocksdb::Error> for BackendError {
    fn from(e: rocksdb::Error) -> BackendError {
        BackendError::new(Backend::RocksDb, Box::new(e))
    }
}

impl<R> From<ort::Error<R>> for BackendError
where
    ort::Error<R>: std::error::Error + Send + Sync + 'static,
{
    fn from(e: ort::Error<R>) -> BackendError {
        BackendError::new(Backend::OnnxRuntime, Box::new(e))
    }
}

/// `?` on a RocksDB call inside the crate: its error becomes a [`BackendError`], which the
/// write and load error families convert from (no conversion from `rocksdb::Error` itself is
/// public: that would make RocksDB's type part of Trellis's API).
pub(crate) trait RocksResult<T> {
    /// The result with RocksDB's error made opaque.
    fn rocks(self) -> Result<T, BackendError>;
}

impl<T> RocksResult<T> for Result<T, rocksdb::Error> {
    fn rocks(self) -> Result<T, BackendError> {
        self.map_err(BackendError::from)
    }
}

/// An error of opening a shared library (the dynamic loader's, or `ort`'s wrapper of it).
pub(crate) fn loader(e: impl std::error::Error + Send + Sync + 'static) -> BackendError {
    BackendError::new(Backend::Loader, Box::new(e))
}

/// An error of the text index's engine.
pub(crate) fn tantivy(e: tantivy::TantivyError) -> BackendError {
    BackendError::new(Backend::Tantivy, Box::new(e))
}

/// The tokenizers crate's error is already a boxed error.
pub(crate) fn tokenizers(e: tokenizers::Error) -> BackendError {
    BackendError::new(Backend::Tokenizers, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_backend_s_and_the_kind_is_kept() {
        let e = tokenizers(Box::new(std::io::Error::other("bad vocab")));
        assert_eq!(e.to_string(), "bad vocab");
        assert_eq!(e.backend(), Backend::Tokenizers);
        let e: BackendError = ort::Error::new("no such node").into();
        assert_eq!((e.to_string().contains("no such node"), e.backend()), (true, Backend::OnnxRuntime));
    }
}
