//! BM25 (Okapi, as `rank_bm25.BM25Okapi`: k1 = 1.5, b = 0.75, negative idf replaced by
//! epsilon = 0.25 times the mean idf) over a small corpus: the verbalized candidates of one
//! dialog. Tokens: lowercase runs of letters and digits.

use crate::link::Message;
use std::collections::HashMap;

pub const K1: f64 = 1.5;
pub const B: f64 = 0.75;
pub const EPSILON: f64 = 0.25;

pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect()
}

pub struct Bm25 {
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    avgdl: f64,
    idf: HashMap<String, f64>,
}

impl Bm25 {
    pub fn new(corpus: &[Vec<String>]) -> Bm25 {
        let mut df: HashMap<String, u32> = HashMap::new();
        // Terms in order of first occurrence: rank_bm25 sums the idfs in that (dict) order,
        // and a float sum depends on its order; a hash order would also vary between runs.
        let mut terms: Vec<String> = Vec::new();
        let mut docs = Vec::with_capacity(corpus.len());
        let mut lengths = Vec::with_capacity(corpus.len());
        for doc in corpus {
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in doc {
                let count = tf.entry(t.clone()).or_default();
                if *count == 0 {
                    let d = df.entry(t.clone()).or_default();
                    if *d == 0 {
                        terms.push(t.clone());
                    }
                    *d += 1;
                }
                *count += 1;
            }
            lengths.push(doc.len() as f64);
            docs.push(tf);
        }
        let n = corpus.len() as f64;
        let avgdl = if corpus.is_empty() { 0.0 } else { lengths.iter().sum::<f64>() / n };
        // rank_bm25's arithmetic, operation for operation, so the scores are the same
        // floats: idf = ln(n - df + 0.5) - ln(df + 0.5), negative ones replaced by epsilon
        // times the mean idf.
        let mut idf: HashMap<String, f64> = HashMap::with_capacity(terms.len());
        let mut sum = 0.0;
        let mut negative = Vec::new();
        for t in &terms {
            let f = f64::from(df[t]);
            let v = (n - f + 0.5).ln() - (f + 0.5).ln();
            sum += v;
            if v < 0.0 {
                negative.push(t.clone());
            }
            idf.insert(t.clone(), v);
        }
        let eps = EPSILON * (sum / terms.len().max(1) as f64);
        for t in negative {
            idf.insert(t, eps);
        }
        Bm25 { docs, lengths, avgdl, idf }
    }

    /// The score of every document for `query`.
    pub fn scores(&self, query: &[String]) -> Vec<f64> {
        (0..self.docs.len())
            .map(|i| {
                let mut s = 0.0;
                for q in query {
                    let f = f64::from(*self.docs[i].get(q).unwrap_or(&0));
                    let idf = self.idf.get(q).copied().unwrap_or(0.0);
                    s += idf * (f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * self.lengths[i] / self.avgdl)));
                }
                s
            })
            .collect()
    }
}

/// Seed 003's relevance: the mean over l = 1..=L of BM25 against the last l messages.
pub fn mean_over_last_turns(docs: &[String], history: &[Message], turns: usize) -> Vec<f64> {
    let corpus: Vec<Vec<String>> = docs.iter().map(|d| tokenize(d)).collect();
    let bm25 = Bm25::new(&corpus);
    let turns = turns.max(1).min(history.len().max(1));
    let mut total = vec![0.0; docs.len()];
    for l in 1..=turns {
        let start = history.len().saturating_sub(l);
        let query: Vec<String> = history[start..].iter().flat_map(|m| tokenize(&m.text)).collect();
        for (t, s) in total.iter_mut().zip(bm25.scores(&query)) {
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

    /// Scores from rank_bm25 0.2.2 (tools/bm25_reference.py), same token lists, bit for bit.
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
