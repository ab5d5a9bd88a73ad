//! Response metrics for knowledge-grounded dialog: corpus BLEU-1..4 (three definitions),
//! ROUGE-1/2/L, unigram F1, knowledge F1, distinct-1/2, distinct replies and the grounding
//! figures, each computed as a named Python reference computes it, so that numbers can be
//! compared with published ones. `tools/reference/metrics.py` writes the reference values;
//! `tests/integration/metrics.rs` checks every one to 1e-12.
//!
//! Every score is a fraction in 0..1 (sacrebleu prints BLEU on 0..100: 100 times
//! `bleu_sacrebleu`).
//!
//! - `bleu_sacrebleu."n"`: sacrebleu's default corpus BLEU with `max_ngram_order = n`
//!   (`sacrebleu.metrics.BLEU(max_ngram_order=n).corpus_score(predictions, [references])`):
//!   tokenizer 13a, case kept, smoothing "exp" (the k-th order whose matches are 0 counts
//!   1 / (2^k * total)), effective order off, one reference per prediction.
//! - `bleu_nltk."n"`: `nltk.translate.bleu_score.corpus_bleu` with weights (1/n, ..., 1/n) and
//!   no smoothing, on `text.lower().split()` tokens. Without smoothing nltk counts an order
//!   with no match as the smallest positive double (its warning says the score "evaluates to
//!   0": it is about 1e-77 or less, and that is what is returned here too), and returns exactly
//!   0 when no unigram matches.
//! - `bleu_dialoggsr."n"`: BLEU as the DialogGSR authors' code computes it, so that figures
//!   compare with the paper's (Table 1): `corpus_bleu` with weights (1/n, ..., 1/n) (cumulative
//!   BLEU-n, not the n-gram order alone) and `SmoothingFunction(epsilon=1e-12).method1` (an
//!   order with no match counts 1e-12 matches: 1e-12 / its n-gram total), on `text.split()`
//!   tokens of the raw text, case kept, one reference per prediction. Found in
//!   `utils/metrics.py` (`bleu_corpus`, commit 148c0b3, called from
//!   `Evaluator._compute_metrics` in `main.py`) of the public repository
//!   `Chaebins/DialogGSR_clone` on GitHub, a clone of the authors' repository (its README
//!   was the official one's: "Official PyTorch implementation of ... (EMNLP 2024)"); the
//!   official repository itself was not in reach. The same code appears in another dialog
//!   repository as `get_nltk_bleu_score`. Their texts are T5-small tokenizer
//!   round trips (`decode(..., skip_special_tokens=True, clean_up_tokenization_spaces=False)`),
//!   and their evaluator first replaces a prediction that is empty once `.` is deleted and
//!   the rest stripped by `"dialogue:"`; neither is done here (it scores the texts it is given).
//! - `rouge` and `rouge_stemmed`: rouge-score's `RougeScorer(["rouge1", "rouge2", "rougeL"],
//!   use_stemmer=False / True).score(reference, prediction)` F-measures, averaged over pairs.
//!   Its tokens: lowercase, every run of characters other than `a-z0-9` a separator; with the
//!   stemmer, tokens longer than 3 characters go through NLTK's Porter stemmer (`crate::porter`).
//! - `f1`: unigram F1 between prediction and reference after SQuAD's normalization (lowercase;
//!   delete ASCII punctuation; remove the words `a`, `an`, `the`; split on whitespace),
//!   averaged over pairs; 0 for a pair with no common token (two empty texts included).
//! - `kf1`: the same F1 between the prediction and the pair's knowledge text, averaged over the
//!   pairs whose knowledge is given and not the empty string (`kf1_pairs` of them; `None` when
//!   there are none).
//! - `distinct_1`, `distinct_2`: over all predictions, the number of distinct n-grams divided by
//!   the number of n-grams; tokens are `text.lower().split()`, n-grams do not cross predictions;
//!   0 when there are no n-grams.
//! - `distinct_replies`: the number of distinct predictions (exact string equality);
//!   `distinct_replies_share` divides it by the number of pairs.
//! - `grounding` ([`Grounding`]): whether replies name the entities of their knowledge
//!   (`entities`: the knowledge paths' heads and tails). "Names" is the delexicalizer's
//!   matching, [`crate::generate::delex::mentions`] (one definition in the engine): a
//!   case-insensitive whole-word match after per-character lowercase folding, longer names
//!   first and never overlapping, a name that is one stop word of the linker (`It`, `Up`)
//!   only with its exact case, a name with fewer than two letters or digits never. Pairs with
//!   no entity name (no knowledge, or only empty names) are left out of every figure.
//!   `mention_rate`: the share of the other pairs (`pairs` of them) whose prediction names
//!   at least one of its entities; `reference_mention_rate` the same for the references.
//!   `entity_recall` (micro-averaged): sum over pairs of |entities named by both prediction
//!   and reference| / sum over pairs of |entities named by the reference| (that sum is
//!   `reference_mentions`; a pair whose reference names none adds nothing to either side);
//!   `None` when no reference names one.
//!
//! Python's text semantics are kept where they decide a score: `str.split()` and `str.rstrip()`
//! whitespace (Unicode White_Space and U+001C..U+001F), `str.lower()` (Unicode full lowercase),
//! and the regex word boundary of SQuAD's article removal (a word character is a letter, a
//! digit or a number, or `_`, as Python's `\w`; letters assigned after Python's Unicode
//! version aside).

use crate::generate::delex::mentions;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// One response to score: the system's prediction, the reference response, and optionally
/// the knowledge the response should be grounded in: as text (for KF1) and as the names of
/// its entities (for [`Grounding`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponsePair {
    /// The system's reply.
    pub prediction: String,
    /// The reference reply.
    pub reference: String,
    /// The knowledge as text, for KF1 (`None` or empty: the pair is left out of KF1).
    #[serde(default)]
    pub knowledge: Option<String>,
    /// The entity names of the knowledge given for this reply (its paths' heads and tails,
    /// each once, as [`crate::generate::delex::knowledge_entities`] lists them); `None` or
    /// empty: no knowledge.
    #[serde(default)]
    pub entities: Option<Vec<String>>,
}

/// Corpus BLEU for n = 1..4 (JSON keys "1".."4"), a fraction in 0..1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Bleu {
    /// BLEU-1.
    #[serde(rename = "1")]
    pub bleu1: f64,
    /// BLEU-2.
    #[serde(rename = "2")]
    pub bleu2: f64,
    /// BLEU-3.
    #[serde(rename = "3")]
    pub bleu3: f64,
    /// BLEU-4.
    #[serde(rename = "4")]
    pub bleu4: f64,
}

/// Mean ROUGE F-measures (JSON keys "rouge1", "rouge2", "rougeL").
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rouge {
    /// ROUGE-1 F-measure.
    pub rouge1: f64,
    /// ROUGE-2 F-measure.
    pub rouge2: f64,
    /// ROUGE-L F-measure.
    #[serde(rename = "rougeL")]
    pub rouge_l: f64,
}

/// Whether the replies name the entities of their knowledge (module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Grounding {
    /// Pairs whose knowledge has at least one entity name.
    pub pairs: usize,
    /// Share of those pairs whose prediction names one of their entities (`None`: no pair).
    pub mention_rate: Option<f64>,
    /// The same for the references (what the data asks for).
    pub reference_mention_rate: Option<f64>,
    /// Of the entities each reference names, the share its prediction names too, over all
    /// pairs (micro-averaged; `None` when no reference names one).
    pub entity_recall: Option<f64>,
    /// The recall's denominator: the entities named by the references, summed over pairs.
    pub reference_mentions: usize,
}

/// The scores of a list of pairs (see the module documentation for each definition).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseScores {
    /// Pairs scored.
    pub pairs: usize,
    /// sacrebleu's corpus BLEU (tokenizer 13a, exp smoothing).
    pub bleu_sacrebleu: Bleu,
    /// nltk's corpus BLEU without smoothing, on lowercased tokens.
    pub bleu_nltk: Bleu,
    /// BLEU as the DialogGSR authors' code computes it (cumulative, epsilon smoothing).
    pub bleu_dialoggsr: Bleu,
    /// rouge-score's F-measures without the stemmer.
    pub rouge: Rouge,
    /// rouge-score's F-measures with the Porter stemmer.
    pub rouge_stemmed: Rouge,
    /// Unigram F1 with the reference after SQuAD's normalization, averaged over pairs.
    pub f1: f64,
    /// The same F1 with the knowledge text, over the pairs that have one (`None`: no pair has).
    pub kf1: Option<f64>,
    /// The pairs KF1 averages over.
    pub kf1_pairs: usize,
    /// Distinct unigrams over all unigrams of the predictions.
    pub distinct_1: f64,
    /// Distinct bigrams over all bigrams of the predictions.
    pub distinct_2: f64,
    /// Distinct predictions (exact string equality) and their share of the pairs.
    pub distinct_replies: usize,
    /// `distinct_replies` over the pairs.
    pub distinct_replies_share: f64,
    /// Whether the replies name the entities of their knowledge.
    pub grounding: Grounding,
}

/// Errors of [`score`] and [`read_pairs`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResponsesError {
    /// The list of pairs is empty.
    #[error("no pairs to score")]
    NoPairs,
    /// A file that cannot be read (the IO error is in the message, not a `source()`, so that a
    /// printed error chain says it once).
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A bad line of a predictions or gold file (bad input data).
    #[error("{path}:{line}: {problem}")]
    Bad {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        problem: LineProblem,
    },
}

/// What is wrong with one line of a predictions or gold file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineProblem {
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 {
        /// 0-based offset of the first invalid byte.
        byte: usize,
    },
    /// The line does not parse as JSON.
    #[error("not a JSON object: {0}")]
    Json(serde_json::Error),
    /// The line is JSON but not an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// No `"id"` that is a string or an integer.
    #[error("no \"id\" (a string or an integer)")]
    NoId,
    /// The named field is present but not a string.
    #[error("\"{0}\" is not a string")]
    NotAString(&'static str),
    /// The named field is present but not a list of strings.
    #[error("\"{0}\" is not a list of strings")]
    NotAListOfStrings(&'static str),
    /// No `"response"` (predictions may say `"reply"` instead).
    #[error("no \"response\"{}", if *or_reply { " (or \"reply\")" } else { "" })]
    NoResponse {
        /// Whether `"reply"` would do (a predictions file).
        or_reply: bool,
    },
    /// An id a line of the same file already has.
    #[error("id {id:?} again (first on line {first})")]
    DuplicateId {
        /// The id.
        id: String,
        /// The line that has it first.
        first: u64,
    },
    /// A prediction whose id no gold line has.
    #[error("id {id:?} is not in the gold file {gold}")]
    NotInGold {
        /// The id.
        id: String,
        /// The gold file.
        gold: PathBuf,
    },
    /// A gold line whose id no prediction has.
    #[error("no prediction for id {id:?} in {predictions}")]
    NoPrediction {
        /// The id.
        id: String,
        /// The predictions file.
        predictions: PathBuf,
    },
}

/// Scores `pairs` (in their order). Fails only on an empty list.
pub fn score(pairs: &[ResponsePair]) -> Result<ResponseScores, ResponsesError> {
    if pairs.is_empty() {
        return Err(ResponsesError::NoPairs);
    }
    let mean = |xs: &mut dyn Iterator<Item = f64>| {
        let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        sum / n as f64
    };
    let rouge_of = |stem: bool| {
        let scores: Vec<[f64; 3]> = pairs.iter().map(|p| rouge_pair(&p.reference, &p.prediction, stem)).collect();
        Rouge {
            rouge1: mean(&mut scores.iter().map(|s| s[0])),
            rouge2: mean(&mut scores.iter().map(|s| s[1])),
            rouge_l: mean(&mut scores.iter().map(|s| s[2])),
        }
    };
    let grounded: Vec<(&str, &str)> =
        pairs.iter().filter_map(|p| p.knowledge.as_deref().filter(|k| !k.is_empty()).map(|k| (p.prediction.as_str(), k))).collect();
    let kf1 = if grounded.is_empty() { None } else { Some(mean(&mut grounded.iter().map(|(p, k)| unigram_f1(p, k)))) };
    let distinct_replies = pairs.iter().map(|p| p.prediction.as_str()).collect::<HashSet<_>>().len();
    Ok(ResponseScores {
        pairs: pairs.len(),
        bleu_sacrebleu: sacrebleu(pairs),
        bleu_nltk: nltk_bleu(pairs),
        bleu_dialoggsr: dialoggsr_bleu(pairs),
        rouge: rouge_of(false),
        rouge_stemmed: rouge_of(true),
        f1: mean(&mut pairs.iter().map(|p| unigram_f1(&p.prediction, &p.reference))),
        kf1,
        kf1_pairs: grounded.len(),
        distinct_1: distinct(pairs, 1),
        distinct_2: distinct(pairs, 2),
        distinct_replies,
        distinct_replies_share: distinct_replies as f64 / pairs.len() as f64,
        grounding: grounding(pairs),
    })
}

/// Reads a predictions file and a gold file (JSON lines) and pairs them by id, in gold order.
///
/// Predictions: `{"id", "response"}` (or `"reply"`); gold: `{"id", "response", "knowledge"}`
/// with `knowledge` an optional string (null or absent: none). Either line may carry
/// `"entities"`, the entity names of the knowledge given for the reply (a list of strings; null
/// or absent: none); the prediction's, when it has them, else the gold line's. Ids are strings
/// or integers (an integer is the string of its digits) and unique within a file; every gold
/// id needs a prediction and every prediction a gold line. Blank lines are skipped.
pub fn read_pairs(predictions: &Path, gold: &Path) -> Result<Vec<ResponsePair>, ResponsesError> {
    let preds = read_lines(predictions, false)?;
    let golds = read_lines(gold, true)?;
    let bad = |path: &Path, line: u64, problem| ResponsesError::Bad { path: path.to_path_buf(), line, problem };
    let mut by_id: HashMap<&str, (u64, &Line)> = HashMap::with_capacity(preds.len());
    for p in &preds {
        if let Some((first, _)) = by_id.insert(&p.id, (p.line, p)) {
            return Err(bad(predictions, p.line, LineProblem::DuplicateId { id: p.id.clone(), first }));
        }
    }
    let mut seen: HashMap<&str, u64> = HashMap::with_capacity(golds.len());
    let mut pairs = Vec::with_capacity(golds.len());
    for g in &golds {
        if let Some(first) = seen.insert(&g.id, g.line) {
            return Err(bad(gold, g.line, LineProblem::DuplicateId { id: g.id.clone(), first }));
        }
        let Some((_, p)) = by_id.get(g.id.as_str()) else {
            return Err(bad(gold, g.line, LineProblem::NoPrediction { id: g.id.clone(), predictions: predictions.to_path_buf() }));
        };
        pairs.push(ResponsePair {
            prediction: p.response.clone(),
            reference: g.response.clone(),
            knowledge: g.knowledge.clone(),
            entities: p.entities.clone().or_else(|| g.entities.clone()),
        });
    }
    if let Some(p) = preds.iter().find(|p| !seen.contains_key(p.id.as_str())) {
        return Err(bad(predictions, p.line, LineProblem::NotInGold { id: p.id.clone(), gold: gold.to_path_buf() }));
    }
    Ok(pairs)
}

/// One line of a predictions or gold file.
struct Line {
    line: u64,
    id: String,
    response: String,
    knowledge: Option<String>,
    entities: Option<Vec<String>>,
}

fn read_lines(path: &Path, gold: bool) -> Result<Vec<Line>, ResponsesError> {
    let io = |error| ResponsesError::Io { path: path.to_path_buf(), error };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            return Ok(out);
        }
        line += 1;
        let bad = |problem| ResponsesError::Bad { path: path.to_path_buf(), line, problem };
        let text = std::str::from_utf8(&buf).map_err(|e| bad(LineProblem::InvalidUtf8 { byte: e.valid_up_to() }))?;
        let text = text.trim_start_matches('\u{feff}');
        if text.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(LineProblem::Json(e)))?;
        let obj = value.as_object().ok_or_else(|| bad(LineProblem::NotAnObject))?;
        let id = match obj.get("id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => return Err(bad(LineProblem::NoId)),
        };
        let string = |key: &'static str| match obj.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(LineProblem::NotAString(key))),
        };
        let response = match string("response")? {
            Some(r) => r,
            None if !gold => string("reply")?.ok_or_else(|| bad(LineProblem::NoResponse { or_reply: true }))?,
            None => return Err(bad(LineProblem::NoResponse { or_reply: false })),
        };
        let knowledge = if gold { string("knowledge")? } else { None };
        let entities = match obj.get("entities") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Array(names)) => Some(
                names
                    .iter()
                    .map(|n| n.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(LineProblem::NotAListOfStrings("entities")))?,
            ),
            Some(_) => return Err(bad(LineProblem::NotAListOfStrings("entities"))),
        };
        out.push(Line { line, id, response, knowledge, entities });
    }
}

// ---------------------------------------------------------------------------------------------
// Python's text semantics.

/// `str.isspace()`: Unicode White_Space, and the information separators U+001C..U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `str.split()`.
fn py_split(s: &str) -> impl Iterator<Item = &str> {
    s.split(py_space).filter(|t| !t.is_empty())
}

/// A character of regex `\w` in Python (`str.isalnum()` or `_`): letters and numbers, not the
/// marks and the enclosed letters that Unicode's Alphabetic property adds.
fn py_word(c: char) -> bool {
    if c == '_' {
        return true;
    }
    c.is_alphanumeric()
        && !unicode_normalization::char::is_combining_mark(c)
        && !matches!(c, '\u{24b6}'..='\u{24e9}' | '\u{1f130}'..='\u{1f149}' | '\u{1f150}'..='\u{1f169}' | '\u{1f170}'..='\u{1f189}')
}

// ---------------------------------------------------------------------------------------------
// N-grams.

/// Counts of the n-grams of `tokens`.
fn ngram_counts<T: Eq + Hash>(tokens: &[T], n: usize) -> HashMap<&[T], usize> {
    let mut counts = HashMap::new();
    if n > 0 && tokens.len() >= n {
        for g in tokens.windows(n) {
            *counts.entry(g).or_insert(0) += 1;
        }
    }
    counts
}

/// Matches of the prediction's n-grams in the reference, each clipped to its count there.
fn clipped_matches<T: Eq + Hash>(prediction: &[T], reference: &[T], n: usize) -> usize {
    let refs = ngram_counts(reference, n);
    ngram_counts(prediction, n).into_iter().map(|(g, c)| c.min(refs.get(g).copied().unwrap_or(0))).sum()
}

fn ngram_total(len: usize, n: usize) -> usize {
    (len + 1).saturating_sub(n)
}

// ---------------------------------------------------------------------------------------------
// sacrebleu.

/// mteval-v13a tokenization as sacrebleu's `Tokenizer13a` (after its `rstrip()`).
fn tokenize_13a(text: &str) -> Vec<String> {
    let mut line = text.trim_end_matches(py_space).replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    }
    let padded: Vec<char> = format!(" {line} ").chars().collect();
    // 1. Punctuation and symbols (ASCII, other than `'`, `,`, `-` and `.`) stand alone.
    let mut s = Vec::with_capacity(padded.len() * 2);
    for c in padded {
        if matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/') {
            s.extend([' ', c, ' ']);
        } else {
            s.push(c);
        }
    }
    // 2.-4. Pairs of characters, matched left to right without overlap (as `re.sub`).
    let s = sub_pairs(&s, |a, b| !a.is_ascii_digit() && matches!(b, '.' | ','), |a, b| [a, ' ', b, ' ']);
    let s = sub_pairs(&s, |a, b| matches!(a, '.' | ',') && !b.is_ascii_digit(), |a, b| [' ', a, ' ', b]);
    let s = sub_pairs(&s, |a, b| a.is_ascii_digit() && b == '-', |a, b| [a, ' ', b, ' ']);
    let s: String = s.into_iter().collect();
    py_split(&s).map(str::to_string).collect()
}

/// `re.sub` of a two-character pattern: at each position, a match is replaced and the scan
/// goes on after it.
fn sub_pairs(s: &[char], matches: impl Fn(char, char) -> bool, replace: impl Fn(char, char) -> [char; 4]) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len() + s.len() / 2);
    let mut i = 0;
    while i < s.len() {
        if i + 1 < s.len() && matches(s[i], s[i + 1]) {
            out.extend(replace(s[i], s[i + 1]));
            i += 2;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// Corpus statistics for n-gram orders 1..4: matches, totals, and the two lengths.
#[derive(Default)]
struct Stats {
    correct: [u64; 4],
    total: [u64; 4],
    /// nltk's denominators: per sentence at least 1.
    total_min1: [u64; 4],
    hyp_len: u64,
    ref_len: u64,
}

fn corpus_stats(tokenized: impl Iterator<Item = (Vec<String>, Vec<String>)>) -> Stats {
    let mut st = Stats::default();
    for (hyp, reference) in tokenized {
        st.hyp_len += hyp.len() as u64;
        st.ref_len += reference.len() as u64;
        for n in 1..=4 {
            let total = ngram_total(hyp.len(), n) as u64;
            st.total[n - 1] += total;
            st.total_min1[n - 1] += total.max(1);
            st.correct[n - 1] += clipped_matches(&hyp, &reference, n) as u64;
        }
    }
    st
}

fn sacrebleu(pairs: &[ResponsePair]) -> Bleu {
    let st = corpus_stats(pairs.iter().map(|p| (tokenize_13a(&p.prediction), tokenize_13a(&p.reference))));
    let b = |n| sacrebleu_score(&st, n) / 100.0;
    Bleu { bleu1: b(1), bleu2: b(2), bleu3: b(3), bleu4: b(4) }
}

/// sacrebleu's `BLEU.compute_bleu` (smoothing "exp", effective order off) on orders 1..=order,
/// on its 0..100 scale.
fn sacrebleu_score(st: &Stats, order: usize) -> f64 {
    let (sys, reference) = (st.hyp_len, st.ref_len);
    let mut bp = 1.0;
    if sys < reference {
        bp = if sys > 0 { (1.0 - reference as f64 / sys as f64).exp() } else { 0.0 };
    }
    if st.correct[..order].iter().all(|&c| c == 0) {
        return 0.0;
    }
    let mut precisions = [0.0f64; 4];
    let mut smooth = 1.0f64;
    for (n, p) in precisions.iter_mut().enumerate().take(order) {
        if st.total[n] == 0 {
            break;
        }
        *p = if st.correct[n] == 0 {
            smooth *= 2.0;
            100.0 / (smooth * st.total[n] as f64)
        } else {
            100.0 * st.correct[n] as f64 / st.total[n] as f64
        };
    }
    // sacrebleu's `my_log` floors log(0) at -9999999999.
    let sum = precisions[..order].iter().fold(0.0, |s, &p| s + if p == 0.0 { -9_999_999_999.0 } else { p.ln() });
    bp * (sum / order as f64).exp()
}

// ---------------------------------------------------------------------------------------------
// nltk.

fn nltk_bleu(pairs: &[ResponsePair]) -> Bleu {
    let lower_split = |s: &str| py_split(&s.to_lowercase()).map(str::to_string).collect::<Vec<_>>();
    let st = corpus_stats(pairs.iter().map(|p| (lower_split(&p.prediction), lower_split(&p.reference))));
    let b = |n| nltk_score(&st, n, None);
    Bleu { bleu1: b(1), bleu2: b(2), bleu3: b(3), bleu4: b(4) }
}

/// The DialogGSR authors' BLEU: raw whitespace tokens, `method1` smoothing with epsilon 1e-12.
fn dialoggsr_bleu(pairs: &[ResponsePair]) -> Bleu {
    let split = |s: &str| py_split(s).map(str::to_string).collect::<Vec<_>>();
    let st = corpus_stats(pairs.iter().map(|p| (split(&p.prediction), split(&p.reference))));
    let b = |n| nltk_score(&st, n, Some(1e-12));
    Bleu { bleu1: b(1), bleu2: b(2), bleu3: b(3), bleu4: b(4) }
}

/// nltk's `corpus_bleu` with uniform weights over orders 1..=order, and `method0` smoothing
/// (`epsilon` None) or `SmoothingFunction(epsilon).method1`.
fn nltk_score(st: &Stats, order: usize, epsilon: Option<f64>) -> f64 {
    if st.correct[0] == 0 {
        return 0.0;
    }
    let w = 1.0 / order as f64;
    let terms: Vec<f64> = (0..order)
        .map(|n| {
            let p = match (st.correct[n], epsilon) {
                // method0: an order without matches counts as the smallest positive double.
                (0, None) => f64::MIN_POSITIVE,
                // method1: epsilon matches instead of none.
                (0, Some(e)) => e / st.total_min1[n] as f64,
                (c, _) => c as f64 / st.total_min1[n] as f64,
            };
            w * p.ln()
        })
        .collect();
    let (hyp, reference) = (st.hyp_len, st.ref_len);
    let bp = if hyp > reference {
        1.0
    } else if hyp == 0 {
        0.0
    } else {
        (1.0 - reference as f64 / hyp as f64).exp()
    };
    bp * fsum(&terms).exp()
}

/// Python's `math.fsum`: the correctly rounded sum (Shewchuk's partials, then the final
/// rounding made half-even as CPython does).
fn fsum(xs: &[f64]) -> f64 {
    let mut partials: Vec<f64> = Vec::new();
    for &x0 in xs {
        let mut x = x0;
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        partials.push(x);
    }
    let Some(mut n) = partials.len().checked_sub(1) else { return 0.0 };
    let mut hi = partials[n];
    let mut lo = 0.0;
    while n > 0 {
        let x = hi;
        n -= 1;
        let y = partials[n];
        hi = x + y;
        lo = y - (hi - x);
        if lo != 0.0 {
            break;
        }
    }
    if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
        let y = lo * 2.0;
        let x = hi + y;
        if y == x - hi {
            hi = x;
        }
    }
    hi
}

// ---------------------------------------------------------------------------------------------
// rouge-score.

/// rouge-score's default tokenizer: lowercase, runs of characters other than `a-z0-9` split,
/// tokens longer than 3 characters stemmed when asked.
fn rouge_tokens(text: &str, stem: bool) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(|t| if stem && t.len() > 3 { crate::porter::stem(t) } else { t.to_string() })
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
        .collect()
}

/// rouge-score's F-measure.
fn fmeasure(precision: f64, recall: f64) -> f64 {
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// ROUGE-1, ROUGE-2 and ROUGE-L F-measures of one pair.
fn rouge_pair(reference: &str, prediction: &str, stem: bool) -> [f64; 3] {
    let target = rouge_tokens(reference, stem);
    let pred = rouge_tokens(prediction, stem);
    let rouge_n = |n| {
        let overlap = clipped_matches(&pred, &target, n);
        let p = overlap as f64 / ngram_total(pred.len(), n).max(1) as f64;
        let r = overlap as f64 / ngram_total(target.len(), n).max(1) as f64;
        fmeasure(p, r)
    };
    let rouge_l = if target.is_empty() || pred.is_empty() {
        0.0
    } else {
        let lcs = lcs_len(&target, &pred);
        fmeasure(lcs as f64 / pred.len() as f64, lcs as f64 / target.len() as f64)
    };
    [rouge_n(1), rouge_n(2), rouge_l]
}

/// Length of the longest common subsequence (two rows of the table).
fn lcs_len<T: Eq>(a: &[T], b: &[T]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    let mut cur = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y { prev[j] + 1 } else { prev[j + 1].max(cur[j]) };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

// ---------------------------------------------------------------------------------------------
// F1, KF1, distinct.

/// SQuAD's `normalize_answer`, split: lowercase, ASCII punctuation deleted, the words `a`,
/// `an`, `the` (whole runs of word characters) replaced by a space, whitespace tokens.
fn squad_tokens(text: &str) -> Vec<String> {
    let lower: String = text.to_lowercase().chars().filter(|c| !c.is_ascii_punctuation()).collect();
    let mut out = String::with_capacity(lower.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if matches!(word.as_str(), "a" | "an" | "the") {
            out.push(' ');
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in lower.chars() {
        if py_word(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    py_split(&out).map(str::to_string).collect()
}

/// Unigram F1 of two texts' SQuAD tokens; 0 when they share none.
fn unigram_f1(prediction: &str, reference: &str) -> f64 {
    let p = squad_tokens(prediction);
    let g = squad_tokens(reference);
    let same = clipped_matches(&p, &g, 1);
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Distinct n-grams / all n-grams of the predictions' lowercased whitespace tokens.
fn distinct(pairs: &[ResponsePair], n: usize) -> f64 {
    let lowered: Vec<String> = pairs.iter().map(|p| p.prediction.to_lowercase()).collect();
    let mut seen: HashSet<Vec<&str>> = HashSet::new();
    let mut total = 0usize;
    for text in &lowered {
        let tokens: Vec<&str> = py_split(text).collect();
        if tokens.len() >= n {
            for g in tokens.windows(n) {
                total += 1;
                seen.insert(g.to_vec());
            }
        }
    }
    if total == 0 {
        0.0
    } else {
        seen.len() as f64 / total as f64
    }
}

/// The grounding figures: which knowledge entities each prediction and reference name, by the
/// delexicalizer's matching.
fn grounding(pairs: &[ResponsePair]) -> Grounding {
    let (mut with, mut named, mut ref_named, mut both, mut by_ref) = (0usize, 0usize, 0usize, 0usize, 0usize);
    for p in pairs {
        let names: Vec<&str> = p.entities.iter().flatten().map(String::as_str).filter(|n| !n.is_empty()).collect();
        if names.is_empty() {
            continue;
        }
        with += 1;
        let pred = mentions(&p.prediction, &names);
        let reference = mentions(&p.reference, &names);
        named += usize::from(pred.contains(&true));
        ref_named += usize::from(reference.contains(&true));
        by_ref += reference.iter().filter(|&&r| r).count();
        both += pred.iter().zip(&reference).filter(|(&a, &b)| a && b).count();
    }
    let share = |k: usize, of: usize| (of > 0).then(|| k as f64 / of as f64);
    Grounding {
        pairs: with,
        mention_rate: share(named, with),
        reference_mention_rate: share(ref_named, with),
        entity_recall: share(both, by_ref),
        reference_mentions: by_ref,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(p: &str, r: &str, k: Option<&str>) -> ResponsePair {
        ResponsePair { prediction: p.into(), reference: r.into(), knowledge: k.map(Into::into), entities: None }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn empty_corpus_is_an_error() {
        assert!(matches!(score(&[]), Err(ResponsesError::NoPairs)));
    }

    /// Worked by hand.
    ///
    /// prediction "the cat sat on the mat", reference "the cat is on the mat".
    /// Tokens (13a and lowercased split agree here): 6 and 6, so BP = 1.
    /// 1-grams: the×2 cat sat on mat vs the×2 cat is on mat: matches the 2, cat, on, mat = 5 of 6.
    /// 2-grams: "the cat" "cat sat" "sat on" "on the" "the mat": matches "the cat", "on the",
    ///   "the mat" = 3 of 5.
    /// 3-grams: "the cat sat" "cat sat on" "sat on the" "on the mat": matches "on the mat" = 1 of 4.
    /// 4-grams: 3, no match.
    /// nltk BLEU-1 = 5/6; BLEU-2 = sqrt(5/6 * 3/5) = sqrt(1/2); BLEU-3 = (5/6 * 3/5 * 1/4)^(1/3)
    ///   = (1/8)^(1/3) = 1/2; BLEU-4 = (1/8 * 2.2e-308)^(1/4), about 1e-77.
    /// sacrebleu: the same for n <= 3; BLEU-4 smooths the 4-gram precision to 1/(2*3) = 1/6:
    ///   (1/8 * 1/6)^(1/4) = (1/48)^(1/4).
    /// ROUGE-1: 5 common of 6 and 6: P = R = F = 5/6; ROUGE-2: 3/5; ROUGE-L: LCS "the cat on the
    ///   mat" = 5: 5/6.
    /// F1: SQuAD drops "the": "cat sat on mat" vs "cat is on mat": 3 common of 4 and 4: 3/4.
    /// KF1 against "cat": 1 common, P = 1/4, R = 1: 2 * 1/4 / (5/4) = 2/5.
    /// distinct-1: 5 distinct of 6 tokens; distinct-2: 5 distinct of 5.
    #[test]
    fn hand_worked_example() {
        let s = score(&[pair("the cat sat on the mat", "the cat is on the mat", Some("cat"))]).unwrap();
        assert!(close(s.bleu_nltk.bleu1, 5.0 / 6.0));
        assert!(close(s.bleu_nltk.bleu2, 0.5f64.sqrt()));
        assert!(close(s.bleu_nltk.bleu3, 0.5));
        assert!(s.bleu_nltk.bleu4 > 0.0 && s.bleu_nltk.bleu4 < 1e-70);
        assert!(close(s.bleu_sacrebleu.bleu1, 5.0 / 6.0));
        assert!(close(s.bleu_sacrebleu.bleu2, 0.5f64.sqrt()));
        assert!(close(s.bleu_sacrebleu.bleu3, 0.5));
        assert!(close(s.bleu_sacrebleu.bleu4, (1.0f64 / 48.0).powf(0.25)));
        // DialogGSR's: nltk's for n <= 3; the 4-gram precision smoothed to 1e-12 / 3.
        assert!(close(s.bleu_dialoggsr.bleu3, 0.5));
        assert!(close(s.bleu_dialoggsr.bleu4, (1.0f64 / 8.0 * 1e-12 / 3.0).powf(0.25)));
        assert_eq!((s.distinct_replies, s.distinct_replies_share), (1, 1.0));
        for r in [s.rouge, s.rouge_stemmed] {
            assert!(close(r.rouge1, 5.0 / 6.0) && close(r.rouge2, 3.0 / 5.0) && close(r.rouge_l, 5.0 / 6.0), "{r:?}");
        }
        assert!(close(s.f1, 0.75));
        assert_eq!(s.kf1_pairs, 1);
        assert!(close(s.kf1.unwrap(), 0.4));
        assert!(close(s.distinct_1, 5.0 / 6.0));
        assert!(close(s.distinct_2, 1.0));
    }

    /// Brevity: prediction "a b" against "a b c d" (4 tokens): BP = exp(1 - 4/2) = 1/e, and
    /// BLEU-1 = BP * 2/2 = 1/e in both. Knowledge "" does not count for KF1.
    #[test]
    fn brevity_penalty_and_no_knowledge() {
        let s = score(&[pair("a b", "a b c d", Some(""))]).unwrap();
        let e = (-1.0f64).exp();
        assert!(close(s.bleu_nltk.bleu1, e) && close(s.bleu_sacrebleu.bleu1, e));
        assert_eq!((s.kf1, s.kf1_pairs), (None, 0));
    }

    /// Grounding by hand. Pair 1: entities "Stephen King", "It"; the reference names both
    /// ("It" with its capital), the prediction only "stephen king". Pair 2: "Golf"; the
    /// reference names none, the prediction names it. Pair 3: no knowledge (left out).
    /// Mention rate 2/2, references 1/2; recall 1 / 2 (pair 2 adds nothing to either side).
    /// Distinct replies: "a" twice, so 2 of 3. DialogGSR's BLEU keeps case: "Golf" is not "golf".
    #[test]
    fn grounding_and_distinct_replies_by_hand() {
        let mut pairs =
            vec![pair("stephen king wrote it", "It is by Stephen King", None), pair("a Golf", "sports", None), pair("a Golf", "Stephen King", None)];
        pairs[0].entities = Some(vec!["Stephen King".into(), "It".into()]);
        pairs[1].entities = Some(vec!["Golf".into(), "".into()]);
        let s = score(&pairs).unwrap();
        let g = s.grounding;
        assert_eq!((g.pairs, g.mention_rate, g.reference_mention_rate), (2, Some(1.0), Some(0.5)));
        assert_eq!((g.entity_recall, g.reference_mentions), (Some(0.5), 2));
        assert_eq!(s.distinct_replies, 2);
        assert!(close(s.distinct_replies_share, 2.0 / 3.0));
        let b = score(&[pair("Golf", "golf", None)]).unwrap();
        assert_eq!((b.bleu_dialoggsr.bleu1, b.bleu_nltk.bleu1), (0.0, 1.0));
        assert_eq!(score(&[pair("x", "x", None)]).unwrap().grounding, Grounding::default());
    }

    #[test]
    fn empty_and_odd_texts_do_not_panic() {
        let odd = ["", " ", "\u{1c}\t\n", "&amp;&", "...", "<skipped>", "日本語のテキスト", "ΟΔΟΣ", "🗽🗽", "a", "the the", "\u{0}", "1-", "-\n"];
        let mut pairs = Vec::new();
        for p in odd {
            for r in odd {
                pairs.push(pair(p, r, Some(r)));
            }
        }
        for chunk in std::iter::once(&pairs[..]).chain(pairs.chunks(1)) {
            let s = score(chunk).unwrap();
            let v = serde_json::to_value(&s).unwrap();
            assert!(v.to_string().len() > 10);
            for x in [s.bleu_sacrebleu.bleu4, s.bleu_nltk.bleu4, s.rouge.rouge_l, s.f1, s.distinct_1, s.distinct_2] {
                assert!(x.is_finite() && (0.0..=1.0).contains(&x), "{x}");
            }
        }
        let s = score(&[pair("", "", None)]).unwrap();
        assert_eq!(s.bleu_sacrebleu, Bleu::default());
        assert_eq!(s.bleu_nltk, Bleu::default());
        assert_eq!((s.f1, s.kf1, s.distinct_1), (0.0, None, 0.0));
    }

    #[test]
    fn tokenizer_13a() {
        let t = |s: &str| tokenize_13a(s).join(" ");
        assert_eq!(t("Hello, world."), "Hello , world .");
        assert_eq!(t("It costs $3.50, ok"), "It costs $ 3.50 , ok");
        assert_eq!(t("1,000.5 U.S.A."), "1,000.5 U . S . A .");
        assert_eq!(t("a-b 1-2 don't"), "a-b 1 - 2 don't");
        assert_eq!(t("&lt;b&gt; &amp;quot;"), "< b > & quot ;");
        assert_eq!(t("x-\ny\nz<skipped>"), "xy z");
    }

    #[test]
    fn squad_normalization() {
        assert_eq!(squad_tokens("The cat's hat, an apple & A pear!"), ["cats", "hat", "apple", "pear"]);
        // Articles go only as whole words; `’` and `—` are not word characters, marks are not.
        assert_eq!(squad_tokens("theater a’s an—b the\u{301}"), ["theater", "’s", "—b", "\u{301}"]);
        assert_eq!(squad_tokens("Ⓐthe"), ["ⓐ"]);
    }

    #[test]
    fn fsum_is_correctly_rounded() {
        assert_eq!(fsum(&[0.1; 10]), 1.0);
        assert_eq!(fsum(&[1e100, 1.0, -1e100, 1e-100]), 1.0);
        assert_eq!(fsum(&[]), 0.0);
        assert_eq!(fsum(&[1.0, 1e-16, 1e-16]), 1.0000000000000002);
    }

    #[test]
    fn read_pairs_matches_ids_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let gold = write("gold.jsonl", "{\"id\": \"b\", \"response\": \"B\", \"knowledge\": \"kb\"}\n\n{\"id\": 7, \"response\": \"S\"}\n");
        let pred = write("pred.jsonl", "{\"id\": 7, \"reply\": \"s\"}\n{\"id\": \"b\", \"response\": \"b\"}\n");
        let pairs = read_pairs(&pred, &gold).unwrap();
        assert_eq!(pairs, vec![pair("b", "B", Some("kb")), pair("s", "S", None)]);
        // Entities: the prediction's when it has them, else the gold line's.
        let gold_e =
            write("gold-e.jsonl", "{\"id\": 1, \"response\": \"B\", \"entities\": [\"G\"]}\n{\"id\": 2, \"response\": \"S\", \"entities\": [\"H\"]}\n");
        let pred_e = write("pred-e.jsonl", "{\"id\": 1, \"reply\": \"b\", \"entities\": [\"P\"]}\n{\"id\": 2, \"reply\": \"s\", \"entities\": null}\n");
        let e: Vec<_> = read_pairs(&pred_e, &gold_e).unwrap().into_iter().map(|p| p.entities).collect();
        assert_eq!(e, [Some(vec!["P".to_string()]), Some(vec!["H".to_string()])]);

        let line_of = |pred: &Path, gold: &Path| match read_pairs(pred, gold) {
            Err(ResponsesError::Bad { path, line, problem }) => (path.file_name().unwrap().to_string_lossy().into_owned(), line, problem.to_string()),
            other => panic!("{other:?}"),
        };
        let extra = write("extra.jsonl", "{\"id\": 7, \"reply\": \"s\"}\n{\"id\": \"b\", \"response\": \"b\"}\n{\"id\": \"c\", \"response\": \"c\"}\n");
        assert_eq!(line_of(&extra, &gold).0, "extra.jsonl");
        assert_eq!(line_of(&extra, &gold).1, 3);
        let missing = write("missing.jsonl", "{\"id\": 7, \"reply\": \"s\"}\n");
        assert_eq!(line_of(&missing, &gold).1, 1);
        assert_eq!(line_of(&missing, &gold).0, "gold.jsonl");
        let dup = write("dup.jsonl", "{\"id\": 7, \"reply\": \"s\"}\n{\"id\": 7, \"reply\": \"s\"}\n");
        assert!(line_of(&dup, &gold).2.contains("first on line 1"));
        let broken = write("broken.jsonl", "{\"id\": 7, \"reply\": \"s\"}\n{\"id\": \"b\", \"response\": 3}\n");
        assert_eq!(line_of(&broken, &gold).1, 2);
        let no_response = write("nr.jsonl", "{\"id\": 7}\n");
        assert_eq!(line_of(&no_response, &gold).2, "no \"response\" (or \"reply\")");
        let not_json = write("nj.jsonl", "{\"id\": 7\n");
        assert_eq!(line_of(&not_json, &gold).1, 1);
        let bad_utf8 = dir.path().join("utf8.jsonl");
        std::fs::write(&bad_utf8, b"{\"id\": 7, \"reply\": \"\xff\"}\n").unwrap();
        assert!(line_of(&bad_utf8, &gold).2.contains("UTF-8"));
        assert!(matches!(read_pairs(&dir.path().join("nope"), &gold), Err(ResponsesError::Io { .. })));
    }
}
