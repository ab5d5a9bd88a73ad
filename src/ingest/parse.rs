//! Parsing chunks of lines into records, on the parser threads.
//!
//! A parsed chunk keeps its strings in one arena and refers to them by span, so parsing a
//! chunk allocates a handful of vectors, not a string per term.

use super::error::{LineError, LineErrorKind, LineProblem};
use super::input::{Chunk, Format, MAX_LINE_BYTES};
use crate::store::TermKind;
use oxrdf::{NamedOrBlankNode, Term};

/// A byte range of a chunk's arena.
#[derive(Clone, Copy, Debug, Default)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    pub fn get<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        &arena[self.start as usize..(self.start + self.len) as usize]
    }
}

/// An entity term: its identity key, kind, and for literals the display name.
#[derive(Clone, Copy, Debug)]
pub struct TermRef {
    pub key: Span,
    pub kind: TermKind,
    /// Display name when it differs from the key (literals: the lexical form).
    pub name: Option<Span>,
}

#[derive(Clone, Copy, Debug)]
pub enum Record {
    /// A fact, already turned around when its relation carried the reverse prefix.
    Fact { s: TermRef, r: Span, o: TermRef },
    /// A name for the entity or relation with this key (RDF label predicates).
    Label { subject: Span, text: Span },
    /// An extra name (`skos:altLabel`).
    Alias { subject: Span, text: Span },
}

pub struct ParsedChunk {
    pub arena: Vec<u8>,
    pub records: Vec<Record>,
    /// Rejected lines, in line order.
    pub errors: Vec<LineError>,
    pub lines: u64,
    /// Relations of RDF inputs are IRIs; of TSV and pipe inputs, plain names.
    pub relation_kind: TermKind,
}

/// What the parsers need to know besides the bytes.
#[derive(Clone, Debug)]
pub struct ParseConfig {
    pub format: Format,
    /// A relation starting with this is the reverse of the rest (`~r(a, b)` is `r(b, a)`).
    pub reverse_prefix: String,
    /// Keep labels in this language (and labels without a language).
    pub lang: String,
    /// Blank node keys start with this (`_:LOAD.INPUT/`, see `naming::blank_prefix`): a
    /// blank node label means one node within its file only.
    pub blank_prefix: String,
}

const RDFS_LABEL: &str = "http://www.w3.org/2000/01/rdf-schema#label";
const FREEBASE_NAME: &str = "http://rdf.freebase.com/ns/type.object.name";
const SCHEMA_NAME: &str = "http://schema.org/name";
const SCHEMA_NAME_HTTPS: &str = "https://schema.org/name";
const SKOS_ALT_LABEL: &str = "http://www.w3.org/2004/02/skos/core#altLabel";

pub fn parse_chunk(chunk: Chunk, cfg: &ParseConfig) -> ParsedChunk {
    let relation_kind = if cfg.format == Format::Ntriples { TermKind::Iri } else { TermKind::Name };
    let mut out = ParsedChunk { arena: Vec::new(), records: Vec::new(), errors: chunk.errors, lines: 0, relation_kind };
    match cfg.format {
        Format::Tsv => parse_delimited(chunk.data, chunk.first_line, b'\t', "tab", cfg, &mut out),
        Format::Pipe => parse_delimited(chunk.data, chunk.first_line, b'|', "|", cfg, &mut out),
        Format::Ntriples => parse_ntriples(&chunk.data, chunk.first_line, cfg, &mut out),
    }
    out.errors.sort_by_key(|e| e.line);
    out
}

/// Splits a chunk into lines (without the newline and a trailing CR), with line numbers.
fn lines(data: &[u8], first_line: u64) -> impl Iterator<Item = (u64, usize, &[u8])> {
    let mut start = 0;
    let mut line = first_line;
    std::iter::from_fn(move || {
        if start >= data.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |p| start + p);
        let mut text = &data[start..end];
        if text.last() == Some(&b'\r') {
            text = &text[..text.len() - 1];
        }
        let item = (line, start, text);
        start = end + 1;
        line += 1;
        Some(item)
    })
}

/// Checks common to every format; `Err` is the rejection.
fn check_line(line: u64, text: &[u8]) -> Result<&str, LineError> {
    if text.len() > MAX_LINE_BYTES {
        return Err(LineError {
            line,
            kind: LineErrorKind::LineTooLong,
            detail: LineProblem::TooLong { bytes: text.len() as u64, limit: MAX_LINE_BYTES },
            text: text[..80].to_vec(),
        });
    }
    std::str::from_utf8(text).map_err(|e| LineError {
        line,
        kind: LineErrorKind::InvalidUtf8,
        detail: LineProblem::InvalidUtf8 { byte: e.valid_up_to() + 1 },
        text: text.to_vec(),
    })
}

/// The first control character of `field` (Unicode category Cc: U+0000-U+001F and
/// U+007F-U+009F) and its byte offset. Such characters are never part of a name: a NUL
/// or a line break in a name breaks every tool that prints or exchanges names.
fn find_control(field: &[u8]) -> Option<(usize, char)> {
    // In UTF-8, a Cc character is a byte below 0x20, 0x7F, or 0xC2 then 0x80-0x9F: a
    // byte scan rules out almost every field without decoding it.
    if !field.iter().any(|&b| b < 0x20 || b == 0x7f || b == 0xc2) {
        return None;
    }
    String::from_utf8_lossy(field).char_indices().find(|(_, c)| c.is_control())
}

fn control_error(line: u64, which: &'static str, found: (Option<usize>, char), text: &[u8]) -> LineError {
    let (at, character) = found;
    let detail = LineProblem::ControlCharacter { field: which, character, at: at.map(|i| i + 1) };
    LineError { line, kind: LineErrorKind::ControlCharacter, detail, text: text.to_vec() }
}

fn parse_delimited(data: Vec<u8>, first_line: u64, sep: u8, sep_name: &'static str, cfg: &ParseConfig, out: &mut ParsedChunk) {
    for (line, offset, text) in lines(&data, first_line) {
        out.lines += 1;
        if text.is_empty() {
            continue;
        }
        if let Err(e) = check_line(line, text) {
            out.errors.push(e);
            continue;
        }
        let mut fields = [Span::default(); 3];
        let mut n = 0;
        let mut field_start = 0;
        for pos in memchr::memchr_iter(sep, text).chain(std::iter::once(text.len())) {
            if n < 3 {
                fields[n] = Span { start: (offset + field_start) as u32, len: (pos - field_start) as u32 };
            }
            n += 1;
            field_start = pos + 1;
        }
        if n != 3 {
            out.errors.push(LineError {
                line,
                kind: LineErrorKind::WrongColumnCount,
                detail: LineProblem::Columns { separator: sep_name, found: n },
                text: text.to_vec(),
            });
            continue;
        }
        let [mut s, mut r, mut o] = fields;
        let blank = |sp: Span| sp.get(&data).iter().all(u8::is_ascii_whitespace);
        if let Some((which, _)) = [("subject", s), ("relation", r), ("object", o)].into_iter().find(|&(_, sp)| blank(sp)) {
            out.errors.push(LineError { line, kind: LineErrorKind::EmptyName, detail: LineProblem::Empty { field: which }, text: text.to_vec() });
            continue;
        }
        let control = [("subject", s), ("relation", r), ("object", o)]
            .into_iter()
            .find_map(|(which, sp)| find_control(sp.get(&data)).map(|(i, c)| (which, sp.start as usize - offset + i, c)));
        if let Some((which, at, c)) = control {
            out.errors.push(control_error(line, which, (Some(at), c), text));
            continue;
        }
        let prefix = cfg.reverse_prefix.as_bytes();
        if !prefix.is_empty() && r.get(&data).starts_with(prefix) {
            if r.get(&data)[prefix.len()..].iter().all(u8::is_ascii_whitespace) {
                out.errors.push(LineError {
                    line,
                    kind: LineErrorKind::EmptyName,
                    detail: LineProblem::EmptyAfterReversePrefix { prefix: cfg.reverse_prefix.clone() },
                    text: text.to_vec(),
                });
                continue;
            }
            r = Span { start: r.start + prefix.len() as u32, len: r.len - prefix.len() as u32 };
            std::mem::swap(&mut s, &mut o);
        }
        let term = |key| TermRef { key, kind: TermKind::Name, name: None };
        out.records.push(Record::Fact { s: term(s), r, o: term(o) });
    }
    out.arena = data;
}

fn push(arena: &mut Vec<u8>, text: &str) -> Span {
    let start = arena.len() as u32;
    arena.extend_from_slice(text.as_bytes());
    Span { start, len: text.len() as u32 }
}

fn parse_ntriples(data: &[u8], first_line: u64, cfg: &ParseConfig, out: &mut ParsedChunk) {
    out.lines = lines(data, first_line).count() as u64;
    // Fast path: the whole chunk at once. Any error sends the chunk down the line-by-line
    // path, which pins every error to its line and keeps every good line.
    if std::str::from_utf8(data).is_ok() && data.len() <= u32::MAX as usize / 4 {
        let mut records = Vec::new();
        let mut arena = Vec::with_capacity(data.len());
        let mut ok = true;
        for t in oxttl::NTriplesParser::new().for_slice(data) {
            // A bad line sends the chunk down the line-by-line path below.
            if !t.is_ok_and(|t| add_triple(t, cfg, &mut arena, &mut records).is_ok()) {
                ok = false;
                break;
            }
        }
        if ok && lines(data, first_line).all(|(_, _, t)| t.len() <= MAX_LINE_BYTES) {
            out.records = records;
            out.arena = arena;
            return;
        }
    }
    for (line, _, text) in lines(data, first_line) {
        let text = match check_line(line, text) {
            Ok(t) => t,
            Err(e) => {
                out.errors.push(e);
                continue;
            }
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut parsed = oxttl::NTriplesParser::new().for_slice(text);
        match (parsed.next(), parsed.next()) {
            (Some(Ok(t)), None) => {
                if let Err((which, c)) = add_triple(t, cfg, &mut out.arena, &mut out.records) {
                    out.errors.push(control_error(line, which, (None, c), text.as_bytes()));
                }
            }
            (Some(Err(e)), _) => out.errors.push(LineError {
                line,
                kind: LineErrorKind::InvalidNtriples,
                detail: LineProblem::Ntriples(std::sync::Arc::new(e)),
                text: text.as_bytes().to_vec(),
            }),
            (Some(Ok(_)), Some(_)) => {
                out.errors.push(LineError { line, kind: LineErrorKind::InvalidNtriples, detail: LineProblem::MultipleTriples, text: text.as_bytes().to_vec() })
            }
            (None, _) => {}
        }
    }
}

fn label_kind(predicate: &str) -> Option<bool> {
    match predicate {
        RDFS_LABEL | FREEBASE_NAME | SCHEMA_NAME | SCHEMA_NAME_HTTPS => Some(false),
        SKOS_ALT_LABEL => Some(true),
        _ => None,
    }
}

fn lang_matches(lang: Option<&str>, wanted: &str) -> bool {
    match lang {
        None => true,
        Some(l) => {
            wanted.is_empty()
                || l.eq_ignore_ascii_case(wanted)
                || (l.len() > wanted.len() && l.as_bytes()[wanted.len()] == b'-' && l[..wanted.len()].eq_ignore_ascii_case(wanted))
        }
    }
}

/// The first control character among `parts` (name, text) and the part it is in.
fn control_in(parts: &[(&'static str, &str)]) -> Option<(&'static str, char)> {
    parts.iter().find_map(|&(which, text)| find_control(text.as_bytes()).map(|(_, c)| (which, c)))
}

/// Adds the records of one triple; `Err` names the term holding a control character
/// (escapes such as `\u0000` decode to one), and nothing is added then.
fn add_triple(t: oxrdf::Triple, cfg: &ParseConfig, arena: &mut Vec<u8>, records: &mut Vec<Record>) -> Result<(), (&'static str, char)> {
    let subject_text = match &t.subject {
        NamedOrBlankNode::NamedNode(n) => n.as_str(),
        NamedOrBlankNode::BlankNode(b) => b.as_str(),
    };
    let predicate = t.predicate.as_str();
    if let Some(is_alias) = label_kind(predicate) {
        if let Term::Literal(lit) = &t.object {
            if lang_matches(lit.language(), &cfg.lang) && !lit.value().trim().is_empty() {
                let which = if is_alias { "alias" } else { "label" };
                if let Some(found) = control_in(&[("subject", subject_text), (which, lit.value())]) {
                    return Err(found);
                }
                let subject = push_subject(&t.subject, cfg, arena);
                let text = push(arena, lit.value());
                records.push(if is_alias { Record::Alias { subject: subject.key, text } } else { Record::Label { subject: subject.key, text } });
            }
            return Ok(());
        }
    }
    let object_text = match &t.object {
        Term::NamedNode(n) => n.as_str(),
        Term::BlankNode(b) => b.as_str(),
        Term::Literal(l) => l.value(),
        #[allow(unreachable_patterns)]
        _ => return Ok(()),
    };
    if let Some(found) = control_in(&[("subject", subject_text), ("relation", predicate), ("object", object_text)]) {
        return Err(found);
    }
    let subject = push_subject(&t.subject, cfg, arena);
    let object = match &t.object {
        Term::NamedNode(n) => TermRef { key: push(arena, n.as_str()), kind: TermKind::Iri, name: None },
        Term::BlankNode(b) => TermRef { key: push_blank(arena, cfg, b.as_str()), kind: TermKind::Blank, name: None },
        Term::Literal(l) => {
            let key = push(arena, &l.to_string());
            let name = push(arena, l.value());
            TermRef { key, kind: TermKind::Literal, name: Some(name) }
        }
        #[allow(unreachable_patterns)]
        _ => return Ok(()),
    };
    let r = push(arena, predicate);
    records.push(Record::Fact { s: subject, r, o: object });
    Ok(())
}

fn push_subject(subject: &NamedOrBlankNode, cfg: &ParseConfig, arena: &mut Vec<u8>) -> TermRef {
    match subject {
        NamedOrBlankNode::NamedNode(n) => TermRef { key: push(arena, n.as_str()), kind: TermKind::Iri, name: None },
        NamedOrBlankNode::BlankNode(b) => TermRef { key: push_blank(arena, cfg, b.as_str()), kind: TermKind::Blank, name: None },
    }
}

/// A blank node's key: its label within the file's scope.
fn push_blank(arena: &mut Vec<u8>, cfg: &ParseConfig, label: &str) -> Span {
    let start = arena.len() as u32;
    arena.extend_from_slice(cfg.blank_prefix.as_bytes());
    arena.extend_from_slice(label.as_bytes());
    Span { start, len: arena.len() as u32 - start }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(format: Format) -> ParseConfig {
        ParseConfig { format, reverse_prefix: "~".into(), lang: "en".into(), blank_prefix: "_:1.1/".into() }
    }

    fn parse(format: Format, text: &str) -> ParsedChunk {
        parse_chunk(Chunk { data: text.as_bytes().to_vec(), first_line: 10, errors: vec![] }, &cfg(format))
    }

    fn facts(p: &ParsedChunk) -> Vec<(String, String, String)> {
        let s = |sp: Span| String::from_utf8(sp.get(&p.arena).to_vec()).unwrap();
        p.records
            .iter()
            .filter_map(|r| match r {
                Record::Fact { s: a, r, o } => Some((s(a.key), s(*r), s(o.key))),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn tsv_reverse_relations_are_turned_around() {
        let p = parse(Format::Tsv, "Jordan Spieth\tSport played\tGolf\nGolf\t~Sport played\tTiger Woods\r\n");
        assert_eq!(
            facts(&p),
            vec![("Jordan Spieth".into(), "Sport played".into(), "Golf".into()), ("Tiger Woods".into(), "Sport played".into(), "Golf".into()),]
        );
        assert_eq!(p.lines, 2);
    }

    #[test]
    fn tsv_errors_carry_line_numbers() {
        let p = parse(Format::Tsv, "a\tb\tc\na\tb\n\tb\tc\na\t~ \tc\n\na\tb\tc\td\n");
        let got: Vec<(u64, LineErrorKind)> = p.errors.iter().map(|e| (e.line, e.kind)).collect();
        assert_eq!(
            got,
            vec![(11, LineErrorKind::WrongColumnCount), (12, LineErrorKind::EmptyName), (13, LineErrorKind::EmptyName), (15, LineErrorKind::WrongColumnCount),]
        );
        assert_eq!(facts(&p).len(), 1);
    }

    #[test]
    fn invalid_utf8_is_rejected_per_line() {
        let mut data = b"a\tb\tc\n".to_vec();
        data.extend_from_slice(b"x\xff\tb\tc\n");
        let p = parse_chunk(Chunk { data, first_line: 1, errors: vec![] }, &cfg(Format::Tsv));
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].line, 2);
        assert_eq!(p.errors[0].kind, LineErrorKind::InvalidUtf8);
        assert_eq!(p.errors[0].detail.to_string(), "invalid UTF-8 at byte 2 of the line");
        assert!(matches!(p.errors[0].detail, LineProblem::InvalidUtf8 { byte: 2 }));
    }

    #[test]
    fn pipe_format() {
        let p = parse(Format::Pipe, "Kismet|directed_by|William Dieterle\n");
        assert_eq!(facts(&p), vec![("Kismet".into(), "directed_by".into(), "William Dieterle".into())]);
    }

    #[test]
    fn ntriples_labels_literals_and_errors() {
        let text = "<http://x/m.1> <http://x/born> \"1961\"^^<http://www.w3.org/2001/XMLSchema#gYear> .\n\
                    <http://x/m.1> <http://www.w3.org/2000/01/rdf-schema#label> \"Ann\"@en .\n\
                    <http://x/m.1> <http://www.w3.org/2000/01/rdf-schema#label> \"Anne\"@fr .\n\
                    <http://x/m.1> <http://www.w3.org/2004/02/skos/core#altLabel> \"Annie\"@en-GB .\n\
                    <http://x/m.1> <http://x/knows> .\n\
                    # a comment\n";
        let p = parse(Format::Ntriples, text);
        let f = facts(&p);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].2, "\"1961\"^^<http://www.w3.org/2001/XMLSchema#gYear>");
        let labels: Vec<String> = p
            .records
            .iter()
            .filter_map(|r| match r {
                Record::Label { text, .. } => Some(format!("label {}", String::from_utf8_lossy(text.get(&p.arena)))),
                Record::Alias { text, .. } => Some(format!("alias {}", String::from_utf8_lossy(text.get(&p.arena)))),
                _ => None,
            })
            .collect();
        assert_eq!(labels, vec!["label Ann", "alias Annie"]);
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].line, 14);
        assert_eq!(p.errors[0].kind, LineErrorKind::InvalidNtriples);
    }
}

#[cfg(test)]
mod fuzz {
    //! Random bytes through every parser: no panic, and every line is either parsed,
    //! rejected with a line number inside the chunk, or blank.
    use super::*;
    use proptest::prelude::*;

    fn lines_in(data: &[u8]) -> u64 {
        lines(data, 1).count() as u64
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn parsers_never_panic(data in proptest::collection::vec(
            prop_oneof![Just(b'\t'), Just(b'|'), Just(b'\n'), Just(b'<'), Just(b'>'), Just(b'"'), Just(b'.'), Just(b' '), Just(b'~'), any::<u8>()],
            0..400,
        )) {
            for format in [Format::Tsv, Format::Pipe, Format::Ntriples] {
                let cfg = ParseConfig { format, reverse_prefix: "~".into(), lang: "en".into(), blank_prefix: "_:1.1/".into() };
                let p = parse_chunk(Chunk { data: data.clone(), first_line: 1, errors: vec![] }, &cfg);
                let n = lines_in(&data);
                prop_assert_eq!(p.lines, n);
                prop_assert!(p.errors.iter().all(|e| e.line >= 1 && e.line <= n));
                prop_assert!(p.errors.windows(2).all(|w| w[0].line < w[1].line));
                prop_assert!(p.records.len() as u64 + p.errors.len() as u64 <= n.max(1) * 2);
            }
        }

        #[test]
        fn well_formed_tsv_lines_all_parse(rows in proptest::collection::vec(("[^~\\p{Cc}]{1,12}", "[^\\p{Cc}]{1,12}", "[^\\p{Cc}]{1,12}"), 1..40)) {
            let rows: Vec<_> = rows.into_iter().filter(|(s, r, o)| {
                let blank = |x: &str| x.bytes().all(|b| b.is_ascii_whitespace());
                !blank(s) && !blank(r) && !blank(o) && !blank(r.strip_prefix('~').unwrap_or(r))
            }).collect();
            let text: String = rows.iter().map(|(s, r, o)| format!("{s}\t{r}\t{o}\n")).collect();
            let cfg = ParseConfig { format: Format::Tsv, reverse_prefix: "~".into(), lang: "en".into(), blank_prefix: "_:1.1/".into() };
            let p = parse_chunk(Chunk { data: text.into_bytes(), first_line: 1, errors: vec![] }, &cfg);
            prop_assert!(p.errors.is_empty(), "{:?}", p.errors);
            prop_assert_eq!(p.records.len(), rows.len());
        }

        /// A line is refused for a control character exactly when one of its fields holds
        /// one (checked here with `char::is_control`, the Cc category), at the byte where
        /// the first one is.
        #[test]
        fn control_characters_are_refused_where_they_are(
            fields in proptest::collection::vec(prop_oneof!["[a-zé ]{1,6}", "[a-zé|\\t\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]{1,6}"], 3),
            format in prop_oneof![Just(Format::Tsv), Just(Format::Pipe)],
        ) {
            let sep = if format == Format::Tsv { "\t" } else { "|" };
            prop_assume!(fields.iter().all(|f| !f.contains(sep) && !f.trim_ascii().is_empty()));
            prop_assume!(!fields[1].starts_with('~'));
            let line = fields.join(sep);
            let cfg = ParseConfig { format, reverse_prefix: "~".into(), lang: "en".into(), blank_prefix: "_:1.1/".into() };
            let p = parse_chunk(Chunk { data: format!("{line}\n").into_bytes(), first_line: 1, errors: vec![] }, &cfg);
            // The first control character of the line; separators are no part of a field.
            let first = line.char_indices().find(|&(_, c)| c.is_control() && c.to_string() != sep);
            match first {
                None => {
                    prop_assert!(p.errors.is_empty(), "{:?}", p.errors);
                    prop_assert_eq!(p.records.len(), 1);
                }
                Some((at, c)) => {
                    prop_assert_eq!(p.records.len(), 0);
                    prop_assert_eq!(p.errors.len(), 1);
                    prop_assert_eq!(p.errors[0].kind, LineErrorKind::ControlCharacter);
                    let expected = format!("contains U+{:04X} at byte {} of the line", c as u32, at + 1);
                    prop_assert!(p.errors[0].detail.to_string().ends_with(&expected), "{} / {}", p.errors[0].detail, expected);
                }
            }
        }
    }
}
