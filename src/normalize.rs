//! Name normalization for lookup: Unicode NFKC, case folding, whitespace collapsed.
//!
//! Stored names keep their exact form; only the lookup index uses the normalized key, so
//! "Jordan  SPIETH" and "jordan spieth" find the same entity.

use unicode_normalization::UnicodeNormalization;

/// Normalizes a name for the lookup index. Control characters (NUL included) are dropped,
/// which keeps the 0x00 separator of the `names` key unambiguous.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_space = false;
    for c in name.nfkc() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if c.is_control() {
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        // Full case folding where it differs from lowercasing (ß -> ss, ς -> σ, ...).
        for f in caseless::default_case_fold_str(c.encode_utf8(&mut [0; 4])).chars() {
            out.push(f);
        }
    }
    out
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
    fn drops_control_characters() {
        assert_eq!(normalize_name("a\u{0}b\u{7}c"), "abc");
        assert_eq!(normalize_name(""), "");
        assert_eq!(normalize_name(" \t "), "");
    }
}
