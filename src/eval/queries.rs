//! `trellis eval queries`: the query producer's evaluation in the shape of the paper's
//! Table 1, on OpenDialKG turns with a gold path.
//!
//! **Gold documents** of a turn (the paper's gold is the Wikipedia article the wizard read):
//! the entity documents of the gold path's entities that the reply introduces, chosen as
//! follows: (1) every head and tail of the gold path, in path order, that the store holds;
//! (2) minus those the context already mentions (linked in a context message, or whose
//! normalized name occurs in the normalized context); (3) of those left, the ones whose
//! normalized name occurs in the normalized reply, or all left when none does. A turn where
//! (2) leaves nothing (the path only joins entities the dialog had named) is excluded and
//! counted, as the paper excludes turns without a checked passage.
//!
//! On Wizard of Wikipedia (a sample with gold titles, [`crate::dataset::wow`]) the gold
//! documents are those of the entities the titles name ([`crate::text::documents::entity_of`]),
//! none excluded for being named before (the paper's rule); a turn whose titles name no
//! entity counts as not in the store.
//!
//! **R@x**: the share of turns where one of the top x candidates, as a producer ranks them,
//! retrieves a gold document among its top 5. **Ceiling R@M**: where any candidate does.
//! **Fact R@x**: the same with "a top-5 document holding a fact of the gold path" (in either
//! direction) as the hit: in a graph the knowledge a reply uses usually sits in the document
//! of the entity the dialog names (the fact "Jordan Spieth plays Golf" is in Jordan Spieth's
//! document), while a hub the reply introduces ("Golf") holds too many facts to name it.
//! Rows: random, TF-IDF (mean idf of the query's words), BM25(q,u) (the candidate's words
//! against the reply), the BM25 and BM25++ label functions (which read the gold reply: upper
//! references, as in the paper), and the learned producer when given.

use crate::dataset::opendialkg::Dialog;
use crate::dialog::Message;
use crate::ids::EntityId;
use crate::normalize::normalize_name;
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::queries::{bm25_query_reply, label_scores, rank_by, LabelFunction, Producer, QueryEngine, QueryError, TurnQueries};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashSet};

/// Cut-offs reported.
pub const CUTOFFS: [usize; 3] = [1, 3, 5];

/// One row of the table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QueryRow {
    /// The producer or label function.
    pub name: String,
    /// R@1, R@3, R@5 (by cut-off).
    pub recall_at: BTreeMap<usize, f64>,
    /// Fact R@1, R@3, R@5: a top document holds a fact of the gold path.
    pub fact_recall_at: BTreeMap<usize, f64>,
}

/// The evaluation's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QueryReport {
    /// Turns scored.
    pub turns: usize,
    /// Turns excluded: the gold path names only entities the context mentions.
    pub excluded_no_new_entity: usize,
    /// Turns excluded: no entity of the gold path is in the store.
    pub excluded_not_in_store: usize,
    /// Candidates per scored turn, on average.
    pub mean_candidates: f64,
    /// The share of scored turns where some candidate retrieves a gold document.
    pub ceiling: f64,
    /// The same for a document holding a gold fact.
    pub fact_ceiling: f64,
    /// The rows.
    pub rows: Vec<QueryRow>,
    /// Searches run, and their latency.
    pub searches: u64,
    /// Wall time of the whole evaluation, seconds.
    pub seconds: f64,
}

/// One scored turn, for training the learned producer (`--features`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct TurnRecord {
    /// Dialog index in the file, and the turn's place in it (messages before it).
    pub dialog: usize,
    /// Messages before the turn.
    pub upto: usize,
    /// The gold entities' names.
    pub gold: Vec<String>,
    /// The candidates' texts.
    pub candidates: Vec<String>,
    /// The names of each candidate's top documents.
    pub retrieved: Vec<Vec<String>>,
    /// Their feature vectors (`queries::FEATURE_NAMES` order).
    pub features: Vec<[f32; 11]>,
    /// BM25 label of each.
    pub bm25: Vec<f64>,
    /// BM25++ label of each.
    pub bm25pp: Vec<f64>,
    /// Whether each retrieves a gold document.
    pub hits: Vec<bool>,
    /// Whether each retrieves a document holding a gold fact.
    pub fact_hits: Vec<bool>,
}

enum Outcome {
    Scored { ranks: Vec<[Option<usize>; 2]>, candidates: usize, hit_any: [bool; 2], record: Option<Box<TurnRecord>> },
    NoNewEntity,
    NotInStore,
}

/// The gold entities of a turn (see the module's rule); `Err(true)`: none in the store,
/// `Err(false)`: none new.
fn gold_entities(
    engine: &QueryEngine,
    path: &[(String, String, String)],
    context: &[Message],
    mentions: &[crate::link::Mention],
    reply: &str,
) -> Result<Result<Vec<EntityId>, bool>, QueryError> {
    let store = engine.linker().store();
    let mut entities: Vec<(EntityId, String)> = Vec::new();
    for (h, _, t) in path {
        for name in [h, t] {
            if let Some(e) = store.entity_by_key(name)? {
                if !entities.iter().any(|(x, _)| *x == e) {
                    entities.push((e, normalize_name(name)));
                }
            }
        }
    }
    if entities.is_empty() {
        return Ok(Err(true));
    }
    let linked: HashSet<u32> = mentions.iter().flat_map(|m| m.entities.iter().map(|e| e.id)).collect();
    let context_text = format!(" {} ", normalize_name(&context.iter().map(|m| m.text.as_str()).collect::<Vec<_>>().join(" ")));
    let occurs = |text: &str, name: &str| !name.is_empty() && text.contains(&format!(" {name} "));
    let new: Vec<(EntityId, String)> = entities.into_iter().filter(|(e, n)| !linked.contains(&e.0) && !occurs(&context_text, n)).collect();
    if new.is_empty() {
        return Ok(Err(false));
    }
    let reply_text = format!(" {} ", normalize_name(reply));
    let named: Vec<EntityId> = new.iter().filter(|(_, n)| occurs(&reply_text, n)).map(|(e, _)| *e).collect();
    Ok(Ok(if named.is_empty() { new.into_iter().map(|(e, _)| e).collect() } else { named }))
}

/// The gold entities of a turn whose gold is titles; `Err(true)`: none in the store.
fn gold_titles(engine: &QueryEngine, titles: &[String]) -> Result<Result<Vec<EntityId>, bool>, QueryError> {
    let mut out = Vec::new();
    for t in titles {
        if let Some(e) = crate::text::documents::entity_of(engine.linker().store(), t)? {
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    Ok(if out.is_empty() { Err(true) } else { Ok(out) })
}

/// Whether `doc` holds a fact of the gold path (either direction; a relation's reverse
/// prefix ignored).
fn holds_gold_fact(doc: &crate::text::EntityDocument, gold: &[(String, String, String)]) -> bool {
    let bare = |r: &str| r.trim_start_matches('~').to_owned();
    doc.facts.iter().any(|f| {
        let (s, r, o) = f.triple(&doc.name);
        gold.iter().any(|(h, gr, t)| bare(gr) == bare(r) && ((h == s && t == o) || (h == o && t == s)))
    })
}

/// The rank (from 0) of the first candidate in `order` that retrieves gold; `None`: none.
fn first_hit(order: &[usize], hits: &[bool]) -> Option<usize> {
    order.iter().position(|&i| hits[i])
}

/// Scores the producers on the samples of `dialogs`. `learned` adds its row; `records`
/// asks for each scored turn's features and labels.
pub fn evaluate(
    engine: &QueryEngine,
    dialogs: &[Dialog],
    learned: Option<&Producer>,
    records: bool,
    monitor: &Monitor,
) -> Result<(QueryReport, Vec<TurnRecord>), QueryError> {
    let started = std::time::Instant::now();
    let total: u64 = dialogs.iter().map(|d| d.samples.len() as u64).sum();
    let done = std::sync::atomic::AtomicU64::new(0);
    let mut producers: Vec<(String, Producer)> = vec![("random".into(), Producer::Random { seed: 0 }), ("tfidf".into(), Producer::TfIdf)];
    if let Some(p) = learned {
        producers.push(("learned".into(), p.clone()));
    }
    let per_dialog: Vec<Result<Vec<Outcome>, QueryError>> = dialogs
        .par_iter()
        .enumerate()
        .map(|(di, d)| {
            if monitor.is_cancelled() {
                return Ok(Vec::new());
            }
            let mentions = engine.linker().link_dialog(&d.messages)?;
            let mut out = Vec::new();
            for s in &d.samples {
                let Some(reply) = d.messages.get(s.upto) else { continue };
                let context = &d.messages[..s.upto];
                let ctx_mentions: Vec<_> = mentions.iter().filter(|m| m.message < s.upto).cloned().collect();
                let found = if s.documents.is_empty() {
                    gold_entities(engine, &s.gold, context, &ctx_mentions, &reply.text)?
                } else {
                    gold_titles(engine, &s.documents)?
                };
                let gold = match found {
                    Ok(g) => g,
                    Err(true) => {
                        out.push(Outcome::NotInStore);
                        continue;
                    }
                    Err(false) => {
                        out.push(Outcome::NoNewEntity);
                        continue;
                    }
                };
                let turn: TurnQueries = engine.turn(context, &ctx_mentions)?;
                let hits: Vec<bool> = turn.results.iter().map(|r| r.iter().any(|h| gold.contains(&h.entity))).collect();
                let fact_hits: Vec<bool> = turn.results.iter().map(|r| r.iter().any(|h| holds_gold_fact(&h.document, &s.gold))).collect();
                let key = ((di as u64) << 20) ^ s.upto as u64;
                let bm25qu = bm25_query_reply(&turn, &reply.text);
                let bm25 = label_scores(&turn, &reply.text, &ctx_mentions, LabelFunction::Bm25);
                let bm25pp = label_scores(&turn, &reply.text, &ctx_mentions, LabelFunction::Bm25PlusPlus);
                let orders: Vec<Vec<usize>> =
                    producers.iter().map(|(_, p)| p.rank(&turn, key)).chain([&bm25qu, &bm25, &bm25pp].into_iter().map(|s| rank_by(s))).collect();
                let ranks: Vec<[Option<usize>; 2]> = orders.iter().map(|o| [first_hit(o, &hits), first_hit(o, &fact_hits)]).collect();
                let record = if !records {
                    None
                } else {
                    Some(Box::new(TurnRecord {
                        dialog: di,
                        upto: s.upto,
                        gold: engine.linker().store().entity_names(&gold)?.into_iter().flatten().collect(),
                        candidates: turn.candidates.iter().map(|c| c.text.clone()).collect(),
                        retrieved: turn.results.iter().map(|r| r.iter().map(|h| h.document.name.clone()).collect()).collect(),
                        features: turn.candidates.iter().map(|c| c.features.vector()).collect(),
                        bm25: bm25.clone(),
                        bm25pp: bm25pp.clone(),
                        hits: hits.clone(),
                        fact_hits: fact_hits.clone(),
                    }))
                };
                out.push(Outcome::Scored { ranks, candidates: turn.candidates.len(), hit_any: [hits.contains(&true), fact_hits.contains(&true)], record });
            }
            let n = done.fetch_add(d.samples.len() as u64, std::sync::atomic::Ordering::Relaxed) + d.samples.len() as u64;
            monitor.report(&Progress::new(Work::Evaluate, (1, 1), "turns", n, Some(total), Unit::Turns));
            Ok(out)
        })
        .collect();
    if monitor.is_cancelled() {
        return Err(QueryError::Text(crate::text::TextError::Cancelled));
    }
    let mut names: Vec<String> = producers.iter().map(|(n, _)| n.clone()).collect();
    names.extend(["bm25(q,u)".to_owned(), "bm25 label".to_owned(), "bm25++ label".to_owned()]);
    let mut counts = vec![[[0usize; 3]; 2]; names.len()];
    let (mut turns, mut no_new, mut not_in_store, mut candidates, mut ceiling) = (0usize, 0usize, 0usize, 0usize, [0usize; 2]);
    let mut kept = Vec::new();
    for outcomes in per_dialog {
        for o in outcomes? {
            match o {
                Outcome::NoNewEntity => no_new += 1,
                Outcome::NotInStore => not_in_store += 1,
                Outcome::Scored { ranks, candidates: n, hit_any, record } => {
                    turns += 1;
                    candidates += n;
                    for g in 0..2 {
                        ceiling[g] += usize::from(hit_any[g]);
                        for (row, rank) in counts.iter_mut().zip(&ranks) {
                            for (slot, &k) in row[g].iter_mut().zip(&CUTOFFS) {
                                *slot += usize::from(rank[g].is_some_and(|r| r < k));
                            }
                        }
                    }
                    kept.extend(record.map(|r| *r));
                }
            }
        }
    }
    let share = |n: usize| if turns == 0 { 0.0 } else { n as f64 / turns as f64 };
    let rows = names
        .into_iter()
        .zip(&counts)
        .map(|(name, c)| QueryRow {
            name,
            recall_at: CUTOFFS.iter().zip(&c[0]).map(|(&k, &n)| (k, share(n))).collect(),
            fact_recall_at: CUTOFFS.iter().zip(&c[1]).map(|(&k, &n)| (k, share(n))).collect(),
        })
        .collect();
    let report = QueryReport {
        turns,
        excluded_no_new_entity: no_new,
        excluded_not_in_store: not_in_store,
        mean_candidates: if turns == 0 { 0.0 } else { candidates as f64 / turns as f64 },
        ceiling: share(ceiling[0]),
        fact_ceiling: share(ceiling[1]),
        rows,
        searches: candidates as u64,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((report, kept))
}
