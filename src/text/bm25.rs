//! BM25+ (Lv and Zhai, 2011) as the query producer's label function computes it: the
//! formula of `rank_bm25`'s `BM25Plus` (k1 1.5, b 0.75, delta 1, idf ln((N+1)/df)),
//! operation for operation, so scores agree with it to the last bits (a golden test runs
//! against scores that package wrote, `tools/reference/bm25plus.py`). A query word that
//! no document holds adds nothing, not even delta, as there.

use std::collections::HashMap;

/// BM25+'s parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalization.
    pub b: f64,
    /// The lower bound a matched word adds (BM25+'s delta).
    pub delta: f64,
}

impl Default for Bm25Params {
    /// `rank_bm25.BM25Plus`'s defaults, the seed's.
    fn default() -> Self {
        Bm25Params { k1: 1.5, b: 0.75, delta: 1.0 }
    }
}

/// A corpus of tokenized documents, scored against queries.
#[derive(Clone, Debug)]
pub struct Bm25Plus {
    params: Bm25Params,
    freqs: Vec<HashMap<String, u32>>,
    lengths: Vec<usize>,
    average_length: f64,
    idf: HashMap<String, f64>,
}

impl Bm25Plus {
    /// Indexes `corpus` (each document a list of words).
    pub fn new<S: AsRef<str>>(corpus: &[Vec<S>], params: Bm25Params) -> Bm25Plus {
        let mut freqs = Vec::with_capacity(corpus.len());
        let mut lengths = Vec::with_capacity(corpus.len());
        let mut df: HashMap<String, u32> = HashMap::new();
        let mut total = 0usize;
        for doc in corpus {
            lengths.push(doc.len());
            total += doc.len();
            let mut f: HashMap<String, u32> = HashMap::new();
            for w in doc {
                *f.entry(w.as_ref().to_owned()).or_default() += 1;
            }
            for w in f.keys() {
                *df.entry(w.clone()).or_default() += 1;
            }
            freqs.push(f);
        }
        let n = corpus.len() as f64;
        let average_length = if corpus.is_empty() { 0.0 } else { total as f64 / n };
        let idf = df.into_iter().map(|(w, d)| (w, ((n + 1.0) / f64::from(d)).ln())).collect();
        Bm25Plus { params, freqs, lengths, average_length, idf }
    }

    /// Documents in the corpus.
    pub fn len(&self) -> usize {
        self.freqs.len()
    }

    /// Whether the corpus has no documents.
    pub fn is_empty(&self) -> bool {
        self.freqs.is_empty()
    }

    /// Every document's score for `query` (its words, repeats counted each time).
    pub fn scores<S: AsRef<str>>(&self, query: &[S]) -> Vec<f64> {
        let Bm25Params { k1, b, delta } = self.params;
        let mut scores = vec![0.0f64; self.freqs.len()];
        if self.average_length == 0.0 {
            // Every document is empty: nothing matches.
            return scores;
        }
        for q in query {
            let Some(&idf) = self.idf.get(q.as_ref()) else { continue };
            for ((score, f), &len) in scores.iter_mut().zip(&self.freqs).zip(&self.lengths) {
                let tf = f64::from(f.get(q.as_ref()).copied().unwrap_or(0));
                *score += idf * (delta + (tf * (k1 + 1.0)) / (k1 * (1.0 - b + b * len as f64 / self.average_length) + tf));
            }
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(texts: &[&str]) -> Vec<Vec<String>> {
        texts.iter().map(|t| t.split_whitespace().map(str::to_owned).collect()).collect()
    }

    #[test]
    fn a_hand_worked_corpus() {
        // N = 2, avgdl = 2; "a": df 2, idf ln(3/2); "b": df 1, idf ln 3.
        let bm = Bm25Plus::new(&docs(&["a b", "a a"]), Bm25Params::default());
        let s = bm.scores(&["b"]);
        // doc 0: tf 1, len 2: ln3 * (1 + 2.5 / (1.5 * 1 + 1)) = 2 ln 3; doc 1: tf 0: ln 3 * 1.
        assert!((s[0] - 2.0 * 3f64.ln()).abs() < 1e-12 && (s[1] - 3f64.ln()).abs() < 1e-12, "{s:?}");
        // A word no document holds adds nothing, not even delta.
        assert_eq!(bm.scores(&["zzz"]), vec![0.0, 0.0]);
        // Repeats count each time.
        let twice = bm.scores(&["b", "b"]);
        assert!((twice[0] - 2.0 * s[0]).abs() < 1e-12);
    }

    #[test]
    fn empty_corpora_and_documents_score_zero() {
        assert!(Bm25Plus::new::<String>(&[], Bm25Params::default()).scores(&["a"]).is_empty());
        assert_eq!(Bm25Plus::new(&docs(&["", ""]), Bm25Params::default()).scores(&["a"]), vec![0.0, 0.0]);
    }

    #[derive(serde::Deserialize)]
    struct Case {
        corpus: Vec<Vec<String>>,
        query: Vec<String>,
        scores: Vec<f64>,
    }

    /// Scores from rank_bm25 0.2.2's BM25Plus (tools/reference/bm25plus.py), the same token
    /// lists, the same floats bit for bit.
    #[test]
    fn agrees_with_rank_bm25_bm25plus() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bm25plus_cases.json");
        let cases: Vec<Case> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(cases.len(), 40);
        let (mut matched, mut delta_only) = (0, 0);
        for (i, c) in cases.iter().enumerate() {
            let got = Bm25Plus::new(&c.corpus, Bm25Params::default()).scores(&c.query);
            assert_eq!(got.len(), c.scores.len(), "case {i}");
            for (g, want) in got.iter().zip(&c.scores) {
                assert_eq!(g.to_bits(), want.to_bits(), "case {i}: {g} vs {want}");
            }
            matched += c.scores.iter().filter(|&&s| s > 0.0).count();
            delta_only += usize::from(c.corpus.iter().any(Vec::is_empty));
        }
        assert!(matched > 100 && delta_only >= 5, "the cases must exercise matches and empty documents ({matched}, {delta_only})");
    }
}
