//! Words that are names of some entity in every large KG ("Yes" the band, "Love" the
//! film, "It" the novel) but in dialog are almost always just words. A mention made only of
//! these words is not linked.

pub const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "actually", "after", "again", "against", "ago", "ah", "all", "almost", "also",
    "always", "am", "amazing", "an", "and", "another", "any", "anyone", "anything", "are", "around", "as",
    "at", "author", "away", "awesome", "back", "bad", "be", "beautiful", "because", "been", "before", "being",
    "best", "better", "between", "big", "book", "books", "both", "but", "by", "can", "cast", "character",
    "come", "cool", "could", "day", "did", "do", "does", "doing", "done", "down", "during", "each", "else",
    "enjoy", "enjoyed", "even", "ever", "every", "fan", "favorite", "favourite", "few", "film", "films",
    "find", "first", "for", "from", "fun", "funny", "game", "games", "genre", "get", "give", "go", "going",
    "good", "got", "great", "had", "has", "have", "having", "he", "hello", "help", "her", "here", "hers",
    "herself", "hey", "hi", "him", "himself", "his", "how", "i", "if", "in", "interesting", "into", "is",
    "it", "its", "itself", "just", "kind", "know", "last", "like", "liked", "little", "lot", "love", "loved",
    "made", "make", "many", "may", "maybe", "me", "might", "more", "most", "movie", "movies", "much", "music",
    "must", "my", "myself", "never", "new", "nice", "no", "nor", "not", "nothing", "now", "of", "off", "oh",
    "ok", "okay", "old", "on", "once", "one", "only", "or", "other", "our", "ours", "out", "over", "own",
    "people", "play", "played", "please", "pretty", "read", "really", "recommend", "right", "same", "saw",
    "say", "see", "seen", "she", "should", "show", "so", "some", "something", "song", "songs", "sound",
    "sounds", "still", "story", "such", "sure", "team", "than", "thank", "thanks", "that", "the", "their",
    "theirs", "them", "themselves", "then", "there", "these", "they", "thing", "things", "think", "this",
    "those", "though", "through", "time", "to", "too", "try", "two", "under", "until", "up", "us", "very",
    "want", "was", "watch", "watched", "way", "we", "well", "were", "what", "when", "where", "which", "while",
    "who", "whom", "why", "will", "with", "wonderful", "would", "wow", "written", "wrote", "yeah", "year",
    "years", "yes", "yet", "you", "your", "yours", "yourself",
];

pub fn is_stop_word(normalized: &str) -> bool {
    STOP_WORDS.binary_search(&normalized).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_is_sorted_unique_and_normalized() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]), "keep STOP_WORDS sorted for binary search");
        for w in STOP_WORDS {
            assert_eq!(crate::normalize::normalize_name(w), *w);
        }
        assert!(is_stop_word("yes") && !is_stop_word("spieth"));
    }
}
