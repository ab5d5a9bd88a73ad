//! Finding and loading the ONNX Runtime shared library (`ort` with `load-dynamic`).
//!
//! The library is looked for, in order, at `ORT_DYLIB_PATH`, under
//! `~/.cache/trellis/onnxruntime/` (where `tools/setup.sh` puts the PyPI wheel's library) and
//! next to the executable. Before `ort` sees a file, Trellis opens it itself and reads its
//! version: `ort` panics when the library it loads lazily is missing, and only logs a
//! version it was not built for, so every such case is a [`RuntimeError`] here instead.
//! The library and the `ort` environment are set up once per process; the first
//! successful load wins.

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The ONNX Runtime release `tools/setup.sh` installs (the one `ort` 2.0.0-rc.15 targets).
pub const RECOMMENDED_VERSION: &str = "1.31.1";
/// The oldest ONNX Runtime minor version (1.x) this build can drive: the C API level `ort`
/// is compiled against (feature `api-24`).
pub const MIN_MINOR_VERSION: u32 = ort::MINOR_VERSION;

const WHAT_TO_DO: &str = "run `source tools/setup.sh` (it installs onnxruntime==1.31.1 under ~/.cache/trellis/onnxruntime) or set ORT_DYLIB_PATH to a libonnxruntime shared library of version 1.24 or later";

/// Why the ONNX Runtime library cannot be used. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// `ORT_DYLIB_PATH` is not set and no candidate path holds the library.
    #[error("no ONNX Runtime library found (looked at {}); {WHAT_TO_DO}", list(tried))]
    NotFound {
        /// The paths looked at.
        tried: Vec<PathBuf>,
    },
    /// The path given does not exist.
    #[error("{}: no such ONNX Runtime library ({from}); {WHAT_TO_DO}", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
        /// Where the path came from (`ORT_DYLIB_PATH`, ...).
        from: &'static str,
    },
    /// The path given is not a regular file.
    #[error("{}: not a file ({from}); {WHAT_TO_DO}", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// Where the path came from (`ORT_DYLIB_PATH`, ...).
        from: &'static str,
    },
    /// The file cannot be opened as a shared library.
    #[error("{}: cannot load it as a shared library: {source}; {WHAT_TO_DO}", path.display())]
    Unloadable {
        /// The file.
        path: PathBuf,
        /// The loader's error.
        source: crate::BackendError,
    },
    /// The shared library is not ONNX Runtime.
    #[error("{}: a shared library, but not ONNX Runtime (it has no OrtGetApiBase); {WHAT_TO_DO}", path.display())]
    NotOnnxRuntime {
        /// The file.
        path: PathBuf,
    },
    /// The library's version is too old or not 1.x; `found` is the version string the
    /// library reports (data).
    #[error("{}: ONNX Runtime {found:?} is not supported (this build needs 1.{MIN_MINOR_VERSION} or later, 1.x); {WHAT_TO_DO}", path.display())]
    Version {
        /// The library.
        path: PathBuf,
        /// The version string.
        found: String,
    },
    /// `ort` could not set the library up.
    #[error("{}: ONNX Runtime could not be initialized: {source}", path.display())]
    Init {
        /// The library.
        path: PathBuf,
        /// What failed.
        source: InitFailure,
    },
    /// Another ONNX Runtime library was loaded earlier in this process.
    #[error("ONNX Runtime is already loaded from {} in this process; {} cannot be loaded as well (one library per process)", loaded.display(), requested.display())]
    AlreadyLoaded {
        /// The library loaded.
        loaded: PathBuf,
        /// The library asked for now.
        requested: PathBuf,
    },
    /// The library cannot list its execution providers.
    #[error("cannot list ONNX Runtime's execution providers: {0}")]
    Providers(crate::BackendError),
}

/// What failed while `ort` set the library up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitFailure {
    /// Loading the library's API failed.
    #[error(transparent)]
    Load(crate::BackendError),
    /// Creating the ONNX Runtime environment failed.
    #[error(transparent)]
    Ort(crate::BackendError),
    /// `ort` panicked; the panic's text (data).
    #[error("ort panicked: {0}")]
    Panicked(String),
}

fn list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// The loaded library and the process's `ort` environment.
pub struct Runtime {
    library: PathBuf,
    version: String,
    env: ort::environment::Environment,
    // Holds our own handle on the library (besides ort's), so the version string read at
    // load time stays valid and the file is never unloaded under a session.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("library", &self.library).field("version", &self.version).finish()
    }
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static LOADING: Mutex<()> = Mutex::new(());

/// Where the library was found: for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The library's path.
    pub path: PathBuf,
    /// How it was found (`ORT_DYLIB_PATH`, `~/.cache/trellis/onnxruntime`, `next to the executable`).
    pub from: &'static str,
}

/// The library path to use: `ORT_DYLIB_PATH` when set (it must exist), else the first
/// existing candidate of [`candidates`].
pub fn locate() -> Result<Located, RuntimeError> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Ok(Located { path: PathBuf::from(p), from: "ORT_DYLIB_PATH" });
    }
    let tried = candidates();
    match tried.iter().find(|p| p.is_file()) {
        Some(p) => Ok(Located {
            path: p.clone(),
            from: if p.starts_with(cache_dir().unwrap_or_default()) { "~/.cache/trellis/onnxruntime" } else { "next to the executable" },
        }),
        None => Err(RuntimeError::NotFound { tried }),
    }
}

fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".cache/trellis/onnxruntime"))
}

/// The places looked at when `ORT_DYLIB_PATH` is not set, in order.
pub fn candidates() -> Vec<PathBuf> {
    let names = [format!("libonnxruntime.so.{RECOMMENDED_VERSION}"), "libonnxruntime.so".to_string(), "libonnxruntime.dylib".into(), "onnxruntime.dll".into()];
    let mut out = Vec::new();
    if let Some(dir) = cache_dir() {
        out.extend(names.iter().map(|n| dir.join(n)));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        out.extend(names.iter().map(|n| dir.join(n)));
    }
    out
}

/// Opens `path` as a shared library and reads the ONNX Runtime version it reports, without
/// touching `ort`'s process-wide state. Returns the open library and the version.
pub(crate) fn probe(path: &Path, from: &'static str) -> Result<(libloading::Library, String), RuntimeError> {
    match std::fs::metadata(path) {
        Err(_) => return Err(RuntimeError::Missing { path: path.into(), from }),
        Ok(m) if !m.is_file() => return Err(RuntimeError::NotAFile { path: path.into(), from }),
        Ok(_) => {}
    }
    // SAFETY: loading a shared library runs its initializers; the file is the one the user
    // pointed at as ONNX Runtime (there is no way to check a library without loading it).
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| RuntimeError::Unloadable { path: path.into(), source: crate::backend::loader(e) })?;
    let version = {
        // SAFETY: the symbol's type is the C API's `const OrtApiBase* OrtGetApiBase(void)`.
        let get: libloading::Symbol<unsafe extern "C" fn() -> *const ort::sys::OrtApiBase> =
            unsafe { lib.get(b"OrtGetApiBase\0") }.map_err(|_| RuntimeError::NotOnnxRuntime { path: path.into() })?;
        // SAFETY: OrtGetApiBase takes no arguments and returns a pointer (checked for null
        // below) to a static struct of the library, which `lib` keeps loaded.
        let base = unsafe { get() };
        if base.is_null() {
            return Err(RuntimeError::NotOnnxRuntime { path: path.into() });
        }
        // SAFETY: a non-null OrtApiBase; GetVersionString returns a static NUL-terminated string.
        let s = unsafe { ((*base).GetVersionString)() };
        if s.is_null() {
            return Err(RuntimeError::NotOnnxRuntime { path: path.into() });
        }
        // SAFETY: `s` is non-null (checked above) and NUL-terminated, per the C API.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    };
    if !version_supported(&version) {
        return Err(RuntimeError::Version { path: path.into(), found: version });
    }
    Ok((lib, version))
}

/// `1.x.y` with x at least [`MIN_MINOR_VERSION`].
pub fn version_supported(version: &str) -> bool {
    let mut parts = version.split('.');
    matches!((parts.next(), parts.next().and_then(|m| m.parse::<u32>().ok())), (Some("1"), Some(minor)) if minor >= MIN_MINOR_VERSION)
}

impl Runtime {
    /// The process's runtime: loaded on first use from [`locate`]'s path; later calls
    /// return the same one (whatever the environment says by then).
    pub fn get() -> Result<&'static Runtime, RuntimeError> {
        if let Some(rt) = RUNTIME.get() {
            return Ok(rt);
        }
        let found = locate()?;
        Self::load(&found.path, found.from)
    }

    /// Loads the library at `path` (once per process). A second call with another path is
    /// [`RuntimeError::AlreadyLoaded`]; with the same path, the loaded runtime.
    pub fn load(path: &Path, from: &'static str) -> Result<&'static Runtime, RuntimeError> {
        let _guard = LOADING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rt) = RUNTIME.get() {
            return if same_file(&rt.library, path) { Ok(rt) } else { Err(RuntimeError::AlreadyLoaded { loaded: rt.library.clone(), requested: path.into() }) };
        }
        let (lib, version) = probe(path, from)?;
        let path_owned = path.to_path_buf();
        // ort's lazy API setup `expect`s where the C API cannot be had; the probe above
        // rules the known cases out, and a panic left is turned into an error here.
        let built = std::panic::catch_unwind(move || -> Result<ort::environment::Environment, InitFailure> {
            let builder = ort::init_from(&path_owned).map_err(|e| InitFailure::Load(crate::backend::loader(e)))?;
            builder.with_name("trellis").with_telemetry(false).build().map_err(|e| InitFailure::Ort(e.into()))
        });
        let env = match built {
            Ok(Ok(env)) => env,
            Ok(Err(source)) => return Err(RuntimeError::Init { path: path.into(), source }),
            Err(panic) => {
                let text = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                return Err(RuntimeError::Init { path: path.into(), source: InitFailure::Panicked(text) });
            }
        };
        let rt = Runtime { library: path.canonicalize().unwrap_or_else(|_| path.into()), version, env, _lib: lib };
        Ok(RUNTIME.get_or_init(|| rt))
    }

    /// The runtime if one is loaded in this process.
    pub fn loaded() -> Option<&'static Runtime> {
        RUNTIME.get()
    }

    /// The path the library was loaded from.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The version string the library reports (`1.31.1`).
    pub fn version(&self) -> &str {
        &self.version
    }

    pub(crate) fn env(&self) -> &ort::environment::Environment {
        &self.env
    }

    /// The execution providers the library was built with (`CPUExecutionProvider`, ...).
    /// Built with is not usable: CUDA also needs the CUDA libraries and a device, which
    /// only registering it on a session shows.
    pub fn providers(&self) -> Result<Vec<String>, RuntimeError> {
        let api = ort::api();
        let mut names: *mut *mut std::ffi::c_char = std::ptr::null_mut();
        let mut n: std::ffi::c_int = 0;
        // SAFETY: the C API's GetAvailableProviders/ReleaseAvailableProviders pair; the
        // strings are read before the array is released.
        unsafe {
            let status = (api.GetAvailableProviders)(&mut names, &mut n);
            if !status.0.is_null() {
                let msg = CStr::from_ptr((api.GetErrorMessage)(status.0)).to_string_lossy().into_owned();
                (api.ReleaseStatus)(status.0);
                return Err(RuntimeError::Providers(ort::Error::new(msg).into()));
            }
            if names.is_null() {
                return Ok(Vec::new());
            }
            let out = (0..n.max(0) as usize).map(|i| CStr::from_ptr(*names.add(i)).to_string_lossy().into_owned()).collect();
            let status = (api.ReleaseAvailableProviders)(names, n);
            if !status.0.is_null() {
                (api.ReleaseStatus)(status.0);
            }
            Ok(out)
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(version_supported("1.31.1"));
        assert!(version_supported(&format!("1.{MIN_MINOR_VERSION}.0")));
        assert!(!version_supported(&format!("1.{}.9", MIN_MINOR_VERSION - 1)));
        assert!(!version_supported("2.0.0"));
        assert!(!version_supported("garbage"));
        assert!(!version_supported(""));
    }

    #[test]
    fn bad_library_files_are_errors_that_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let e = probe(&dir.path().join("nope.so"), "ORT_DYLIB_PATH").unwrap_err();
        assert!(matches!(e, RuntimeError::Missing { from: "ORT_DYLIB_PATH", .. }), "{e:?}");
        assert!(e.to_string().contains("tools/setup.sh") && e.to_string().contains("ORT_DYLIB_PATH"), "{e}");
        let e = probe(dir.path(), "test").unwrap_err();
        assert!(matches!(e, RuntimeError::NotAFile { .. }), "{e:?}");
        let garbage = dir.path().join("libonnxruntime.so");
        std::fs::write(&garbage, b"\x7fELF but not really a library").unwrap();
        let e = probe(&garbage, "test").unwrap_err();
        assert!(matches!(e, RuntimeError::Unloadable { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&garbage.display().to_string()), "{e}");
    }

    /// Builds a shared library with the C compiler (tools/setup.sh installs one).
    fn shared_library(dir: &Path, name: &str, source: &str) -> PathBuf {
        let c = dir.join(format!("{name}.c"));
        let so = dir.join(format!("lib{name}.so"));
        std::fs::write(&c, source).unwrap();
        let status = std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&c).status().expect("a C compiler (cc)");
        assert!(status.success());
        so
    }

    #[test]
    fn a_library_that_is_not_onnx_runtime_or_too_old_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let other = shared_library(dir.path(), "other", "int answer(void) { return 42; }\n");
        let e = probe(&other, "test").unwrap_err();
        assert!(matches!(e, RuntimeError::NotOnnxRuntime { .. }), "{e:?}");
        // The C API's entry point, reporting a version (GetApi is never called by the probe).
        let fake = |version: &str| {
            format!(
                "struct base {{ const void* (*get_api)(unsigned); const char* (*version)(void); }};\n\
                 static const char* v(void) {{ return \"{version}\"; }}\n\
                 static const struct base b = {{ 0, v }};\n\
                 const struct base* OrtGetApiBase(void) {{ return &b; }}\n"
            )
        };
        let old = shared_library(dir.path(), "old", &fake("1.20.0"));
        let e = probe(&old, "ORT_DYLIB_PATH").unwrap_err();
        assert!(matches!(&e, RuntimeError::Version { found, .. } if found == "1.20.0"), "{e:?}");
        assert!(e.to_string().contains("ONNX Runtime \"1.20.0\" is not supported") && e.to_string().contains("tools/setup.sh"), "{e}");
        let new = shared_library(dir.path(), "new", &fake("1.31.1"));
        let (_lib, version) = probe(&new, "test").unwrap();
        assert_eq!(version, "1.31.1");
    }
}
