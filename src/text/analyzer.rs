//! How text becomes words, one definition for the index, queries, matched facts and the
//! query producer's labels: runs of letters and digits (Unicode),
//! shorter than 40 bytes (longer runs are dropped), lower-cased, accents folded to ASCII
//! where a folding exists ("Beyoncé" -> "beyonce").

use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer, TokenStream};
use tantivy::Index;

/// The analyzer's name in the index's schema.
pub(crate) const NAME: &str = "trellis";

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default()).filter(RemoveLongFilter::limit(40)).filter(LowerCaser).filter(AsciiFoldingFilter).build()
}

/// Registers the analyzer with an index (the engine does not store analyzers).
pub(crate) fn register(index: &Index) {
    index.tokenizers().register(NAME, analyzer());
}

/// The words of `text`, in order, repeats kept.
pub fn words(text: &str) -> Vec<String> {
    let mut a = analyzer();
    let mut stream = a.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn words_are_lower_cased_folded_runs_of_letters_and_digits() {
        assert_eq!(words("Beyoncé's 2nd album -- \"B'Day\""), ["beyonce", "s", "2nd", "album", "b", "day"]);
        assert_eq!(words("  ...  "), Vec::<String>::new());
        let long = "x".repeat(41);
        assert_eq!(words(&format!("a {long} b")), ["a", "b"]);
        assert_eq!(words("Straße Ærø"), ["strasse", "aero"]);
    }
}
