//! BM25 (Okapi, as `rank_bm25.BM25Okapi`: k1 = 1.5, b = 0.75, negative idf replaced by
//! epsilon = 0.25 times the mean idf) over a small corpus: the verbalized candidates of one
//! dialog. Tokens: lowercase runs of letters and digits.

use crate::dialog::Message;
use std::hash::BuildHasher;

/// BM25's term-frequency saturation k1.
pub const K1: f64 = 1.5;
/// BM25's length normalization b.
pub const B: f64 = 0.75;
/// A negative idf is replaced by epsilon times the mean idf.
pub const EPSILON: f64 = 0.25;

/// The BM25 tokens of a text: lowercase runs of letters and digits.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, &mut String::new(), |t| out.push(t.to_owned()));
    out
}

/// Calls `f` with each token of `text` (lowercased into `buf`, no allocation per token).
fn for_each_token(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for run in text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()) {
        buf.clear();
        if run.is_ascii() {
            buf.push_str(run);
            buf.make_ascii_lowercase();
        } else {
            buf.push_str(&run.to_lowercase());
        }
        f(buf);
    }
}

/// The terms of a corpus, interned in order of first occurrence, their text in one arena
/// (no allocation per term).
struct Vocab {
    table: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
    arena: String,
    spans: Vec<(u32, u32)>,
}

impl Vocab {
    fn new() -> Vocab {
        Vocab { table: hashbrown::HashTable::new(), hasher: Default::default(), arena: String::new(), spans: Vec::new() }
    }

    fn text(&self, id: u32) -> &str {
        let (start, len) = self.spans[id as usize];
        &self.arena[start as usize..(start + len) as usize]
    }

    fn get(&self, t: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(t);
        self.table.find(hash, |&id| self.text(id) == t).copied()
    }

    fn intern(&mut self, t: &str) -> u32 {
        let hash = self.hasher.hash_one(t);
        if let Some(&id) = self.table.find(hash, |&id| self.text(id) == t) {
            return id;
        }
        let id = self.spans.len() as u32;
        self.spans.push((self.arena.len() as u32, t.len() as u32));
        self.arena.push_str(t);
        let (arena, spans, hasher) = (&self.arena, &self.spans, &self.hasher);
        self.table.insert_unique(hash, id, |&x| {
            let (start, len) = spans[x as usize];
            hasher.hash_one(&arena[start as usize..(start + len) as usize])
        });
        id
    }
}

/// A BM25 index of a small corpus: terms interned in order of first occurrence, postings
/// (document, term frequency) per term in one flat array.
pub struct Bm25 {
    vocab: Vocab,
    /// Postings of term t: `postings[offsets[t]..offsets[t + 1]]`, in document order.
    offsets: Vec<u32>,
    postings: Vec<(u32, u32)>,
    idf: Vec<f64>,
    lengths: Vec<f64>,
    avgdl: f64,
}

impl Bm25 {
    /// An index of `corpus`, one token list per document.
    pub fn new(corpus: &[Vec<String>]) -> Bm25 {
        Bm25::build(corpus.len(), |i, add| corpus[i].iter().for_each(|t| add(t)))
    }

    /// Indexes `n` documents; `tokens(i, add)` feeds document i's tokens, in order, to `add`.
    pub fn build(n: usize, mut tokens: impl FnMut(usize, &mut dyn FnMut(&str))) -> Bm25 {
        let mut vocab = Vocab::new();
        // (term, document, frequency), in document order.
        let mut entries: Vec<(u32, u32, u32)> = Vec::new();
        let mut lengths = Vec::with_capacity(n);
        let mut doc_terms: Vec<u32> = Vec::new();
        for doc in 0..n {
            doc_terms.clear();
            tokens(doc, &mut |t: &str| doc_terms.push(vocab.intern(t)));
            lengths.push(doc_terms.len() as f64);
            doc_terms.sort_unstable();
            for run in doc_terms.chunk_by(|a, b| a == b) {
                entries.push((run[0], doc as u32, run.len() as u32));
            }
        }
        // Counting sort by term; stable, so each term's postings stay in document order.
        let terms = vocab.spans.len();
        let mut offsets = vec![0u32; terms + 1];
        for &(t, _, _) in &entries {
            offsets[t as usize + 1] += 1;
        }
        for t in 0..terms {
            offsets[t + 1] += offsets[t];
        }
        let mut next = offsets.clone();
        let mut postings = vec![(0u32, 0u32); entries.len()];
        for &(t, doc, tf) in &entries {
            postings[next[t as usize] as usize] = (doc, tf);
            next[t as usize] += 1;
        }
        let count = n as f64;
        let avgdl = if n == 0 { 0.0 } else { lengths.iter().sum::<f64>() / count };
        // rank_bm25's arithmetic, operation for operation, so the scores are the same
        // floats: idf = ln(n - df + 0.5) - ln(df + 0.5) summed in order of first occurrence
        // (its dict order; a float sum depends on the order), negative ones replaced by
        // epsilon times the mean idf.
        let mut idf: Vec<f64> = Vec::with_capacity(terms);
        let mut sum = 0.0;
        for t in 0..terms {
            let f = f64::from(offsets[t + 1] - offsets[t]);
            let v = (count - f + 0.5).ln() - (f + 0.5).ln();
            sum += v;
            idf.push(v);
        }
        let eps = EPSILON * (sum / idf.len().max(1) as f64);
        for v in idf.iter_mut().filter(|v| **v < 0.0) {
            *v = eps;
        }
        Bm25 { vocab, offsets, postings, idf, lengths, avgdl }
    }

    /// The score of every document for `query`.
    pub fn scores(&self, query: &[String]) -> Vec<f64> {
        let mut s = vec![0.0; self.lengths.len()];
        self.add_scores(query.iter().map(String::as_str), &mut s);
        s
    }

    /// Adds the score of every document for the query tokens to `s`. Only documents holding
    /// a term get its (non-zero) share; rank_bm25 adds exact zeros to the others, which
    /// leaves the same floats.
    fn add_scores<'q>(&self, query: impl Iterator<Item = &'q str>, s: &mut [f64]) {
        for q in query {
            let Some(id) = self.vocab.get(q) else { continue };
            let idf = self.idf[id as usize];
            let (from, to) = (self.offsets[id as usize] as usize, self.offsets[id as usize + 1] as usize);
            for &(doc, tf) in &self.postings[from..to] {
                let f = f64::from(tf);
                s[doc as usize] += idf * (f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * self.lengths[doc as usize] / self.avgdl)));
            }
        }
    }
}

/// Seed 003's relevance: the mean over l = 1..=L of BM25 against the last l messages.
pub fn mean_over_last_turns(docs: &[String], history: &[Message], turns: usize) -> Vec<f64> {
    let mut buf = String::new();
    mean_over_last_turns_with(docs.len(), |i, add| for_each_token(&docs[i], &mut buf, |t| add(t)), history, turns)
}

/// As `mean_over_last_turns`, the documents given by their tokens: `tokens(i, add)` feeds
/// document i's tokens in order (so a document made of known parts need not be written
/// out and tokenized again).
pub fn mean_over_last_turns_with(n: usize, tokens: impl FnMut(usize, &mut dyn FnMut(&str)), history: &[Message], turns: usize) -> Vec<f64> {
    let bm25 = Bm25::build(n, tokens);
    let turns = turns.max(1).min(history.len().max(1));
    let mut total = vec![0.0; n];
    let mut scores = vec![0.0; n];
    for l in 1..=turns {
        let start = history.len().saturating_sub(l);
        let query: Vec<String> = history[start..].iter().flat_map(|m| tokenize(&m.text)).collect();
        scores.iter_mut().for_each(|x| *x = 0.0);
        bm25.add_scores(query.iter().map(String::as_str), &mut scores);
        for (t, s) in total.iter_mut().zip(&scores) {
            *t += s;
        }
    }
    total.iter().map(|t| t / turns as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Case {
        corpus: Vec<Vec<String>>,
        query: Vec<String>,
        scores: Vec<f64>,
    }

    /// Scores from rank_bm25 0.2.2 (tools/reference/bm25.py), same token lists, bit for bit.
    #[test]
    fn agrees_with_rank_bm25() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bm25_cases.json");
        let cases: Vec<Case> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(cases.len(), 30);
        let mut nonzero = 0;
        for (i, c) in cases.iter().enumerate() {
            let got = Bm25::new(&c.corpus).scores(&c.query);
            assert_eq!(got.len(), c.scores.len());
            for (g, want) in got.iter().zip(&c.scores) {
                // The same floats, not merely close ones: rankings then tie-break alike.
                assert_eq!(g.to_bits(), want.to_bits(), "case {i}: {g} vs {want}");
                nonzero += usize::from(*want != 0.0);
            }
        }
        assert!(nonzero > 30, "the cases must exercise real matches ({nonzero} non-zero scores)");
    }

    #[test]
    fn tokens_are_lowercase_alphanumeric_runs() {
        assert_eq!(tokenize("Jordan Spieth's  golf-swing, 2015!"), vec!["jordan", "spieth", "s", "golf", "swing", "2015"]);
    }
}
