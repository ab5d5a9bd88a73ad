//! The store directory: a `CURRENT` pointer to one RocksDB generation, a writer lock, and
//! the registrations of the readers that hold older generations open.
//!
//! ```text
//! DIR/CURRENT        "gen-000002\n": the generation readers open
//! DIR/gen-000002/    a RocksDB database (schema/v4.md)
//! DIR/LOCK           held (flock) by the one loader or migration at a time
//! DIR/readers/       one file per open reader, `gen-000001.PID.N`, held with a shared flock
//! DIR/staging-*/     a load in progress; removed by the next writer
//! ```
//!
//! A load writes a new generation (a hard-link checkpoint of the current one plus the new
//! data) and commits by atomically replacing `CURRENT`. A crash at any moment therefore
//! leaves `CURRENT` naming either the old complete generation or the new complete one.
//!
//! RocksDB opens a generation's SST files lazily (`max_open_files`), so a reader needs its
//! generation's files for as long as it is open. A reader registers before opening (see
//! `register_reader`); a writer removes an old generation only when no live registration
//! names it. Liveness is the flock itself, not a pid: the kernel drops the lock when the
//! reader's process ends, however it ends, so a crashed reader's file is recognisably stale.

use crate::store::error::{LayoutProblem, OpenError, WriteError};
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub const CURRENT_FILE: &str = "CURRENT";
pub const LOCK_FILE: &str = "LOCK";
pub const READERS_DIR: &str = "readers";
const GEN_PREFIX: &str = "gen-";
const STAGING_PREFIX: &str = "staging-";

/// The generation directory `CURRENT` points at, or `None` when there is no store yet.
pub fn current_generation(dir: &Path) -> Result<Option<(u64, PathBuf)>, OpenError> {
    let path = dir.join(CURRENT_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OpenError::io(path, e)),
    };
    let name = text.trim();
    let number = name
        .strip_prefix(GEN_PREFIX)
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| OpenError::Layout { path: path.clone(), problem: LayoutProblem::BadCurrent { found: name.to_owned() } })?;
    let gen = dir.join(name);
    if !gen.is_dir() {
        return Err(OpenError::Layout { path: path.clone(), problem: LayoutProblem::MissingGeneration { generation: gen } });
    }
    Ok(Some((number, gen)))
}

pub fn generation_name(number: u64) -> String {
    format!("{GEN_PREFIX}{number:06}")
}

/// A fresh staging directory name for the next generation.
pub fn staging_dir(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{STAGING_PREFIX}{number:06}-{}", std::process::id()))
}

/// Atomically makes `generation` current: write a temp file, fsync, rename, fsync the dir.
pub fn commit_generation(dir: &Path, number: u64) -> Result<(), WriteError> {
    let tmp = dir.join("CURRENT.tmp");
    let mut f = File::create(&tmp).map_err(|e| WriteError::io(&tmp, e))?;
    writeln!(f, "{}", generation_name(number)).map_err(|e| WriteError::io(&tmp, e))?;
    f.sync_all().map_err(|e| WriteError::io(&tmp, e))?;
    drop(f);
    let cur = dir.join(CURRENT_FILE);
    fs::rename(&tmp, &cur).map_err(|e| WriteError::io(&cur, e))?;
    sync_dir(dir)
}

pub fn sync_dir(dir: &Path) -> Result<(), WriteError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| WriteError::io(dir, e))
}

/// Removes the leftovers of crashed loads (staging and scratch directories) and every
/// generation other than `keep` that no live reader holds, and the registrations of readers
/// that are gone. Only a writer (holding the writer lock) calls it.
pub fn remove_stale(dir: &Path, keep: Option<&Path>) -> Result<(), WriteError> {
    let held = live_reader_generations(dir)?;
    let entries = fs::read_dir(dir).map_err(|e| WriteError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| WriteError::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let stale = if name.starts_with(GEN_PREFIX) {
            Some(path.as_path()) != keep && !held.contains(name.as_ref())
        } else {
            name.starts_with(STAGING_PREFIX) || name.starts_with("tmp-")
        };
        if stale {
            fs::remove_dir_all(&path).map_err(|e| WriteError::io(&path, e))?;
        }
    }
    let tmp = dir.join("CURRENT.tmp");
    if tmp.exists() {
        fs::remove_file(&tmp).map_err(|e| WriteError::io(&tmp, e))?;
    }
    Ok(())
}

/// The generations named by live reader registrations; registrations whose lock nobody
/// holds (their reader ended without removing its file: killed, crashed) are removed.
pub fn live_reader_generations(dir: &Path) -> Result<BTreeSet<String>, WriteError> {
    let readers = dir.join(READERS_DIR);
    let mut held = BTreeSet::new();
    let entries = match fs::read_dir(&readers) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(held),
        Err(e) => return Err(WriteError::io(readers, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| WriteError::io(&readers, e))?;
        let name = entry.file_name();
        let Some(generation) = name.to_str().and_then(registration_generation) else {
            // Not a registration (nothing of ours): leave it alone.
            continue;
        };
        let path = entry.path();
        let file = match File::open(&path) {
            Ok(f) => f,
            // Its reader closed the store meanwhile.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(WriteError::io(path, e)),
        };
        match file.try_lock() {
            // Nobody holds it: the reader is gone. Removed while we hold the lock, so a
            // reader that created this name a moment ago and locks it after us sees it
            // unlinked and registers anew (`register_reader`).
            Ok(()) => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(WriteError::io(path, e)),
            },
            Err(fs::TryLockError::WouldBlock) => {
                held.insert(generation.to_owned());
            }
            Err(fs::TryLockError::Error(e)) => return Err(WriteError::io(path, e)),
        }
    }
    Ok(held)
}

/// `gen-000002.PID.N` -> `gen-000002`.
fn registration_generation(file_name: &str) -> Option<&str> {
    let (generation, rest) = file_name.split_once('.')?;
    let number = generation.strip_prefix(GEN_PREFIX)?;
    let (pid, n) = rest.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(number) && digits(pid) && digits(n)).then_some(generation)
}

/// How an open store keeps its generation on disk while it is open.
#[derive(Debug)]
pub enum ReaderPin {
    /// A registration under `DIR/readers/`, held until the store is dropped.
    Registered(Registration),
    /// The store was opened by the writer (`Store::open`): no commit can happen meanwhile.
    Writer(WriterLock),
    /// The registry could not be written (a read-only filesystem or a directory this user
    /// cannot write): the store is open, but a commit by another process may remove its
    /// generation; reads then fail with `ReadError::GenerationRemoved`.
    Unregistered {
        /// The registry directory (`DIR/readers`).
        readers: PathBuf,
        /// Why it could not be written.
        reason: std::io::Error,
    },
}

/// A reader's registration file, locked (shared) while it exists; removed on drop.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
    file: File,
}

impl Registration {
    /// The registration file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Best effort: a file left behind is unlocked once `file` closes, so the next
        // writer removes it as stale.
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Tries before giving up on a registry that keeps moving (a commit between every read of
/// `CURRENT` and the registration after it, or a cleaner taking every fresh name).
const REGISTER_ATTEMPTS: usize = 64;

/// Registers a reader of the current generation and returns that generation with the pin
/// that keeps it. Protocol: read `CURRENT` (N), create and share-lock `readers/gen-N.PID.K`,
/// then read `CURRENT` again. If it still names N, any commit from now on finds the
/// registration (it lists readers after replacing `CURRENT`), and none before it removed N
/// (a writer never removes the current generation); otherwise retry with the new one.
pub fn register_reader(dir: &Path) -> Result<(u64, PathBuf, ReaderPin), OpenError> {
    expect_store_dir(dir)?;
    let not_a_store = || OpenError::NotAStore { path: dir.into() };
    for _ in 0..REGISTER_ATTEMPTS {
        let (number, gen) = current_generation(dir)?.ok_or_else(not_a_store)?;
        let registration = match create_registration(dir, number) {
            Ok(r) => r,
            Err(reason) => {
                let readers = dir.join(READERS_DIR);
                return Ok((number, gen, ReaderPin::Unregistered { readers, reason }));
            }
        };
        match current_generation(dir)? {
            Some((now, _)) if now == number => return Ok((number, gen, ReaderPin::Registered(registration))),
            _ => drop(registration),
        }
    }
    Err(OpenError::Layout { path: dir.join(CURRENT_FILE), problem: LayoutProblem::CurrentChurn { attempts: REGISTER_ATTEMPTS } })
}

fn create_registration(dir: &Path, number: u64) -> std::io::Result<Registration> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let readers = dir.join(READERS_DIR);
    fs::create_dir_all(&readers)?;
    for _ in 0..REGISTER_ATTEMPTS {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = readers.join(format!("{}.{}.{n}", generation_name(number), std::process::id()));
        let file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => f,
            // A stale file of an earlier process with this pid.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        // Blocks only while a writer holds it to remove it as stale (a moment).
        file.lock_shared()?;
        if still_linked(&file, &path)? {
            return Ok(Registration { path, file });
        }
        // A writer took the new file for a dead reader's between create and lock.
    }
    Err(std::io::Error::other(format!("{}: no registration survived {REGISTER_ATTEMPTS} attempts", readers.display())))
}

/// Whether `path` still names the open `file` (a writer may have unlinked it).
#[cfg(unix)]
fn still_linked(file: &File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let open = file.metadata()?;
    match fs::metadata(path) {
        Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn still_linked(_file: &File, path: &Path) -> std::io::Result<bool> {
    Ok(path.exists())
}

/// The writer lock: one loader or migration per store directory at a time. Readers do not
/// take it; they register (`register_reader`), which keeps their generation on disk.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

pub fn lock_writer(dir: &Path) -> Result<WriterLock, OpenError> {
    lock_writer_within(dir, WRITER_LOCK_GRACE)
}

/// The writer lock of a store that exists already (opening for writing, indexing tokens,
/// migrating): a missing path, a file, or a directory without a store is refused before
/// anything is created in it, so a mistyped path leaves no `LOCK` file or directory behind.
pub fn lock_existing_writer(dir: &Path) -> Result<WriterLock, OpenError> {
    expect_store_dir(dir)?;
    lock_writer(dir)
}

/// `dir` is a directory holding a store (`CURRENT`), or the error that says what it is.
pub fn expect_store_dir(dir: &Path) -> Result<(), OpenError> {
    match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(OpenError::Missing { path: dir.to_path_buf() }),
        Err(e) => Err(OpenError::io(dir, e)),
        Ok(m) if !m.is_dir() => Err(OpenError::NotADirectory { path: dir.to_path_buf() }),
        Ok(_) if !dir.join(CURRENT_FILE).exists() => Err(OpenError::NotAStore { path: dir.to_path_buf() }),
        Ok(_) => Ok(()),
    }
}

/// How long a writer waits for a held lock before it reports `Locked`.
///
/// Why wait at all: the flock belongs to the open file, and a process that forks while a
/// writer holds it (any thread of this process starting a child) gives the child a copy
/// of the descriptor until the child's `exec` closes it (close-on-exec). A writer that has
/// finished and closed its lock can thus leave it held for the moments between that fork
/// and exec, and the next writer of the same process would be refused for nothing. A real
/// writer holds the lock for its whole load, far longer than this; the few seconds allow
/// for a loaded machine, where a child can wait that long to be scheduled.
pub const WRITER_LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn lock_writer_within(dir: &Path, grace: std::time::Duration) -> Result<WriterLock, OpenError> {
    if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(OpenError::NotADirectory { path: dir.to_path_buf() });
    }
    fs::create_dir_all(dir).map_err(|e| OpenError::io(dir, e))?;
    let path = dir.join(LOCK_FILE);
    let open = || OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| OpenError::io(&path, e));
    let mut file = open()?;
    let deadline = std::time::Instant::now() + grace;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match file.try_lock() {
            // A failed first load removes the LOCK it held (`remove_first_load_debris`): a
            // lock taken on that unlinked file locks nothing, so take the one now at the path.
            Ok(()) if !same_file(&file, &path) => file = open()?,
            Ok(()) => return Ok(WriterLock { _file: file }),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(fs::TryLockError::WouldBlock) => return Err(OpenError::Locked { path: dir.to_path_buf(), lock: path }),
            Err(fs::TryLockError::Error(e)) => return Err(OpenError::io(path, e)),
        }
    }
}

/// Whether the open `file` is the one at `path` now.
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// What a directory held before a store's first load, so that a failed first load can
/// take back exactly what it added.
#[derive(Debug)]
pub struct BeforeFirstLoad {
    dir: PathBuf,
    /// The directories the load creates (the store directory, then missing parents).
    created: Vec<PathBuf>,
    /// The names in the directory before.
    entries: BTreeSet<std::ffi::OsString>,
}

impl BeforeFirstLoad {
    /// Looks at `dir` before a load; `None` when it holds a store already (`CURRENT`).
    pub fn look(dir: &Path) -> Option<BeforeFirstLoad> {
        if dir.join(CURRENT_FILE).exists() {
            return None;
        }
        let mut created = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && fs::symlink_metadata(d).is_err()) {
            created.push(d.to_path_buf());
            at = d.parent();
        }
        let entries = fs::read_dir(dir).map(|it| it.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
        Some(BeforeFirstLoad { dir: dir.to_path_buf(), created, entries })
    }

    /// After a failed first load (no `CURRENT`), called while the writer lock is held:
    /// removes what the load added and the directory itself when the load created it. Of
    /// the names the directory did not hold before, only the store's own are removed
    /// (`LOCK`, `readers/`, `CURRENT.tmp`, `staging-*`, `tmp-*`, `gen-*`, and
    /// `extra`: the load's own files such as its default rejects file). The lock is given
    /// up here (its file is removed first, see `lock_writer_within`). Best effort: the
    /// load's own error is what the caller reports.
    pub fn remove_debris(self, lock: WriterLock, extra: &[&str]) {
        if self.dir.join(CURRENT_FILE).exists() {
            return;
        }
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                if self.entries.contains(&name) {
                    continue;
                }
                let Some(text) = name.to_str() else { continue };
                let ours = [LOCK_FILE, READERS_DIR, "CURRENT.tmp"].contains(&text)
                    || extra.contains(&text)
                    || [GEN_PREFIX, STAGING_PREFIX, "tmp-"].iter().any(|p| text.starts_with(p));
                if !ours {
                    continue;
                }
                let path = entry.path();
                let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            }
        }
        drop(lock);
        self.remove_created_dirs();
    }

    /// Removes the directories the load created, while they are empty (anything someone
    /// else put there meanwhile stays).
    pub fn remove_created_dirs(&self) {
        for d in &self.created {
            if fs::remove_dir(d).is_err() {
                break;
            }
        }
    }
}

/// Bytes used by the files under `path` (the size on disk of a generation).
pub fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => total += dir_size(&entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory whose `CURRENT` names `gen-000003` (an empty directory: the registry
    /// does not look inside generations).
    fn store_at_generation_3() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for n in 1..=3 {
            fs::create_dir(dir.path().join(generation_name(n))).unwrap();
        }
        commit_generation(dir.path(), 3).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        out.sort();
        out
    }

    #[test]
    fn registration_names() {
        assert_eq!(registration_generation("gen-000002.4711.0"), Some("gen-000002"));
        assert_eq!(registration_generation("gen-000002.4711"), None);
        assert_eq!(registration_generation("gen-.4711.0"), None);
        assert_eq!(registration_generation("gen-000002.47x1.0"), None);
        assert_eq!(registration_generation("notes.txt"), None);
    }

    #[test]
    fn a_live_registration_holds_and_a_stale_one_is_removed() {
        let dir = store_at_generation_3();
        let (number, gen, pin) = register_reader(dir.path()).unwrap();
        assert_eq!((number, gen), (3, dir.path().join("gen-000003")));
        let ReaderPin::Registered(registration) = &pin else { panic!("{pin:?}") };
        let path = registration.path().to_path_buf();
        // What a killed reader of generation 1 leaves: its file, which nobody locks.
        let stale = dir.path().join(READERS_DIR).join("gen-000001.4294967295.0");
        fs::write(&stale, b"").unwrap();
        // Not ours: left alone.
        fs::write(dir.path().join(READERS_DIR).join("README"), b"").unwrap();
        assert_eq!(live_reader_generations(dir.path()).unwrap(), BTreeSet::from(["gen-000003".to_owned()]));
        assert!(!stale.exists() && path.exists());
        drop(pin);
        assert!(!path.exists(), "closing removes the registration");
        assert!(live_reader_generations(dir.path()).unwrap().is_empty());
        assert_eq!(names(&dir.path().join(READERS_DIR)), vec!["README"]);
    }

    #[test]
    fn remove_stale_keeps_the_current_and_the_held_generations() {
        let dir = store_at_generation_3();
        // A reader of generation 3, then generation 4 committed, as a load does.
        let (_, _, pin) = register_reader(dir.path()).unwrap();
        fs::create_dir(dir.path().join(generation_name(4))).unwrap();
        fs::create_dir(dir.path().join("staging-000005-1")).unwrap();
        commit_generation(dir.path(), 4).unwrap();
        remove_stale(dir.path(), Some(&dir.path().join("gen-000004"))).unwrap();
        assert_eq!(names(dir.path()), vec!["CURRENT", "gen-000003", "gen-000004", "readers"]);
        drop(pin);
        remove_stale(dir.path(), Some(&dir.path().join("gen-000004"))).unwrap();
        assert_eq!(names(dir.path()), vec!["CURRENT", "gen-000004", "readers"]);
    }

    /// The check a reader makes after locking its new file: a writer may have removed
    /// the name (taking the file for a dead reader's), or a new file may have taken it.
    #[test]
    fn still_linked_sees_a_removed_or_replaced_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gen-000001.1.0");
        let file = File::create(&path).unwrap();
        assert!(still_linked(&file, &path).unwrap());
        fs::remove_file(&path).unwrap();
        assert!(!still_linked(&file, &path).unwrap());
        let _other = File::create(&path).unwrap();
        assert!(!still_linked(&file, &path).unwrap());
    }

    #[test]
    fn a_registry_that_cannot_be_written_leaves_the_reader_unregistered() {
        let dir = store_at_generation_3();
        fs::write(dir.path().join(READERS_DIR), b"not a directory").unwrap();
        let (number, _, pin) = register_reader(dir.path()).unwrap();
        assert_eq!(number, 3);
        assert!(matches!(pin, ReaderPin::Unregistered { .. }), "{pin:?}");
    }

    #[test]
    fn a_writer_waits_out_a_lock_released_within_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let other = OpenOptions::new().create(true).truncate(false).write(true).open(dir.path().join(LOCK_FILE)).unwrap();
        other.lock().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(other);
        });
        let start = std::time::Instant::now();
        lock_writer_within(dir.path(), std::time::Duration::from_secs(30)).expect("the lock came free");
        assert!(start.elapsed() >= std::time::Duration::from_millis(90), "it did wait for the release");
        release.join().unwrap();
    }

    /// A failed first load removes the LOCK it holds, then releases it: a writer that was
    /// waiting on that file must lock the one at the path, or a third writer creating a new
    /// LOCK would run beside it.
    #[test]
    fn a_writer_waiting_on_a_removed_lock_takes_the_one_at_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let first = lock_writer(dir.path()).unwrap();
        let remove = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            fs::remove_file(&path).unwrap();
            drop(first);
        });
        let second = lock_writer_within(dir.path(), std::time::Duration::from_secs(30)).expect("the lock came free");
        remove.join().unwrap();
        assert!(same_file(&second._file, &dir.path().join(LOCK_FILE)), "holds the LOCK at the path");
        let err = lock_writer_within(dir.path(), std::time::Duration::from_millis(20)).expect_err("held by the second");
        assert!(matches!(err, OpenError::Locked { .. }), "{err:?}");
    }

    /// What a failed first load takes back: only what it added, and the directories it made.
    #[test]
    fn first_load_debris_is_what_the_load_added() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a").join("b");
        let before = BeforeFirstLoad::look(&new).unwrap();
        let lock = lock_writer(&new).unwrap();
        fs::create_dir_all(new.join("staging-000001-1").join("x")).unwrap();
        fs::write(new.join("rejected-gen-000001.tsv"), b"").unwrap();
        before.remove_debris(lock, &["rejected-gen-000001.tsv"]);
        assert_eq!(names(root.path()), Vec::<String>::new());
        // A directory that was there: its own names stay (even ones that look like ours),
        // names it did not hold and that are not the store's stay too.
        let old = root.path().join("old");
        fs::create_dir(&old).unwrap();
        fs::write(old.join("gen-notes"), b"").unwrap();
        let before = BeforeFirstLoad::look(&old).unwrap();
        let lock = lock_writer(&old).unwrap();
        fs::create_dir(old.join(READERS_DIR)).unwrap();
        fs::write(old.join("CURRENT.tmp"), b"").unwrap();
        fs::write(old.join("someone-elses"), b"").unwrap();
        before.remove_debris(lock, &[]);
        assert_eq!(names(&old), vec!["gen-notes", "someone-elses"]);
        // A store (CURRENT) is never looked at as a first load.
        fs::write(old.join(CURRENT_FILE), b"gen-000001\n").unwrap();
        assert!(BeforeFirstLoad::look(&old).is_none());
    }

    #[test]
    fn a_lock_held_past_the_grace_is_reported_as_locked() {
        let dir = tempfile::tempdir().unwrap();
        let _held = lock_writer(dir.path()).unwrap();
        let err = lock_writer_within(dir.path(), std::time::Duration::from_millis(20)).expect_err("held");
        assert!(matches!(&err, OpenError::Locked { path, .. } if path == dir.path()), "{err:?}");
    }

    /// The failure the grace is for: a child forked while a writer holds the lock keeps it
    /// held after the writer closes it, until the child's `exec`. The child here announces
    /// its fork through a pipe and waits for a byte on another before its exec.
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_the_lock_was_held_holds_it_until_its_exec() {
        use std::io::Read;
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let lock = lock_writer(dir.path()).unwrap();
        let (mut forked, announce) = std::io::pipe().unwrap();
        let (go, mut go_on) = std::io::pipe().unwrap();
        let mut command = std::process::Command::new("true");
        // SAFETY: the closure runs in the forked child before exec and only calls write(2)
        // and read(2), which are async-signal-safe; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                (&announce).write_all(&[1])?;
                let mut byte = [0u8];
                std::io::Read::read_exact(&mut &go, &mut byte)?;
                Ok(())
            });
        }
        let child = std::thread::spawn(move || command.status());
        let mut byte = [0u8];
        forked.read_exact(&mut byte).unwrap();
        drop(lock);
        // Closed here, yet still held through the child's copy of the descriptor.
        let refused = lock_writer_within(dir.path(), std::time::Duration::ZERO);
        assert!(matches!(refused, Err(OpenError::Locked { .. })), "{refused:?}");
        // Its exec closes that copy; a writer that waits gets the lock then.
        go_on.write_all(&[1]).unwrap();
        drop(lock_writer_within(dir.path(), std::time::Duration::from_secs(60)).expect("the lock came free at the child's exec"));
        assert!(child.join().unwrap().unwrap().success());
    }
}
