//! The English function words (articles, pronouns, prepositions, auxiliaries,
//! conjunctions) a relation phrase is read without. One list, read by the checker and by the
//! lexicon's learner (`tools/train/check_lexicon.py`), so a cue the learner keeps is a word the
//! checker looks at. Unlike the linker's stop words, verbs that carry a relation ("wrote",
//! "starred") are not here.

/// Function words, lower case, sorted (binary-searched).
pub const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being", "both", "but", "by", "can", "could",
    "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "it's",
    "its", "just", "may", "me", "might", "more", "most", "my", "no", "not", "of", "on", "one", "or", "other", "our", "out", "she", "should", "so", "some",
    "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "whose", "why", "will", "with", "would", "you", "your",
];

/// Whether `word` (lower case) is a function word.
pub fn is_function_word(word: &str) -> bool {
    FUNCTION_WORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_sorted_lower_case_and_unique() {
        assert!(FUNCTION_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(FUNCTION_WORDS.iter().all(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '\'')));
        assert!(is_function_word("the") && is_function_word("it's") && !is_function_word("wrote"));
    }
}
