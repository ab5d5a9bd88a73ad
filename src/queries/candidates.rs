//! A turn's query candidates. The paper's are TagMe's dictionary spots over all turns (link
//! probability above 0.01) plus coreference antecedents; here the linker's mentions play the
//! spots (its dictionary is the store's names and aliases), with `1 / candidate entities`
//! standing in for the link probability (no anchor statistics exist for a private graph);
//! the antecedent of a pronoun in the last message is the latest mention before it; and
//! content words outside every mention (the paper's YAKE alternative, simplified to single
//! rare words) are added as keyword candidates.

use crate::dialog::Message;
use crate::link::words::words as message_words;
use crate::link::{is_stop_word, Mention};
use crate::text::analyzer;
use crate::text::{TextError, TextIndex};
use std::collections::{HashMap, HashSet};

/// Keyword candidates kept per turn at most (the rarest in the index first).
pub const MAX_KEYWORDS: usize = 8;

/// Pronouns whose antecedents become candidates (and, in BM25++, expand the reply).
pub(crate) const PRONOUNS: &[&str] =
    &["he", "she", "it", "they", "him", "her", "his", "hers", "its", "their", "theirs", "them", "himself", "herself", "itself", "themselves"];

/// Where a candidate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateSource {
    /// A linker mention (a dictionary span).
    Span,
    /// A content word outside every mention.
    Keyword,
}

/// What the learned scorer sees of a candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Features {
    /// `1 / candidate entities` of its best mention (0 for a keyword).
    pub link_probability: f32,
    /// Messages between its last occurrence and the end of the context (0: the last one).
    pub turn_distance: f32,
    /// Times it occurs in the context.
    pub occurrences: f32,
    /// Mean rarity of its words in the text index, ln((N+1)/(df+1)).
    pub mean_idf: f32,
    /// Its words.
    pub words: f32,
    /// 1 when it occurs in the last message.
    pub in_last_turn: f32,
    /// 1 when it is the antecedent of a pronoun of the last message.
    pub antecedent: f32,
    /// ln(1 + facts) of its mention's first entity (0 for a keyword).
    pub log_degree: f32,
    /// Its top document's search score over the turn's best.
    pub top_score: f32,
    /// 1 when its top document's name has exactly its words.
    pub name_match: f32,
    /// 1 for a keyword candidate.
    pub keyword: f32,
}

/// The features' names, in [`Features::vector`]'s order (a scorer file names them).
pub const FEATURE_NAMES: [&str; 11] =
    ["link_probability", "turn_distance", "occurrences", "mean_idf", "words", "in_last_turn", "antecedent", "log_degree", "top_score", "name_match", "keyword"];

impl Features {
    /// The features as numbers, in [`FEATURE_NAMES`]' order.
    pub fn vector(&self) -> [f32; 11] {
        [
            self.link_probability,
            self.turn_distance,
            self.occurrences,
            self.mean_idf,
            self.words,
            self.in_last_turn,
            self.antecedent,
            self.log_degree,
            self.top_score,
            self.name_match,
            self.keyword,
        ]
    }
}

/// One query candidate.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Candidate {
    /// The query as written (a mention's first spelling, or the keyword).
    pub text: String,
    /// Where it comes from.
    pub source: CandidateSource,
    /// The last message it occurs in.
    pub last_message: usize,
    /// Its features.
    pub features: Features,
}

/// The pronouns of `text` with their byte offsets.
pub(crate) fn pronouns(text: &str) -> Vec<usize> {
    message_words(text).iter().filter(|w| PRONOUNS.contains(&w.text.to_lowercase().as_str())).map(|w| w.start).collect()
}

/// The latest mention before byte `at` of message `message` (earlier messages count).
pub(crate) fn antecedent(mentions: &[Mention], message: usize, at: usize) -> Option<usize> {
    mentions.iter().enumerate().filter(|(_, m)| m.message < message || (m.message == message && m.end <= at)).map(|(i, _)| i).next_back()
}

fn idf(index: &TextIndex, word: &str) -> Result<f32, TextError> {
    let (df, n) = index.document_frequency(word)?;
    Ok((((n + 1) as f64) / ((df + 1) as f64)).ln() as f32)
}

fn mean_idf(index: &TextIndex, words: &[String]) -> Result<f32, TextError> {
    if words.is_empty() {
        return Ok(0.0);
    }
    let mut sum = 0f32;
    for w in words {
        sum += idf(index, w)?;
    }
    Ok(sum / words.len() as f32)
}

/// The candidates of the turn after `messages`, whose mentions are `mentions`.
pub(crate) fn candidates(index: &TextIndex, messages: &[Message], mentions: &[Mention]) -> Result<Vec<Candidate>, TextError> {
    let Some(last) = messages.len().checked_sub(1) else { return Ok(Vec::new()) };
    let mut out: Vec<Candidate> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let mut mention_words: HashSet<String> = HashSet::new();
    let mut mention_candidate = Vec::with_capacity(mentions.len());
    for m in mentions {
        let words = analyzer::words(&m.text);
        if words.is_empty() || m.message > last {
            mention_candidate.push(None);
            continue;
        }
        mention_words.extend(words.iter().cloned());
        let key = words.join(" ");
        let lp = if m.entities.is_empty() { 0.0 } else { 1.0 / m.entities.len() as f32 };
        let degree = m.entities.first().map_or(0.0, |e| (1.0 + e.degree as f32).ln());
        let i = match by_key.get(&key) {
            Some(&i) => i,
            None => {
                out.push(Candidate {
                    text: m.text.clone(),
                    source: CandidateSource::Span,
                    last_message: m.message,
                    features: Features { words: words.len() as f32, mean_idf: mean_idf(index, &words)?, ..Features::default() },
                });
                by_key.insert(key, out.len() - 1);
                out.len() - 1
            }
        };
        let f = &mut out[i].features;
        f.occurrences += 1.0;
        f.link_probability = f.link_probability.max(lp);
        f.log_degree = f.log_degree.max(degree);
        out[i].last_message = out[i].last_message.max(m.message);
        mention_candidate.push(Some(i));
    }
    for at in pronouns(&messages[last].text) {
        if let Some(Some(i)) = antecedent(mentions, last, at).and_then(|m| mention_candidate.get(m)) {
            out[*i].features.antecedent = 1.0;
        }
    }
    // Keywords: content words outside every mention, the rarest first.
    let mut keywords: Vec<(String, usize, f32)> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (mi, message) in messages.iter().enumerate() {
        for w in analyzer::words(&message.text) {
            if w.len() < 3 || w.bytes().all(|b| b.is_ascii_digit()) || is_stop_word(&w) || PRONOUNS.contains(&w.as_str()) || mention_words.contains(&w) {
                continue;
            }
            match seen.get(&w) {
                Some(&k) => {
                    keywords[k].1 = mi;
                    keywords[k].2 += 1.0;
                }
                None => {
                    seen.insert(w.clone(), keywords.len());
                    keywords.push((w, mi, 1.0));
                }
            }
        }
    }
    let mut scored = Vec::with_capacity(keywords.len());
    for (w, mi, n) in keywords {
        let rarity = idf(index, &w)?;
        scored.push((rarity, w, mi, n));
    }
    // Rarest first; equal rarity by first appearance (the sort is stable).
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (rarity, w, mi, n) in scored.into_iter().take(MAX_KEYWORDS) {
        out.push(Candidate {
            text: w,
            source: CandidateSource::Keyword,
            last_message: mi,
            features: Features { occurrences: n, mean_idf: rarity, words: 1.0, keyword: 1.0, ..Features::default() },
        });
    }
    for c in &mut out {
        c.features.turn_distance = (last - c.last_message) as f32;
        c.features.in_last_turn = f32::from(c.last_message == last);
    }
    Ok(out)
}
