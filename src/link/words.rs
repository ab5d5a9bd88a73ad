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

/// Splits a message into words.
pub fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut pos = 0;
    for raw in text.split(|c: char| c.is_whitespace()) {
        let raw_start = pos;
        pos += raw.len() + 1;
        let trimmed = raw.trim_matches(is_edge_punct);
        if trimmed.is_empty() {
            continue;
        }
        let lead = raw.find(trimmed).unwrap_or(0);
        let start = raw_start + lead;
        let end = start + trimmed.len();
        let lower = trimmed.to_lowercase();
        let possessive = lower.ends_with("'s") || lower.ends_with("’s");
        let punct_after = text[end..].chars().next().filter(|c| matches!(c, '.' | '?' | '!'));
        out.push(Word { text: trimmed, start, end, possessive, punct_after });
    }
    out
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
}
