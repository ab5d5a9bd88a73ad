//! Batch files for `retrieve` and `run`: the numbered JSON-lines input, and an output that no
//! kill destroys and `--resume` continues.
//!
//! The answers go to `OUTPUT.partial`, which is renamed onto OUTPUT when the last line is
//! answered, so a failed or killed run never touches an existing OUTPUT. After every round
//! of lines the partial file is synced and `OUTPUT.checkpoint` is replaced (write, sync,
//! rename) by a record of how far the run got: the input position (next line number, byte
//! offset, a hash of the bytes before it), the partial file's length and hash, the counts,
//! and what the answers depend on (command, store generation, settings). Whatever a kill
//! leaves, the checkpoint names a synced prefix of the partial file that answers exactly the
//! input lines before its position: `--resume` checks that the input still starts with those
//! bytes and the settings are the same, cuts the partial file back to that prefix (dropping
//! a half-written line and anything after the checkpoint) and goes on from the next line.
//! Skipped bad lines and blank lines are behind the position too, so they are neither
//! retried nor answered twice. Finishing: a last checkpoint marked complete, the rename, the
//! checkpoint removed; a kill between the two is finished by `--resume`.
//!
//! An OUTPUT that is not a regular file (`/dev/stdout`, a pipe) is written straight, with no
//! partial file: such output cannot be continued, and `--resume` refuses it.

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// FNV-1a, 64 bits: detects a changed input or partial file (not an adversary), and is
/// defined by its constants, so checkpoints stay valid across builds.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    const START: u64 = 0xcbf2_9ce4_8422_2325;

    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Where reading an input stands: the number of the next line (from 1), its byte offset,
/// and the hash of the bytes before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputPos {
    pub line: u64,
    pub offset: u64,
    pub hash: u64,
}

impl InputPos {
    const START: InputPos = InputPos { line: 1, offset: 0, hash: Fnv::START };
}

/// One request line: its number, its bytes (no line end, no byte-order mark) and the input
/// position at its start (where a run that stops at it resumes).
pub struct InputLine {
    pub number: usize,
    pub bytes: Vec<u8>,
    pub start: InputPos,
}

/// The lines of a JSON-lines input file, numbered from 1, read a round at a time with a
/// byte progress bar. Lines are bytes: invalid UTF-8 is a fault of its line (bad input), not
/// a read error. Blank lines are read (they keep their numbers) but not returned: they get
/// no answer. A UTF-8 byte-order mark at the start of the file is dropped.
pub struct NumberedLines {
    reader: BufReader<File>,
    pos: InputPos,
    pub bar: ProgressBar,
    /// The file's name as errors show it.
    pub file: String,
    /// The file's path as given.
    pub path: PathBuf,
}

impl NumberedLines {
    pub fn open(path: &Path) -> Result<NumberedLines> {
        // A directory opens but cannot be read: refuse it before any output is created.
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            bail!(super::Usage(format!("{}: is a directory, not a JSON-lines file", path.display())));
        }
        let input = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} ({per_sec}, ETA {eta}) {msg}")?);
        Ok(NumberedLines { reader: BufReader::new(input), pos: InputPos::START, bar, file: path.display().to_string(), path: path.to_owned() })
    }

    /// Where the next line starts.
    pub fn position(&self) -> InputPos {
        self.pos
    }

    /// The next line as stored (with its line end), or None at the end of the file.
    fn raw_line(&mut self) -> Result<Option<(InputPos, Vec<u8>)>> {
        let start = self.pos;
        let mut line = Vec::new();
        let n = self.reader.read_until(b'\n', &mut line).with_context(|| format!("reading {} at line {}", self.file, start.line))?;
        if n == 0 {
            return Ok(None);
        }
        let mut h = Fnv(start.hash);
        h.update(&line);
        self.pos = InputPos { line: start.line + 1, offset: start.offset + n as u64, hash: h.0 };
        self.bar.inc(n as u64);
        Ok(Some((start, line)))
    }

    /// The next up to `n` lines that are not blank, with their numbers and without their
    /// line end; empty at the end of the file.
    pub fn round(&mut self, n: usize) -> Result<Vec<InputLine>> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let Some((start, mut line)) = self.raw_line()? else { break };
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if start.offset == 0 && line.starts_with(b"\xef\xbb\xbf") {
                line.drain(..3);
            }
            if !line.trim_ascii().is_empty() {
                out.push(InputLine { number: start.line as usize, bytes: line, start });
            }
        }
        Ok(out)
    }

    /// Reads up to `to` (from the start of the file); false when the file does not reach
    /// there or holds other bytes before it than the ones `to` hashed.
    fn skip_to(&mut self, to: InputPos) -> Result<bool> {
        while self.pos.line < to.line && self.pos.offset < to.offset {
            if self.raw_line()?.is_none() {
                return Ok(false);
            }
        }
        Ok(self.pos == to)
    }
}

/// What a batch's answers depend on: the command, and named settings (store generation,
/// retriever, generator, ...). A resume needs them equal.
pub struct Job {
    pub command: &'static str,
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// `OUTPUT.checkpoint`.
#[derive(Serialize, Deserialize)]
struct Checkpoint {
    /// This record's format.
    format: u32,
    command: String,
    trellis: String,
    settings: serde_json::Map<String, serde_json::Value>,
    /// The input's name when the run started (shown in messages; the bytes are what counts).
    input: String,
    /// The next input line to answer.
    next: InputPos,
    /// The partial file's answered prefix: its length and FNV-1a hash.
    output_bytes: u64,
    output_hash: u64,
    answered: u64,
    skipped: u64,
    /// Every line answered: what is left is the rename.
    complete: bool,
}

const CHECKPOINT_FORMAT: u32 = 1;

/// An output path with a suffix appended (`out.jsonl` -> `out.jsonl.partial`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The directory a file is in, for syncing a rename or a creation.
fn sync_dir_of(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("syncing directory {}", dir.display()))
}

/// The files of a resumable output.
struct Files {
    output: PathBuf,
    partial: PathBuf,
    checkpoint: PathBuf,
}

impl Files {
    fn read_checkpoint(&self) -> Result<Option<Checkpoint>> {
        let bytes = match std::fs::read(&self.checkpoint) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.checkpoint.display())),
        };
        let c: Checkpoint = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a Trellis checkpoint (remove it and {} to start over)", self.checkpoint.display(), self.partial.display()))?;
        if c.format != CHECKPOINT_FORMAT {
            bail!("{} has checkpoint format {}, this build writes {CHECKPOINT_FORMAT}: finish it with the Trellis that wrote it, or remove it and {} to start over", self.checkpoint.display(), c.format, self.partial.display());
        }
        Ok(Some(c))
    }

    /// Replaces the checkpoint atomically (a kill leaves the old one or the new one).
    fn write_checkpoint(&self, c: &Checkpoint) -> Result<()> {
        let tmp = with_suffix(&self.checkpoint, ".tmp");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&serde_json::to_vec(c)?)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.checkpoint)
        };
        write().with_context(|| format!("writing {}", self.checkpoint.display()))
    }

    /// The note for a run that stops early: what is kept and how to go on.
    fn kept(&self, c: &Checkpoint) -> String {
        let done = c.next.line - 1;
        let lines = if done == 0 { "no line".to_string() } else { format!("lines 1-{done}") };
        format!(
            "{} answers and {} skipped lines ({lines} of {}) are kept in {}; rerun with --resume to continue at line {}",
            c.answered,
            c.skipped,
            c.input,
            self.partial.display(),
            c.next.line
        )
    }
}

/// What a batch's answers depend on in a store: which one, and which generation of it (a
/// load makes a new one).
pub fn store_identity(store: &trellis::Store) -> serde_json::Value {
    let dir = std::fs::canonicalize(store.dir()).unwrap_or_else(|_| store.dir().to_owned());
    let generation = store.generation_dir().file_name().map(|g| g.to_string_lossy().into_owned()).unwrap_or_default();
    // A store deleted and loaded again at the same path has the same generation name: the
    // generation directory's inode and modification time tell the two apart.
    serde_json::Value::from(format!("{} ({generation}, {})", dir.display(), file_identity(store.generation_dir())))
}

/// A file's or directory's identity on this machine: device, inode, size and modification
/// time (what changes when it is replaced or rewritten).
fn file_identity(path: &Path) -> String {
    match std::fs::metadata(path) {
        #[cfg(unix)]
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            format!("{}:{}:{}:{}.{:09}", m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec())
        }
        #[cfg(not(unix))]
        Ok(m) => format!("{}:{:?}", m.len(), m.modified().ok()),
        Err(_) => "missing".into(),
    }
}

/// What a batch's answers depend on in a model directory: every file's identity (a file
/// replaced or edited in place, `trellis.json` included, changes it).
/// A model directory's identity ([`model_identity`]), or one file's.
pub fn path_identity(path: &Path) -> serde_json::Value {
    if path.is_dir() {
        return model_identity(path);
    }
    serde_json::Value::from(format!("{} [{}]", absolute(path), file_identity(path)))
}

pub fn model_identity(dir: &Path) -> serde_json::Value {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.sort();
    let parts: Vec<String> =
        files.iter().map(|f| format!("{}={}", f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), file_identity(f))).collect();
    serde_json::Value::from(format!("{} [{}]", absolute(dir), parts.join(", ")))
}

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    false
}

/// A directory named in the settings, as an absolute path (a resume from another working
/// directory names the same model).
pub fn absolute(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()).display().to_string()
}

/// OUTPUT itself, or, when it is a symbolic link, what it points to: the partial file goes
/// beside that, and the rename replaces that file, not the link.
fn resolve_link(output: &Path) -> Result<PathBuf> {
    match std::fs::symlink_metadata(output) {
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::read_link(output).with_context(|| format!("reading the link {}", output.display()))?;
            Ok(output.parent().map_or_else(|| target.clone(), |p| p.join(&target)))
        }
        _ => Ok(output.to_owned()),
    }
}

/// The output of a batch command; see the module documentation.
pub struct BatchOutput {
    out: BufWriter<File>,
    /// The file written: the partial file, or OUTPUT itself when it is not a regular file.
    target: PathBuf,
    files: Option<Files>,
    state: Checkpoint,
    hash: Fnv,
    /// The line this run started at when it continued an earlier one.
    pub resumed_at: Option<u64>,
    /// Answers written by this run (the totals are [`answered`](Self::answered)).
    pub answered_now: u64,
    /// The run being resumed had answered every line (a kill came between its last checkpoint
    /// and removing it): OUTPUT is complete, nothing is to be read or written.
    pub finished: bool,
}

impl BatchOutput {
    /// Opens OUTPUT for `job` reading `input`: a new partial file, or with `resume` the
    /// interrupted one, with `input` moved past the lines it answered.
    pub fn open(output: &Path, resume: bool, job: Job, input: &mut NumberedLines) -> Result<BatchOutput> {
        if same_file(output, &input.path) {
            bail!(super::Usage(format!("--output {} is the input file: the answers would replace the requests; name another file", output.display())));
        }
        let output = &resolve_link(output)?;
        let mut state = Checkpoint {
            format: CHECKPOINT_FORMAT,
            command: job.command.to_string(),
            trellis: env!("CARGO_PKG_VERSION").to_string(),
            settings: job.settings,
            input: input.file.clone(),
            next: InputPos::START,
            output_bytes: 0,
            output_hash: Fnv::START,
            answered: 0,
            skipped: 0,
            complete: false,
        };
        let regular = match std::fs::metadata(output) {
            Ok(m) => m.is_file(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(e).with_context(|| format!("reading {}", output.display())),
        };
        if !regular {
            return Self::open_stream(output, resume, state);
        }
        let files = Files { output: output.to_owned(), partial: with_suffix(output, ".partial"), checkpoint: with_suffix(output, ".checkpoint") };
        if resume && !files.partial.exists() {
            if let Some(done) = Self::finished_run(&files, input, &state)? {
                return Ok(done);
            }
        }
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&files.partial)
            .with_context(|| format!("creating {}", files.partial.display()))?;
        // One writer at a time: a second run on the same OUTPUT would interleave answers.
        if f.try_lock().is_err() {
            bail!("{} is being written by another process (another trellis run on the same --output?)", files.partial.display());
        }
        let (hash, resumed_at) = Self::continue_partial(&mut f, &files, output, resume, input, &mut state)?;
        if resumed_at.is_none() {
            // A fresh run: an empty partial file, and a first checkpoint saying so, before
            // anything is answered.
            f.set_len(0).with_context(|| format!("creating {}", files.partial.display()))?;
            sync_dir_of(&files.partial)?;
            files.write_checkpoint(&state)?;
            sync_dir_of(&files.checkpoint)?;
        }
        f.seek(std::io::SeekFrom::Start(state.output_bytes)).with_context(|| format!("seeking in {}", files.partial.display()))?;
        let target = files.partial.clone();
        Ok(BatchOutput { out: BufWriter::new(f), target, files: Some(files), state, hash, resumed_at, answered_now: 0, finished: false })
    }

    /// OUTPUT that is not a regular file (a terminal, a pipe, a device): written directly,
    /// never resumable.
    fn open_stream(output: &Path, resume: bool, state: Checkpoint) -> Result<BatchOutput> {
        if resume {
            let what = if std::fs::metadata(output).is_ok_and(|m| m.is_dir()) { "a directory" } else { "not a regular file (a terminal, a pipe, a device)" };
            bail!(super::Usage(format!(
                "--resume needs --output to name a file: {} is {what}, and output written there cannot be continued",
                output.display()
            )));
        }
        let f = File::create(output).with_context(|| format!("opening {}", output.display()))?;
        let (hash, target) = (Fnv(Fnv::START), output.to_owned());
        Ok(BatchOutput { out: BufWriter::new(f), target, files: None, state, hash, resumed_at: None, answered_now: 0, finished: false })
    }

    /// `--resume` with no partial file: a finished run killed between its rename and
    /// removing its checkpoint. The same checks as any resume (job, input), then nothing is
    /// left to answer. `None` when the checkpoint records no finished run.
    fn finished_run(files: &Files, input: &mut NumberedLines, state: &Checkpoint) -> Result<Option<BatchOutput>> {
        let Some(c) = files.read_checkpoint()?.filter(|c| c.complete) else { return Ok(None) };
        if !output_matches(&files.output, &c)? {
            bail!(super::Usage(format!(
                "cannot resume: {} is not the finished output {} records (it was changed or replaced); remove {} to start over",
                files.output.display(),
                files.checkpoint.display(),
                files.checkpoint.display()
            )));
        }
        check_same_job(files, &c, state)?;
        let whole = std::fs::metadata(&input.path).map(|m| m.len()).ok();
        if whole != Some(c.next.offset) || !input.skip_to(c.next)? {
            bail!(super::Usage(format!(
                "cannot resume: {} is not the input the finished run answered ({} lines, {} bytes, from {}); remove {} to start over",
                input.file,
                c.next.line - 1,
                c.next.offset,
                c.input,
                files.checkpoint.display()
            )));
        }
        std::fs::remove_file(&files.checkpoint).with_context(|| format!("removing {}", files.checkpoint.display()))?;
        let f = File::open(&files.output).with_context(|| format!("opening {}", files.output.display()))?;
        let (hash, target, resumed_at) = (Fnv(c.output_hash), files.output.clone(), Some(c.next.line));
        Ok(Some(BatchOutput { out: BufWriter::new(f), target, files: None, state: c, hash, resumed_at, answered_now: 0, finished: true }))
    }

    /// What the partial file and its checkpoint hold: a fresh start (an empty partial, or a
    /// completed run's leftover checkpoint), a refusal (an interrupted run without
    /// `--resume`, a partial changed after its checkpoint, another input), or, resuming,
    /// the partial truncated to its checkpoint and `input` moved past the lines it answered.
    /// The running hash of the answers and the line the run resumes at.
    fn continue_partial(
        f: &mut File,
        files: &Files,
        output: &Path,
        resume: bool,
        input: &mut NumberedLines,
        state: &mut Checkpoint,
    ) -> Result<(Fnv, Option<u64>)> {
        let len = f.metadata().with_context(|| format!("reading {}", files.partial.display()))?.len();
        match files.read_checkpoint()? {
            // A completed run's leftover checkpoint (its partial file is OUTPUT now).
            Some(c) if c.complete && len == 0 => Ok((Fnv(Fnv::START), None)),
            None | Some(_) if len == 0 && !resume => Ok((Fnv(Fnv::START), None)),
            None if len > 0 => bail!(
                "{} holds {len} bytes but there is no {}: it is not a run Trellis can continue; remove it to start over",
                files.partial.display(),
                files.checkpoint.display()
            ),
            None => {
                eprintln!("note: nothing to resume for {}: answering {} from line 1", output.display(), input.file);
                Ok((Fnv(Fnv::START), None))
            }
            Some(c) if !resume => bail!(super::Usage(format!(
                "{} holds an interrupted run ({} answered, {} skipped, up to line {} of {}): add --resume to continue it, or remove it and {} to start over",
                files.partial.display(),
                c.answered,
                c.skipped,
                c.next.line - 1,
                c.input,
                files.checkpoint.display()
            ))),
            Some(c) => {
                check_same_job(files, &c, state)?;
                if len < c.output_bytes {
                    bail!(
                        "{} is shorter ({len} bytes) than its checkpoint records ({} bytes): it was changed after the run; remove it and {} to start over",
                        files.partial.display(),
                        c.output_bytes,
                        files.checkpoint.display()
                    );
                }
                if hash_of((&mut *f).take(c.output_bytes), &files.partial)? != c.output_hash {
                    bail!(
                        "{}'s first {} bytes are not the answers its checkpoint records: it was changed after the run; remove it and {} to start over",
                        files.partial.display(),
                        c.output_bytes,
                        files.checkpoint.display()
                    );
                }
                if !input.skip_to(c.next)? {
                    bail!(super::Usage(format!(
                        "cannot resume: {} does not start with the {} lines ({} bytes) the interrupted run answered from {} (the input changed?); give that input, or remove {} and {} to start over",
                        input.file,
                        c.next.line - 1,
                        c.next.offset,
                        c.input,
                        files.partial.display(),
                        files.checkpoint.display()
                    )));
                }
                // Drop what was written after the checkpoint (a half-written line included).
                f.set_len(c.output_bytes).with_context(|| format!("truncating {}", files.partial.display()))?;
                f.sync_all().with_context(|| format!("syncing {}", files.partial.display()))?;
                state.next = c.next;
                state.output_bytes = c.output_bytes;
                state.output_hash = c.output_hash;
                state.answered = c.answered;
                state.skipped = c.skipped;
                Ok((Fnv(c.output_hash), Some(c.next.line)))
            }
        }
    }

    /// Writes the answer to input line `line` (with a `"line"` field added).
    pub fn answer(&mut self, line: usize, mut v: serde_json::Value) -> Result<()> {
        if let Some(o) = v.as_object_mut() {
            o.insert("line".into(), serde_json::Value::from(line));
        }
        let mut bytes = serde_json::to_vec(&v)?;
        bytes.push(b'\n');
        self.out.write_all(&bytes).with_context(|| format!("writing {}", self.target.display()))?;
        self.hash.update(&bytes);
        self.state.output_bytes += bytes.len() as u64;
        self.state.answered += 1;
        self.answered_now += 1;
        Ok(())
    }

    /// Counts a skipped bad line.
    pub fn skip(&mut self) {
        self.state.skipped += 1;
    }

    /// Lines answered, this run and the runs it continues.
    pub fn answered(&self) -> u64 {
        self.state.answered
    }

    /// Bad lines skipped, this run and the runs it continues.
    pub fn skipped(&self) -> u64 {
        self.state.skipped
    }

    /// Records that every line before `next` is answered or skipped: the answers so far are
    /// synced, then the checkpoint is replaced.
    pub fn checkpoint(&mut self, next: InputPos) -> Result<()> {
        self.out.flush().with_context(|| format!("writing {}", self.target.display()))?;
        let Some(files) = &self.files else { return Ok(()) };
        self.out.get_ref().sync_data().with_context(|| format!("syncing {}", files.partial.display()))?;
        self.state.next = next;
        self.state.output_hash = self.hash.0;
        files.write_checkpoint(&self.state)
    }

    /// A run stopping before input position `next` (a bad line, a failing store): the
    /// answers before it are checkpointed, and a note on stderr says where they are and how
    /// to go on.
    pub fn stop_at(&mut self, next: InputPos) {
        match self.checkpoint(next) {
            Ok(()) => {
                if let Some(f) = &self.files {
                    eprintln!("note: {}", f.kept(&self.state));
                }
            }
            Err(e) => eprintln!("note: the answers so far could not be kept: {e:#}"),
        }
    }

    /// The last line is answered: the partial file becomes OUTPUT.
    pub fn finish(mut self, end: InputPos) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.state.complete = true;
        self.checkpoint(end)?;
        let Some(files) = &self.files else { return Ok(()) };
        std::fs::rename(&files.partial, &files.output).with_context(|| format!("renaming {} to {}", files.partial.display(), files.output.display()))?;
        sync_dir_of(&files.output)?;
        std::fs::remove_file(&files.checkpoint).with_context(|| format!("removing {}", files.checkpoint.display()))?;
        Ok(())
    }
}

/// Whether OUTPUT is what a complete checkpoint recorded.
fn output_matches(output: &Path, c: &Checkpoint) -> Result<bool> {
    let Ok(f) = File::open(output) else { return Ok(false) };
    if f.metadata().map(|m| m.len()).unwrap_or(u64::MAX) != c.output_bytes {
        return Ok(false);
    }
    Ok(hash_of(f, output)? == c.output_hash)
}

/// The FNV-1a hash of what `r` reads (from `path`, named in errors).
fn hash_of(r: impl Read, path: &Path) -> Result<u64> {
    let mut h = Fnv(Fnv::START);
    let mut r = BufReader::new(r);
    loop {
        let buf = r.fill_buf().with_context(|| format!("reading {}", path.display()))?;
        if buf.is_empty() {
            return Ok(h.0);
        }
        h.update(buf);
        let n = buf.len();
        r.consume(n);
    }
}

/// A resume must be the same command, build and settings as the run it continues.
fn check_same_job(files: &Files, was: &Checkpoint, now: &Checkpoint) -> Result<()> {
    let refuse = |what: String| -> Result<()> {
        bail!(super::Usage(format!(
            "cannot resume {}: {what}; rerun with the interrupted run's options, or remove {} and {} to start over",
            files.partial.display(),
            files.partial.display(),
            files.checkpoint.display()
        )))
    };
    if was.command != now.command {
        return refuse(format!("it was written by `trellis {}`, not `trellis {}`", was.command, now.command));
    }
    if was.trellis != now.trellis {
        return refuse(format!("it was written by Trellis {}, this is {}", was.trellis, now.trellis));
    }
    let keys: std::collections::BTreeSet<&String> = was.settings.keys().chain(now.settings.keys()).collect();
    for k in keys {
        let (a, b) = (was.settings.get(k), now.settings.get(k));
        if a != b {
            let show = |v: Option<&serde_json::Value>| v.map_or_else(|| "(none)".to_string(), |v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
            return refuse(format!("its {k} was {}, now {}", show(a), show(b)));
        }
    }
    Ok(())
}

/// The end of a summary line of a resumed run: where it started and what it added.
pub fn resumed_note(resumed_at: Option<u64>, now: u64) -> String {
    resumed_at.map_or_else(String::new, |l| format!(" (resumed at line {l}: {now} answered by this run)"))
}

/// Writes a whole file (`eval`'s predictions and misses): into `.NAME.PID.tmp` beside PATH,
/// synced and renamed over it when complete, so a run that fails or is killed leaves an
/// existing PATH as it was (a kill at worst leaves the temporary file). A PATH that is not a
/// regular file (`/dev/stdout`) is written straight.
pub fn write_replacing(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let context = || format!("writing {}", path.display());
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut out = BufWriter::new(File::create(path).with_context(context)?);
        write(&mut out)?;
        return out.flush().with_context(context);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| -> Result<()> {
        let mut out = BufWriter::new(File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?);
        write(&mut out)?;
        let f = out.into_inner().map_err(|e| e.into_error()).with_context(context)?;
        f.sync_all().with_context(context)?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        sync_dir_of(path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
