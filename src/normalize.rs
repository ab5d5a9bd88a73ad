//! Name normalization for lookup: Unicode NFKC, case folding, whitespace collapsed.
//!
//! Stored names keep their exact form; only the lookup index uses the normalized key, so
//! "Jordan  SPIETH" and "jordan spieth" find the same entity.

use caseless::Caseless;
use unicode_normalization::UnicodeNormalization;

/// Normalizes a name for the lookup index. Control characters (NUL included) are dropped,
/// which keeps the 0x00 separator of the `names` key unambiguous.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    if name.is_ascii() {
        // ASCII is NFKC-stable and case-folds to its lowercase: skip the Unicode tables.
        push_collapsed(&mut out, name.bytes().map(|b| b.to_ascii_lowercase() as char));
    } else {
        push_collapsed(&mut out, name.nfkc().default_case_fold());
    }
    out
}

/// Appends `chars`, dropping control characters and collapsing white space runs to one
/// space (none at either end).
fn push_collapsed(out: &mut String, chars: impl Iterator<Item = char>) {
    let mut pending_space = false;
    for c in chars {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
        } else if !c.is_control() {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapses_whitespace_and_case() {
        assert_eq!(normalize_name("  Jordan \t SPIETH \n"), "jordan spieth");
    }

    #[test]
    fn nfkc_compatibility_forms() {
        // U+FB01 LATIN SMALL LIGATURE FI and full-width letters fold to plain ASCII.
        assert_eq!(normalize_name("\u{FB01}sh"), "fish");
        assert_eq!(normalize_name("ＡＢＣ"), "abc");
        // Composed and decomposed forms of é agree.
        assert_eq!(normalize_name("Beyonce\u{301}"), normalize_name("Beyonc\u{E9}"));
    }

    #[test]
    fn full_case_folding() {
        assert_eq!(normalize_name("Straße"), "strasse");
        assert_eq!(normalize_name("ΣΊΣΥΦΟΣ"), normalize_name("σίσυφος"));
    }

    #[test]
    fn ascii_fast_path_agrees_with_the_unicode_path() {
        // The same text with one non-ASCII character appended takes the Unicode path.
        for name in ["  Jordan \t SPIETH ", "A\u{7}B", "x  y\r\nZ", "\u{1}lead", "MiXeD 123 !?"] {
            let ascii = normalize_name(name);
            let unicode = normalize_name(&format!("{name}\u{e9}"));
            assert_eq!(unicode.strip_suffix('\u{e9}').unwrap().trim_end(), ascii, "{name:?}");
        }
    }

    #[test]
    fn drops_control_characters() {
        assert_eq!(normalize_name("a\u{0}b\u{7}c"), "abc");
        assert_eq!(normalize_name(""), "");
        assert_eq!(normalize_name(" \t "), "");
    }
}
