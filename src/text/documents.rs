//! A documents input for the text index: a JSON-lines file of `{"title": ..., "text": ...}`
//! (an article dump, Wikipedia summaries), each document's text added to the entity document
//! of the entity its title names, so that search, the query producer and its labels read
//! it. This is the query producer's own setting (a search engine over articles); the
//! entities come from the graph (Wikidata labels are article titles).
//!
//! A title names an entity when it is the entity's identity key, else when it normalizes
//! like an entity's primary name (the lowest id when several do; aliases do not attach a
//! text). Memory is bounded: the file is read twice, the first pass keeping only each
//! matched document's byte offset.

use crate::ids::EntityId;
use crate::store::{NameTarget, Store};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

/// The longest text kept of a document, in bytes (cut at a word boundary before it): a
/// summary's worth; an article's tail would drown its title in the ranking.
pub const MAX_DOCUMENT_TEXT: usize = 4096;

/// The longest line read, in bytes (a line past it is a bad line, not an allocation).
pub const MAX_DOCUMENT_LINE: usize = 1 << 20;

/// What to do with a document whose title names no entity (or an entity already given one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unmatched {
    /// Stop at the first such line; the store is unchanged.
    #[default]
    Stop,
    /// Skip it and count it.
    Skip,
}

/// A documents input: the file and what to do with documents that attach to no entity.
#[derive(Clone, Debug)]
pub struct DocumentsInput {
    /// The JSON-lines file.
    pub path: PathBuf,
    /// Unmatched titles: stop or skip.
    pub unmatched: Unmatched,
}

/// A bad line of a documents file.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {problem}")]
pub struct DocumentLineError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub problem: DocumentProblem,
}

/// What is wrong with a line of a documents file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentProblem {
    /// Not a `{"title": string, "text": string}` object.
    #[error("not a document (a JSON object with string fields \"title\" and \"text\"): {0}")]
    NotADocument(serde_json::Error),
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 {
        /// 0-based offset of the first invalid byte.
        byte: usize,
    },
    /// Longer than [`MAX_DOCUMENT_LINE`].
    #[error("the line is longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// The title names no entity of the store.
    #[error("the title {title:?} names no entity of the store (use --on-error skip to leave such documents out)")]
    NoEntity {
        /// The title.
        title: String,
    },
    /// The file changed while the index was being built (a line read in the first pass
    /// is gone).
    #[error("the file changed while it was being indexed")]
    Changed,
    /// An earlier line gave this entity its document.
    #[error("the title {title:?} names entity {entity}, which line {first} already gave a document")]
    Duplicate {
        /// The title.
        title: String,
        /// The entity.
        entity: u32,
        /// The earlier line.
        first: u64,
    },
}

#[derive(serde::Deserialize)]
struct Line {
    title: String,
    text: String,
}

/// The matched documents of a file: where each entity's document starts.
pub(crate) struct DocumentOffsets {
    path: PathBuf,
    offsets: HashMap<u32, (u64, u64)>,
    /// Documents read, and those skipped (their titles name no entity, or an entity
    /// already given one).
    pub read: u64,
    /// Skipped documents.
    pub skipped: u64,
}

/// Reads one line of at most [`MAX_DOCUMENT_LINE`] bytes into `buf` (without its newline);
/// `Ok(None)` at the end. An over-long line is consumed and reported.
fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<Result<(), DocumentProblem>>> {
    buf.clear();
    let n = reader.by_ref().take(MAX_DOCUMENT_LINE as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Some(Ok(())));
    }
    if buf.len() > MAX_DOCUMENT_LINE {
        // Skip the rest of the line.
        let mut rest = Vec::new();
        reader.read_until(b'\n', &mut rest)?;
        return Ok(Some(Err(DocumentProblem::TooLong { max: MAX_DOCUMENT_LINE })));
    }
    Ok(Some(Ok(())))
}

fn parse(buf: &[u8]) -> Result<(String, String), DocumentProblem> {
    let text = std::str::from_utf8(buf).map_err(|e| DocumentProblem::InvalidUtf8 { byte: e.valid_up_to() })?;
    let line: Line = serde_json::from_str(text).map_err(DocumentProblem::NotADocument)?;
    Ok((line.title, line.text))
}

/// The entity a title names (see the module): the one a documents input gives the text,
/// and a Wizard of Wikipedia turn's gold document.
pub fn entity_of(store: &Store, title: &str) -> Result<Option<EntityId>, crate::store::error::ReadError> {
    if let Some(e) = store.entity_by_key(title)? {
        return Ok(Some(e));
    }
    Ok(store.lookup_name(title)?.into_iter().find_map(|(t, alias)| match t {
        NameTarget::Entity(e) if !alias => Some(e),
        _ => None,
    }))
}

/// First pass: which entity each document attaches to. Blank lines are skipped.
pub(crate) fn match_documents(store: &Store, input: &DocumentsInput) -> Result<DocumentOffsets, super::TextError> {
    let path = &input.path;
    let io = |e| super::TextError::DocumentsIo { path: path.clone(), source: e };
    let mut reader = BufReader::new(std::fs::File::open(path).map_err(io)?);
    let bad = |line: u64, problem| super::TextError::Documents(DocumentLineError { path: path.clone(), line, problem });
    let mut out = DocumentOffsets { path: path.clone(), offsets: HashMap::new(), read: 0, skipped: 0 };
    let mut buf = Vec::new();
    let (mut offset, mut line) = (0u64, 0u64);
    while let Some(status) = read_line(&mut reader, &mut buf).map_err(io)? {
        line += 1;
        let start = offset;
        offset = reader.stream_position().map_err(io)?;
        status.map_err(|p| bad(line, p))?;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (title, _) = parse(&buf).map_err(|p| bad(line, p))?;
        out.read += 1;
        let problem = match entity_of(store, &title)? {
            None => DocumentProblem::NoEntity { title },
            Some(e) => match out.offsets.get(&e.0) {
                Some(&(_, first)) => DocumentProblem::Duplicate { title, entity: e.0, first },
                None => {
                    out.offsets.insert(e.0, (start, line));
                    continue;
                }
            },
        };
        match input.unmatched {
            Unmatched::Stop => return Err(bad(line, problem)),
            Unmatched::Skip => out.skipped += 1,
        }
    }
    Ok(out)
}

impl DocumentOffsets {
    /// Opens the file again for [`DocumentTexts::text`].
    pub(crate) fn texts(&self) -> Result<DocumentTexts<'_>, super::TextError> {
        let file = std::fs::File::open(&self.path).map_err(|e| super::TextError::DocumentsIo { path: self.path.clone(), source: e })?;
        Ok(DocumentTexts { offsets: self, reader: BufReader::new(file), buf: Vec::new() })
    }
}

/// Second pass: each entity's text, read where the first pass found it.
pub(crate) struct DocumentTexts<'a> {
    offsets: &'a DocumentOffsets,
    reader: BufReader<std::fs::File>,
    buf: Vec<u8>,
}

impl DocumentTexts<'_> {
    /// The text attached to entity `e` (cut to [`MAX_DOCUMENT_TEXT`]), or empty.
    pub(crate) fn text(&mut self, e: u32) -> Result<String, super::TextError> {
        let Some(&(offset, line)) = self.offsets.offsets.get(&e) else { return Ok(String::new()) };
        let path = &self.offsets.path;
        let io = |e| super::TextError::DocumentsIo { path: path.clone(), source: e };
        self.reader.seek(SeekFrom::Start(offset)).map_err(io)?;
        // The file changed between the passes if this line no longer reads.
        let bad = |problem| super::TextError::Documents(DocumentLineError { path: path.clone(), line, problem });
        match read_line(&mut self.reader, &mut self.buf).map_err(io)? {
            Some(Ok(())) => {}
            Some(Err(p)) => return Err(bad(p)),
            None => return Err(bad(DocumentProblem::Changed)),
        }
        let (_, text) = parse(&self.buf).map_err(bad)?;
        Ok(cut(text.trim(), MAX_DOCUMENT_TEXT))
    }
}

/// `text` cut to at most `max` bytes, at the last whitespace before the limit when there is
/// one (else at a character boundary).
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    if text[end..].starts_with(char::is_whitespace) {
        return head.trim_end().to_owned();
    }
    match head.rfind(char::is_whitespace) {
        Some(space) if space > 0 => head[..space].trim_end().to_owned(),
        _ => head.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_stops_at_a_word_boundary_and_a_char_boundary() {
        assert_eq!(cut("alpha beta gamma", 100), "alpha beta gamma");
        assert_eq!(cut("alpha beta gamma", 12), "alpha beta");
        assert_eq!(cut("alpha beta gamma", 10), "alpha beta");
        assert_eq!(cut("ééééé", 3), "é");
        assert_eq!(cut("abcdef", 3), "abc");
    }

    #[test]
    fn an_over_long_line_is_reported_and_the_next_one_reads() {
        let mut data = vec![b'x'; MAX_DOCUMENT_LINE + 10];
        data.extend_from_slice(b"\n{\"title\":\"a\",\"text\":\"b\"}\n");
        let mut reader = BufReader::new(&data[..]);
        let mut buf = Vec::new();
        assert!(matches!(read_line(&mut reader, &mut buf).unwrap(), Some(Err(DocumentProblem::TooLong { .. }))));
        assert!(matches!(read_line(&mut reader, &mut buf).unwrap(), Some(Ok(()))));
        assert_eq!(parse(&buf).unwrap(), ("a".to_owned(), "b".to_owned()));
        assert!(read_line(&mut reader, &mut buf).unwrap().is_none());
    }
}
