//! Words of a dialog message, with their character spans, and the candidate strings that
//! spans of words are looked up as.

/// One word: a run of non-space characters without its surrounding punctuation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word<'a> {
    /// The word as written, without leading/trailing punctuation (inner punctuation kept:
    /// "Spider-Man", "J.K.", "Ocean's").
    pub text: &'a str,
    /// Byte offsets of `text` in the message.
    pub start: usize,
    /// End of the byte span (exclusive).
    pub end: usize,
    /// The word ends in a possessive `'s` (or `’s`), which a lookup may drop.
    pub possessive: bool,
    /// The punctuation right after `text`, when it is `.`, `?` or `!`: titles and
    /// abbreviations end in it ("Jr.", "Can You Keep a Secret?").
    pub punct_after: Option<char>,
}

fn is_edge_punct(c: char) -> bool {
    !c.is_alphanumeric() && c != '&' && c != '+' && c != '#' && c != '$'
}

/// Splits a message into words. Separators are any Unicode whitespace, whatever its
/// width in bytes (a no-break space is two, an ideographic space three): spans are taken
/// from the character offsets, never counted.
pub fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut run_start = None;
    // A sentinel space closes the last run.
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_whitespace(), run_start) {
            (false, None) => run_start = Some(i),
            (true, Some(start)) => {
                run_start = None;
                if let Some(w) = word(text, start, i) {
                    out.push(w);
                }
            }
            _ => {}
        }
    }
    out
}

/// The word in the run of non-space characters `text[start..end]`, if any is left after
/// trimming its edge punctuation.
fn word(text: &str, start: usize, end: usize) -> Option<Word<'_>> {
    let raw = &text[start..end];
    let trimmed = raw.trim_matches(is_edge_punct);
    if trimmed.is_empty() {
        return None;
    }
    let start = start + (raw.len() - raw.trim_start_matches(is_edge_punct).len());
    let end = start + trimmed.len();
    let lower = trimmed.to_lowercase();
    let possessive = lower.ends_with("'s") || lower.ends_with("’s");
    let punct_after = text[end..].chars().next().filter(|c| matches!(c, '.' | '?' | '!'));
    Some(Word { text: trimmed, start, end, possessive, punct_after })
}

/// Straight quotes for curly ones, so "Ocean’s Eleven" finds "Ocean's Eleven".
pub fn straighten_quotes(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{02BC}' => '\'',
            '\u{201C}' | '\u{201D}' => '"',
            _ => c,
        })
        .collect()
}

/// The text of the words `ws` (consecutive in `text`) as written, quotes straightened: the
/// form whose normalization walks the name index as a trie.
pub fn span_text(text: &str, ws: &[Word<'_>]) -> String {
    straighten_quotes(&text[ws[0].start..ws[ws.len() - 1].end])
}

/// The candidate strings for the words `ws`: the span as written, with its closing `.`,
/// `?` or `!`, without a final possessive, in the singular, with or without a leading
/// "the". Most specific first.
pub fn candidates(text: &str, ws: &[Word<'_>]) -> Vec<String> {
    let last = &ws[ws.len() - 1];
    let span = span_text(text, ws);
    let mut out = vec![span.clone()];
    if let Some(p) = last.punct_after {
        out.push(format!("{span}{p}"));
    }
    if last.possessive {
        let cut = span.len() - 2;
        if span.is_char_boundary(cut) {
            out.push(span[..cut].to_owned());
        }
    } else if last.text.len() > 3 && last.text.ends_with('s') && !last.text.ends_with("ss") {
        // "comedy-dramas", "picture books": the singular.
        out.push(span[..span.len() - 1].to_owned());
    }
    let lower = span.to_lowercase();
    if let Some(rest) = lower.strip_prefix("the ") {
        out.push(rest.to_owned());
    } else {
        for c in out.clone() {
            out.push(format!("the {c}"));
        }
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_spans_and_inner_punctuation() {
        let text = "Do you know \"Spider-Man\", Jordan Spieth's caddie?";
        let ws = words(text);
        let got: Vec<&str> = ws.iter().map(|w| w.text).collect();
        assert_eq!(got, vec!["Do", "you", "know", "Spider-Man", "Jordan", "Spieth's", "caddie"]);
        for w in &ws {
            assert_eq!(&text[w.start..w.end], w.text);
        }
        assert!(ws[5].possessive);
        assert!(!ws[4].possessive);
    }

    #[test]
    fn candidates_cover_possessives_articles_and_dots() {
        let text = "I loved Ocean’s Eleven's cast and Martin Luther King Jr. too";
        let ws = words(text);
        let oceans = candidates(text, &ws[2..4]);
        assert!(oceans.contains(&"Ocean's Eleven".to_string()), "{oceans:?}");
        assert!(oceans.contains(&"the Ocean's Eleven".to_string()));
        let king = candidates(text, &ws[6..10]);
        assert!(king.contains(&"Martin Luther King Jr.".to_string()), "{king:?}");
        let the = candidates("The Dark Knight", &words("The Dark Knight"));
        assert_eq!(the, vec!["The Dark Knight".to_string(), "dark knight".to_string()]);
        let q = "Did you read Can You Keep a Secret? It";
        let secret = candidates(q, &words(q)[3..8]);
        assert!(secret.contains(&"Can You Keep a Secret?".to_string()), "{secret:?}");
        let plural = candidates("I like comedy-dramas", &words("I like comedy-dramas")[2..]);
        assert!(plural.contains(&"comedy-drama".to_string()), "{plural:?}");
    }

    #[test]
    fn multi_byte_whitespace_separates_words() {
        // No-break space (2 bytes), thin space (3), ideographic space (3), line separator.
        let text = "Jordan\u{a0}Spieth\u{2009}and\u{3000}\u{2028}Golf?";
        let ws = words(text);
        let got: Vec<&str> = ws.iter().map(|w| w.text).collect();
        assert_eq!(got, vec!["Jordan", "Spieth", "and", "Golf"]);
        for w in &ws {
            assert_eq!(&text[w.start..w.end], w.text);
        }
        assert_eq!(ws[3].punct_after, Some('?'));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Any text splits into words whose spans are their text, in order, and every span of
        /// words gives candidates (no slicing inside a character).
        #[test]
        fn any_text_splits_without_panics(text in "(\\PC|\\s|[\u{a0}\u{2000}-\u{200b}\u{3000}\u{2028}\u{feff}'’s.?!-]){0,40}") {
            let ws = words(&text);
            let mut last_end = 0;
            for w in &ws {
                proptest::prop_assert_eq!(&text[w.start..w.end], w.text);
                proptest::prop_assert!(w.start >= last_end && w.start < w.end);
                last_end = w.end;
            }
            for i in 0..ws.len() {
                for j in i + 1..=ws.len().min(i + 4) {
                    let _ = candidates(&text, &ws[i..j]);
                }
            }
        }
    }
}
