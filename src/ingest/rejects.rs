//! The rejects file of `--on-error skip`: a TSV file, a header row and then one row per
//! rejected line: file, line number, kind, detail, and the line itself. Text fields are
//! escaped (`escape_field`) so that every row is one line of exactly five fields, whatever
//! bytes the rejected line held.

use super::build::Loading;
use super::error::{IngestError, LineError};
use std::io::Write;

impl Loading<'_> {
    pub(super) fn reject(&mut self, file: &str, e: &LineError) -> Result<(), IngestError> {
        *self.report.rejected.entry(e.kind).or_default() += 1;
        if self.rejects.is_none() {
            let f = std::fs::File::create(&self.rejects_path).map_err(|err| IngestError::io(&self.rejects_path, err))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "file\tline\tkind\tdetail\ttext").map_err(|err| IngestError::io(&self.rejects_path, err))?;
            self.rejects = Some(w);
        }
        let mut row = Vec::with_capacity(e.text.len() + 64);
        escape_field(file.as_bytes(), &mut row);
        row.extend_from_slice(format!("\t{}\t{}\t", e.line, e.kind).as_bytes());
        escape_field(e.detail.to_string().as_bytes(), &mut row);
        row.push(b'\t');
        escape_field(&e.text, &mut row);
        row.push(b'\n');
        let w = self.rejects.as_mut().expect("opened above");
        w.write_all(&row).map_err(|err| IngestError::io(&self.rejects_path, err))
    }
}

/// Escapes `bytes` as one TSV field: `\` as `\\`; tab, line feed and carriage return as
/// `\t`, `\n`, `\r`; every other byte of a control character (Unicode Cc, U+0000-U+001F
/// and U+007F-U+009F) or of invalid UTF-8 as `\xHH` (lowercase hex). Everything else is
/// kept. The result is UTF-8 without tabs or line breaks, and unescaping gives back the
/// exact bytes.
pub(crate) fn escape_field(bytes: &[u8], out: &mut Vec<u8>) {
    let hex = |b: u8, out: &mut Vec<u8>| out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.extend_from_slice(b"\\\\"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                c if c.is_control() => {
                    for &b in c.encode_utf8(&mut [0; 4]).as_bytes() {
                        hex(b, out);
                    }
                }
                c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        for &b in chunk.invalid() {
            hex(b, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn escaped(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        escape_field(bytes, &mut out);
        String::from_utf8(out).expect("escaped fields are UTF-8")
    }

    /// The documented unescaping, written independently of `escape_field`.
    fn unescape(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = s.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            rest = tail;
            if b != b'\\' {
                out.push(b);
                continue;
            }
            let (&e, tail) = rest.split_first().expect("an escape has a letter");
            rest = tail;
            match e {
                b'\\' => out.push(b'\\'),
                b't' => out.push(b'\t'),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b'x' => {
                    out.push(u8::from_str_radix(std::str::from_utf8(&rest[..2]).unwrap(), 16).unwrap());
                    rest = &rest[2..];
                }
                _ => panic!("unknown escape"),
            }
        }
        out
    }

    #[test]
    fn examples() {
        assert_eq!(escaped(b"a\tb\\c\nd\re"), "a\\tb\\\\c\\nd\\re");
        assert_eq!(escaped(b"n\0l \x7f \xff"), "n\\x00l \\x7f \\xff");
        assert_eq!(escaped("\u{85} é ␀".as_bytes()), "\\xc2\\x85 é ␀");
    }

    proptest! {
        #[test]
        fn escaping_is_one_field_and_reversible(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let s = escaped(&bytes);
            prop_assert!(!s.contains(['\t', '\n', '\r']));
            prop_assert!(!s.chars().any(char::is_control));
            prop_assert_eq!(unescape(&s), bytes);
        }
    }
}
