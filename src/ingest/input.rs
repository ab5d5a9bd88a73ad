//! Input files: compression and format detection, and a reader that cuts the decompressed
//! stream into chunks of whole lines for the parser threads.

use super::error::{IngestError, LineError, LineErrorKind, LineProblem};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

/// Longest accepted line (bytes, without the newline).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Target size of one chunk handed to a parser thread.
pub const CHUNK_BYTES: usize = 1 << 20;
/// The UTF-8 byte-order mark, stripped from the start of every input.
const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// Triple syntaxes the loader reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Format {
    /// `subject \t relation \t object` (OpenDialKG, Freebase-Easy).
    Tsv,
    /// `head|relation|tail` (MetaQA).
    Pipe,
    /// N-Triples (Freebase RDF dump, Wikidata truthy dump).
    Ntriples,
}

/// How an input file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`.gz`).
    Gzip,
    /// bzip2 (`.bz2`).
    Bzip2,
    /// zstd (`.zst`).
    Zstd,
}

impl Compression {
    /// How messages call it (`plain` for no compression).
    fn label(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Bzip2 => "bzip2",
            Compression::Zstd => "zstd",
        }
    }
}

/// Where triples come from: a file, or standard input (`-`).
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// The file to read; `-` is standard input.
    pub path: PathBuf,
    /// `None`: detect from the file name.
    pub format: Option<Format>,
    /// `None`: detect from the file name, then from the magic bytes.
    pub compression: Option<Compression>,
}

impl InputSpec {
    /// The file at `path`, its format and compression detected.
    pub fn new(path: impl Into<PathBuf>) -> InputSpec {
        InputSpec { path: path.into(), format: None, compression: None }
    }

    /// Whether the input is standard input (`-`).
    pub fn is_stdin(&self) -> bool {
        self.path.as_os_str() == "-"
    }

    /// The path for messages (`<stdin>` for standard input).
    pub fn display(&self) -> String {
        if self.is_stdin() {
            "<stdin>".into()
        } else {
            self.path.display().to_string()
        }
    }
}

fn compression_from_name(name: &str) -> (Compression, &str) {
    for (ext, c) in [(".gz", Compression::Gzip), (".bz2", Compression::Bzip2), (".zst", Compression::Zstd)] {
        if let Some(stem) = name.strip_suffix(ext) {
            return (c, stem);
        }
    }
    (Compression::None, name)
}

/// The format a file name implies (`x.tsv.gz` is TSV); `.txt` needs a look at the content.
pub fn format_from_name(path: &Path) -> Option<Format> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    let (_, stem) = compression_from_name(&name);
    if stem.ends_with(".tsv") || stem.ends_with(".tab") {
        Some(Format::Tsv)
    } else if stem.ends_with(".nt") || stem.ends_with(".ntriples") {
        Some(Format::Ntriples)
    } else if stem.ends_with(".psv") || stem.ends_with(".pipe") {
        Some(Format::Pipe)
    } else {
        None
    }
}

/// `.txt` files are common for both TSV and pipe dumps: decide on the first non-empty line.
fn sniff_format(first_line: &[u8]) -> Option<Format> {
    if first_line.starts_with(b"<") || first_line.starts_with(b"_:") {
        Some(Format::Ntriples)
    } else if first_line.contains(&b'\t') {
        Some(Format::Tsv)
    } else if first_line.contains(&b'|') {
        Some(Format::Pipe)
    } else {
        None
    }
}

/// An opened input: decompressing reader, resolved format, and the size for progress.
pub struct OpenedInput {
    pub reader: Box<dyn Read + Send>,
    pub format: Format,
    pub compression: Compression,
    /// Bytes of the file on disk (compressed), when known.
    pub size: Option<u64>,
    /// Compressed bytes consumed so far, for progress.
    pub consumed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Bytes already read to sniff the format, to be parsed first.
    pub prefix: Vec<u8>,
}

struct CountingReader<R> {
    inner: R,
    consumed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

pub fn open_input(spec: &InputSpec) -> Result<OpenedInput, IngestError> {
    let display = spec.display();
    let consumed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (raw, size): (Box<dyn Read + Send>, Option<u64>) = if spec.is_stdin() {
        (Box::new(io::stdin()), None)
    } else {
        let f = File::open(&spec.path).map_err(|e| IngestError::Io { path: display.clone().into(), source: e })?;
        let size = f.metadata().ok().map(|m| m.len());
        (Box::new(f), size)
    };
    let mut raw = BufReader::with_capacity(1 << 16, CountingReader { inner: raw, consumed: consumed.clone() });
    let name = spec.path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    let compression = match spec.compression {
        Some(c) => c,
        None => match compression_from_name(&name).0 {
            Compression::None => sniff_compression(&mut raw).map_err(|e| IngestError::Io { path: display.clone().into(), source: e })?,
            c => c,
        },
    };
    let mut reader: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(raw)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| IngestError::Io { path: display.clone().into(), source: e })?),
    };
    let named = spec.format.or_else(|| format_from_name(&spec.path));
    let sniffable = {
        let (_, stem) = compression_from_name(&name);
        stem.ends_with(".txt") || stem.ends_with(".csv")
    };
    // Standard input is never sniffed: say so before waiting for it.
    if named.is_none() && (!sniffable || spec.is_stdin()) {
        return Err(IngestError::UnknownFormat { path: display.into() });
    }
    // A UTF-8 byte-order mark says nothing about the triples: drop it, whatever the format
    // or compression, so it never becomes part of the first name.
    let mut prefix = Vec::with_capacity(UTF8_BOM.len());
    while prefix.len() < UTF8_BOM.len() {
        let mut byte = [0u8; 1];
        match reader.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => prefix.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(decompress_error(&display, compression, 0, e)),
        }
    }
    if prefix == UTF8_BOM {
        prefix.clear();
    }
    let format = match named {
        Some(f) => f,
        None => {
            // Read up to the end of the first non-blank line to decide.
            let mut line_start = 0;
            let mut pos = 0;
            let first_line = loop {
                while pos < prefix.len() {
                    if prefix[pos] == b'\n' {
                        if prefix[line_start..pos].iter().any(|b| !b.is_ascii_whitespace()) {
                            break;
                        }
                        line_start = pos + 1;
                    }
                    pos += 1;
                }
                if pos < prefix.len() || prefix.len() > MAX_LINE_BYTES {
                    break line_start..pos;
                }
                let mut byte = [0u8; 1];
                match reader.read(&mut byte) {
                    Ok(0) => break line_start..pos,
                    Ok(_) => prefix.push(byte[0]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(decompress_error(&display, compression, 0, e)),
                }
            };
            match sniff_format(prefix[first_line].trim_ascii()) {
                Some(f) => f,
                None => return Err(IngestError::UnknownFormat { path: display.into() }),
            }
        }
    };
    Ok(OpenedInput { reader, format, compression, size, consumed, prefix })
}

fn sniff_compression<R: io::BufRead>(r: &mut R) -> io::Result<Compression> {
    let head = r.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(b"BZh") {
        Compression::Bzip2
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    })
}

pub fn decompress_error(file: &str, c: Compression, line: u64, e: io::Error) -> IngestError {
    if c == Compression::None {
        IngestError::Io { path: file.into(), source: e }
    } else {
        IngestError::Truncated { file: file.into(), codec: c.label(), line, source: e }
    }
}

/// A run of whole lines. `first_line` is 1-based.
pub struct Chunk {
    pub data: Vec<u8>,
    pub first_line: u64,
    /// Lines rejected by the reader itself (over the length limit), in line order, all
    /// before or between the lines of `data` by line number.
    pub errors: Vec<LineError>,
}

/// Cuts a byte stream into chunks of whole lines, and rejects lines over `MAX_LINE_BYTES`
/// without ever buffering them whole.
pub struct LineChunker {
    reader: Box<dyn Read + Send>,
    file: String,
    compression: Compression,
    pending: Vec<u8>,
    next_line: u64,
    done: bool,
}

impl LineChunker {
    pub fn new(input: OpenedInput, file: String) -> LineChunker {
        LineChunker { pending: input.prefix, reader: input.reader, file, compression: input.compression, next_line: 1, done: false }
    }

    /// The next chunk, `Ok(None)` at the end of the input.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, IngestError> {
        let mut errors = Vec::new();
        loop {
            if self.done {
                if self.pending.is_empty() && errors.is_empty() {
                    return Ok(None);
                }
                let data = std::mem::take(&mut self.pending);
                let chunk = Chunk { first_line: self.next_line, data, errors };
                self.next_line += chunk_lines(&chunk.data);
                return Ok(Some(chunk));
            }
            // Fill up to the chunk size.
            // Grow past what is pending so a line longer than a chunk is read to its end (or
            // past the line limit).
            let start = self.pending.len();
            let target = if start < CHUNK_BYTES { CHUNK_BYTES } else { start + CHUNK_BYTES };
            self.pending.resize(target, 0);
            let mut filled = start;
            while filled < self.pending.len() {
                match self.reader.read(&mut self.pending[filled..]) {
                    Ok(0) => {
                        self.done = true;
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let line = self.next_line + chunk_lines(&self.pending[..filled]);
                        return Err(decompress_error(&self.file, self.compression, line.saturating_sub(1), e));
                    }
                }
            }
            self.pending.truncate(filled);
            if self.done {
                continue;
            }
            match memchr::memrchr(b'\n', &self.pending) {
                Some(pos) => {
                    let rest = self.pending.split_off(pos + 1);
                    let data = std::mem::replace(&mut self.pending, rest);
                    let chunk = Chunk { first_line: self.next_line, data, errors };
                    self.next_line += chunk_lines(&chunk.data);
                    return Ok(Some(chunk));
                }
                None if self.pending.len() > MAX_LINE_BYTES => {
                    // One line longer than the limit: reject it and skip to its end without
                    // buffering it whole.
                    let snippet = self.pending[..80].to_vec();
                    let seen = self.pending.len() as u64;
                    self.pending.clear();
                    let skipped = self.skip_line()?;
                    errors.push(LineError {
                        line: self.next_line,
                        kind: LineErrorKind::LineTooLong,
                        detail: LineProblem::TooLong { bytes: seen + skipped, limit: MAX_LINE_BYTES },
                        text: snippet,
                    });
                    self.next_line += 1;
                    // Hand the error over right away so strict mode stops early.
                    return Ok(Some(Chunk { data: Vec::new(), first_line: self.next_line, errors }));
                }
                None => {}
            }
        }
    }

    /// Discards input up to and including the next newline; returns the bytes skipped.
    fn skip_line(&mut self) -> Result<u64, IngestError> {
        let mut buf = vec![0u8; 1 << 16];
        let mut skipped = 0u64;
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => {
                    self.done = true;
                    return Ok(skipped);
                }
                Ok(n) => {
                    if let Some(pos) = memchr::memchr(b'\n', &buf[..n]) {
                        skipped += pos as u64;
                        // Keep what follows the newline for the next chunk.
                        let rest = buf[pos + 1..n].to_vec();
                        self.pending = rest;
                        return Ok(skipped);
                    }
                    skipped += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(decompress_error(&self.file, self.compression, self.next_line, e)),
            }
        }
    }
}

fn chunk_lines(data: &[u8]) -> u64 {
    let n = memchr::memchr_iter(b'\n', data).count() as u64;
    if data.last().is_some_and(|&b| b != b'\n') {
        n + 1
    } else {
        n
    }
}

crate::limits::named_choices!(Format, "format", { Tsv => "tsv", Pipe => "pipe", Ntriples => "ntriples" });
crate::limits::named_choices!(Compression, "compression", { None => "none", Gzip => "gzip", Bzip2 => "bzip2", Zstd => "zstd" });
