//! A reply split into atomic claims: sentences, the linked mentions of each sentence grouped
//! where they are coordinated ("Adam Sandler and Drew Barrymore"), and a claim between every
//! member of a group and every member of the next, with the words between them as its
//! relation phrase (not when those words start another clause or predicate: "I", "and
//! was"). A sentence with one group that refers back ("he", "it", "that") makes claims with
//! the dialog's entities instead, when its words name a relation. Questions assert nothing
//! and make no claims.

/// Words between two groups that only coordinate them.
const COORDINATORS: &[&str] = &["and", "as", "or", "well", "&", "plus"];
/// A phrase holding one of these starts another clause: its mentions are not one claim.
const CLAUSE_SUBJECTS: &[&str] = &["i", "you", "we", "he", "she", "they", "i'm", "you're", "we're", "they're"];
/// A phrase starting with one of these coordinates a new predicate ("X and was released
/// in 2012"): its subject is the sentence's, not the mention before it.
const PREDICATE_COORDINATORS: &[&str] = &["and", "but", "or"];
/// A one-mention sentence is about an entity of the dialog only when it refers to one.
const REFERRING: &[&str] = &["he", "she", "it", "they", "him", "her", "his", "its", "them", "their", "this", "that", "these", "those"];
/// Words that deny the relation between two mentions.
const NEGATIONS: &[&str] = &["not", "never", "no", "nor", "neither", "cannot"];
/// Words that only suppose it: no claim.
const HEDGES: &[&str] = &["maybe", "perhaps", "possibly", "probably"];
/// The longest relation phrase between two mentions, in words.
pub const MAX_PHRASE_WORDS: usize = 8;

/// A sentence of the reply: its byte span and whether it asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sentence {
    pub start: usize,
    pub end: usize,
    pub question: bool,
}

/// Lower-cased words as the lexicon's learner cuts them: runs of letters and digits, with
/// an inner apostrophe and the letters after it ("it's").
pub(crate) fn phrase_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        } else if (c == '\'' || c == '’') && !cur.is_empty() && chars.peek().is_some_and(|n| n.is_alphabetic()) {
            cur.push('\'');
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The sentences of `text`: cut after a run of `.`, `!`, `?` or `;` followed by a space or
/// the end, except inside a mention (`J.K. Rowling`).
pub(crate) fn sentences(text: &str, mentions: &[(usize, usize)]) -> Vec<Sentence> {
    // Mentions come in text order and do not overlap: one cursor walks them (linear time).
    let mut next_mention = 0;
    let mut out = Vec::new();
    let mut start = 0;
    let mut question = false;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if !matches!(c, '.' | '!' | '?' | ';') {
            continue;
        }
        while next_mention < mentions.len() && mentions[next_mention].1 <= i {
            next_mention += 1;
        }
        if mentions.get(next_mention).is_some_and(|&(s, _)| s <= i) {
            continue;
        }
        question |= c == '?';
        let next = iter.peek().map(|&(_, n)| n);
        match next {
            Some('.' | '!' | '?' | ';') => {}
            Some(n) if !n.is_whitespace() => question = false,
            _ => {
                let end = i + c.len_utf8();
                if !text[start..end].trim().is_empty() {
                    out.push(Sentence { start, end, question });
                }
                start = end;
                question = false;
            }
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(Sentence { start, end: text.len(), question: false });
    }
    out
}

/// One claim slot: two mentions of the reply, or one mention and the dialog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pairing {
    /// Mentions `a` and `b` (indices into the reply's mentions), `a` first in the text.
    Mentions { a: usize, b: usize },
    /// Mention `mention` and an entity of the dialog before the reply.
    Dialog { mention: usize },
}

/// A claim before it is judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub sentence: usize,
    pub pairing: Pairing,
    /// The relation phrase as written.
    pub phrase: String,
    /// Its words ([`phrase_words`]).
    pub words: Vec<String>,
    /// Whether the words between two mentions deny the relation ("was not directed by").
    pub negated: bool,
}

/// Whether `words` deny what they say ("not", "never", "wasn't").
fn negated(words: &[String]) -> bool {
    words.iter().any(|w| NEGATIONS.contains(&w.as_str()) || w.ends_with("n't"))
}

/// Whether `words` only suppose what they say ("maybe", "probably"): not a claim.
fn hedged(words: &[String]) -> bool {
    words.iter().any(|w| HEDGES.contains(&w.as_str()))
}

/// The claim slots of a reply whose mentions (byte spans, in text order, not overlapping)
/// are `mentions`; at most `max` of them (none is made past it: a sentence of thousands of
/// coordinated mentions costs no more than `max` slots). Linear in the text and mentions.
pub(crate) fn slots(text: &str, mentions: &[(usize, usize)], max: usize) -> Vec<Slot> {
    let mut out = Vec::new();
    let mut cursor = 0;
    for (si, s) in sentences(text, mentions).iter().enumerate() {
        if out.len() >= max {
            break;
        }
        while cursor < mentions.len() && mentions[cursor].0 < s.start {
            cursor += 1;
        }
        let first = cursor;
        while cursor < mentions.len() && mentions[cursor].1 <= s.end {
            cursor += 1;
        }
        if s.question || first == cursor {
            continue;
        }
        let inside: Vec<usize> = (first..cursor).collect();
        // Coordinated mentions form one group.
        let mut groups: Vec<Vec<usize>> = vec![vec![inside[0]]];
        for w in inside.windows(2) {
            let gap = &text[mentions[w[0]].1..mentions[w[1]].0];
            let words = phrase_words(gap);
            if words.iter().all(|w| COORDINATORS.contains(&w.as_str())) {
                groups.last_mut().expect("one group at least").push(w[1]);
            } else {
                groups.push(vec![w[1]]);
            }
        }
        if groups.len() == 1 {
            let mut phrase = String::new();
            let mut cut = s.start;
            // The sentence with its mentions written `_`.
            for &m in &groups[0] {
                phrase.push_str(&text[cut..mentions[m].0]);
                phrase.push('_');
                cut = mentions[m].1;
            }
            phrase.push_str(&text[cut..s.end]);
            let phrase = phrase.split_whitespace().collect::<Vec<_>>().join(" ");
            let words: Vec<String> = phrase_words(&phrase).into_iter().filter(|w| w != "_").collect();
            if words.iter().any(|w| REFERRING.contains(&w.as_str())) && !hedged(&words) {
                for &m in &groups[0] {
                    if out.len() >= max {
                        return out;
                    }
                    out.push(Slot { sentence: si, pairing: Pairing::Dialog { mention: m }, phrase: phrase.clone(), words: words.clone(), negated: false });
                }
            }
        }
        for g in groups.windows(2) {
            let (last, first) = (*g[0].last().expect("groups are not empty"), g[1][0]);
            let phrase = text[mentions[last].1..mentions[first].0].trim();
            let words = phrase_words(phrase);
            let new_predicate = words.first().is_some_and(|w| PREDICATE_COORDINATORS.contains(&w.as_str()));
            if new_predicate || hedged(&words) || words.len() > MAX_PHRASE_WORDS || words.iter().any(|w| CLAUSE_SUBJECTS.contains(&w.as_str())) {
                continue;
            }
            let negated = negated(&words);
            for &a in &g[0] {
                for &b in &g[1] {
                    if out.len() >= max {
                        return out;
                    }
                    out.push(Slot { sentence: si, pairing: Pairing::Mentions { a, b }, phrase: phrase.to_string(), words: words.clone(), negated });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str, names: &[&str]) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = names
            .iter()
            .map(|n| {
                let s = text.find(n).unwrap();
                (s, s + n.len())
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn words_and_sentences_are_cut_as_the_learner_cuts_them() {
        assert_eq!(phrase_words("It's directed, by  J.K.!"), ["it's", "directed", "by", "j", "k"]);
        let t = "J.K. Rowling wrote it. Do you like it? Yes!";
        let s = sentences(t, &spans(t, &["J.K. Rowling"]));
        assert_eq!(s.len(), 3);
        assert_eq!(&t[s[0].start..s[0].end], "J.K. Rowling wrote it.");
        assert!(!s[0].question && s[1].question && !s[2].question);
        assert_eq!(sentences("3.5 stars", &[]).len(), 1);
    }

    #[test]
    fn coordinated_mentions_claim_together_and_clauses_do_not() {
        let t = "Adam Sandler and Drew Barrymore starred in 50 First Dates, and I love Happy Gilmore.";
        let m = spans(t, &["Adam Sandler", "Drew Barrymore", "50 First Dates", "Happy Gilmore"]);
        let s = slots(t, &m, 64);
        let pairs: Vec<(Pairing, &str)> = s.iter().map(|s| (s.pairing.clone(), s.phrase.as_str())).collect();
        assert_eq!(
            pairs,
            vec![(Pairing::Mentions { a: 0, b: 2 }, "starred in"), (Pairing::Mentions { a: 1, b: 2 }, "starred in")],
            "the clause with I makes no claim with 50 First Dates"
        );
        let t = "It was written by Tolkien and was released in 2012. I love Golf.";
        let m = spans(t, &["Tolkien", "2012", "Golf"]);
        assert!(slots(t, &m, 64).is_empty(), "a coordinated predicate's subject is not the mention before it; no word refers back");
        let t = "I know he played Golf. Did Spieth play Golf?";
        let m = spans(t, &["Golf"]);
        let s = slots(t, &m, 64);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].pairing, Pairing::Dialog { mention: 0 });
        assert_eq!(s[0].words, ["i", "know", "he", "played"]);
        assert_eq!(s[0].phrase, "I know he played _.");
        assert_eq!(slots(t, &m, 0).len(), 0);
    }
}
