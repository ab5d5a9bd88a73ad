//! The paper's cheap supervision (§2.1.4, Eq. 3): a candidate's label is the best BM25+ of
//! the gold reply against the documents it retrieves, with the corpus statistics over the
//! pooled documents of all the turn's candidates. BM25++ also drops function words from both
//! sides and appends, for each pronoun of the reply, its antecedent in the dialog (here: the
//! latest mention of the context). BM25(q,u) scores the candidate's own words against the
//! reply, ignoring what it retrieves: the candidates are the corpus, the reply the query.

use super::candidates::{antecedent, pronouns};
use super::TurnQueries;
use crate::link::{is_stop_word, Mention};
use crate::text::analyzer::words;
use crate::text::bm25::{Bm25Params, Bm25Plus};
use crate::text::EntityDocument;
use std::collections::HashMap;

/// Which label function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelFunction {
    /// BM25+ of the reply against each candidate's documents (the paper's "BM25").
    Bm25,
    /// With function words dropped and the reply's pronouns expanded ("BM25++").
    Bm25PlusPlus,
}

fn content(ws: Vec<String>) -> Vec<String> {
    ws.into_iter().filter(|w| !is_stop_word(w)).collect()
}

/// Each candidate's label for the turn whose reply is `reply`; `mentions` are the context's.
pub fn label_scores(turn: &TurnQueries, reply: &str, mentions: &[Mention], function: LabelFunction) -> Vec<f64> {
    // The pooled documents, each once, in order of first retrieval.
    let mut pool: Vec<&EntityDocument> = Vec::new();
    let mut at: HashMap<u32, usize> = HashMap::new();
    for r in &turn.results {
        for h in r {
            at.entry(h.entity.0).or_insert_with(|| {
                pool.push(&h.document);
                pool.len() - 1
            });
        }
    }
    let plus = function == LabelFunction::Bm25PlusPlus;
    let corpus: Vec<Vec<String>> = pool.iter().map(|d| if plus { content(words(&d.text())) } else { words(&d.text()) }).collect();
    let mut query = words(reply);
    if plus {
        query = content(query);
        let last = mentions.iter().map(|m| m.message + 1).max().unwrap_or(0);
        for _ in pronouns(reply) {
            if let Some(m) = antecedent(mentions, last, 0) {
                query.extend(content(words(&mentions[m].text)));
            }
        }
    }
    let scores = Bm25Plus::new(&corpus, Bm25Params::default()).scores(&query);
    turn.results.iter().map(|r| r.iter().map(|h| scores[at[&h.entity.0]]).fold(0.0, f64::max)).collect()
}

/// BM25(q,u): each candidate's words as a document, the reply as the query.
pub fn bm25_query_reply(turn: &TurnQueries, reply: &str) -> Vec<f64> {
    let corpus: Vec<Vec<String>> = turn.candidates.iter().map(|c| words(&c.text)).collect();
    Bm25Plus::new(&corpus, Bm25Params::default()).scores(&words(reply))
}
