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

/// The accent- and punctuation-free form of a normalized name, for people who type
/// "Alexis Sanchez" or "Whats Up Doc": combining marks removed after canonical
/// decomposition, apostrophes and periods removed ("j.k." -> "jk"), `&` written "and", every
/// other character that is neither a letter, a digit nor a space made a space, spaces
/// collapsed. `None` when that changes nothing or leaves nothing.
pub fn fold_name(normalized: &str) -> Option<String> {
    use unicode_normalization::char::is_combining_mark;
    let mut spaced = String::with_capacity(normalized.len());
    for c in normalized.nfd().filter(|c| !is_combining_mark(*c)) {
        match c {
            '\'' | '.' | '\u{2019}' => {}
            '&' => spaced.push_str(" and "),
            c if c.is_alphanumeric() || c.is_whitespace() => spaced.push(c),
            _ => spaced.push(' '),
        }
    }
    let mut out = String::with_capacity(spaced.len());
    push_collapsed(&mut out, spaced.nfc());
    (!out.is_empty() && out != normalized).then_some(out)
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
    fn folding_drops_accents_and_punctuation() {
        let f = |s: &str| fold_name(&normalize_name(s));
        assert_eq!(f("Alexis Sánchez").as_deref(), Some("alexis sanchez"));
        assert_eq!(f("Thérèse Raquin").as_deref(), Some("therese raquin"));
        assert_eq!(f("Celâl Üster").as_deref(), Some("celal uster"));
        assert_eq!(f("What's Up, Doc?").as_deref(), Some("whats up doc"));
        assert_eq!(f("The Good, the Bad and the Ugly").as_deref(), Some("the good the bad and the ugly"));
        assert_eq!(f("Mr. & Mrs. Smith").as_deref(), Some("mr and mrs smith"));
        assert_eq!(f("J.K. Rowling").as_deref(), Some("jk rowling"));
        assert_eq!(f("Spider-Man").as_deref(), Some("spider man"));
        // Already folded, or nothing left: no folded form.
        assert_eq!(f("jordan spieth"), None);
        assert_eq!(f("?!"), None);
        // Folding is idempotent.
        assert_eq!(fold_name("whats up doc"), None);
    }

    #[test]
    fn drops_control_characters() {
        assert_eq!(normalize_name("a\u{0}b\u{7}c"), "abc");
        assert_eq!(normalize_name(""), "");
        assert_eq!(normalize_name(" \t "), "");
    }
}
