//! `trellis eval retrieval`: retrievers scored on dialog turns with gold paths
//! (definitions in method-notes.md and docs/retrieval.md, "Metrics").

use crate::dataset::opendialkg::{Dialog, Triple};
use crate::graph::candidates::Fact;
use crate::ids::Direction;
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::retrieve::RetrieveError;
use crate::retrieve::Retriever;
use crate::store::error::ReadError;
use crate::store::Store;
use std::collections::{BTreeMap, HashSet};

/// Scores of one retriever. The `..._at` maps go from k to the score, so JSON reads
/// `"path_at": {"1": 0.08, "3": 0.17}`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RetrievalReport {
    /// Turns with a gold path.
    pub turns: u64,
    /// Turns with a gold triple that is not a fact of the store, for any reason (an unknown
    /// or empty name, or a fact the graph lacks). No retriever can return their gold path.
    pub gold_not_in_store: u64,
    /// Of those, turns whose gold path names an entity or relation the store does not have.
    /// Such gold triples are left out of the triple-recall denominator.
    pub gold_unknown_name: u64,
    /// Of those, turns whose gold path has an empty entity or relation name (loads reject
    /// empty names, so such a triple can never be in a store).
    pub gold_empty_name: u64,
    /// Share of turns whose gold path is among the retriever's candidates (linked start
    /// entity, caps): the ceiling of path@k.
    pub candidate_recall: f64,
    /// k -> share of turns whose exact gold path is among the top k.
    pub path_at: BTreeMap<usize, f64>,
    /// k -> mean share of gold triples among the triples of the top k paths.
    pub triple_recall_at: BTreeMap<usize, f64>,
    /// Mean reciprocal rank of the first path holding a gold triple (0 when none does).
    pub mrr: f64,
    /// k -> share of turns with a gold triple in the top k paths, k = 1, 3, 10.
    pub hits_at: BTreeMap<usize, f64>,
    /// Of the triples of the top max(k) paths against the gold triples, per turn, averaged.
    pub precision: f64,
    /// The same, recall.
    pub recall: f64,
    /// The same, F1 (per turn, averaged).
    pub f1: f64,
    /// Paths returned per turn.
    pub mean_size: f64,
    /// Share of turns whose top path starts at a gold path's start entity, and of those
    /// whose top path also takes that gold path's first relation in its direction: where a
    /// retriever wins or loses (the entity, or the relation).
    pub top_start_entity: f64,
    /// Share of turns whose top path also takes the gold path's first relation, in its direction.
    pub top_first_relation: f64,
    /// Time per turn to link and retrieve (its share of its batch's retrieval), median, ms.
    pub latency_ms_p50: f64,
    /// The same, 99th percentile.
    pub latency_ms_p99: f64,
    /// Turns over the wall time of the whole run.
    pub turns_per_s: f64,
}

/// One turn's ranked paths beside its gold, for error analysis (`eval retrieval --turns`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct TurnOutcome {
    /// The turn's place among the evaluated turns, from 0.
    pub turn: u64,
    /// Its dialog's place in the file, from 0.
    pub dialog: usize,
    /// Messages before the action (the history the retriever saw).
    pub upto: usize,
    /// The action's gold triples, as written in the data set.
    pub gold: Vec<Triple>,
    /// The exact paths that count as right (OpenDialKG: the gold path; MetaQA: each
    /// answer triple alone), as written in the data set.
    pub right_paths: Vec<Vec<Triple>>,
    /// Whether every gold triple is a fact of the store (else no path can be right).
    pub gold_in_store: bool,
    /// The rank (from 1) of the first exact gold path, if any.
    pub right_at: Option<usize>,
    /// The retriever's paths, best first.
    pub paths: Vec<OutcomePath>,
}

/// A ranked path of a [`TurnOutcome`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct OutcomePath {
    /// Its facts (subject, relation, object) by display name, in walking order.
    pub facts: Vec<(String, String, String)>,
    /// The retriever's score.
    pub score: f64,
    /// The retriever's explanation.
    pub explanation: String,
    /// Whether it is an exact gold path.
    pub right: bool,
    /// How many of its facts are gold triples.
    pub gold_facts: usize,
}

/// A gold triple in stored orientation (`~r(a, b)` is `r(b, a)`), if the store knows it.
pub(crate) fn resolve(store: &Store, t: &Triple, reverse_prefix: &str) -> Result<Option<Fact>, ReadError> {
    let (s, r, o) = t;
    let (r, swap) = match r.strip_prefix(reverse_prefix).filter(|_| !reverse_prefix.is_empty()) {
        Some(base) => (base, true),
        None => (r.as_str(), false),
    };
    let (Some(s), Some(r), Some(o)) = (store.entity_by_key(s)?, store.relation_by_key(r)?, store.entity_by_key(o)?) else {
        return Ok(None);
    };
    Ok(Some(if swap { (o, r, s) } else { (s, r, o) }))
}

/// Facts by display name (an id the store lacks shows as `#id`).
fn named_facts(store: &Store, facts: &[Fact]) -> Result<Vec<(String, String, String)>, ReadError> {
    let entities: Vec<_> = facts.iter().flat_map(|f| [f.0, f.2]).collect();
    let relations: Vec<_> = facts.iter().map(|f| f.1).collect();
    let (e, rel) = (store.entity_names(&entities)?, store.relation_names(&relations)?);
    let name = |n: &Option<String>, id: u32| n.clone().unwrap_or_else(|| format!("#{id}"));
    Ok(facts.iter().enumerate().map(|(i, f)| (name(&e[2 * i], f.0 .0), name(&rel[i], f.1 .0), name(&e[2 * i + 1], f.2 .0))).collect())
}

/// Where a gold path (triples in walking order) starts and how it leaves: its start entity,
/// first relation and the direction it is walked, if the store knows the names.
fn first_step(store: &Store, path: &[Triple], reverse_prefix: &str) -> Result<Option<(crate::ids::EntityId, crate::ids::RelationId, Direction)>, ReadError> {
    let Some((s, r, _)) = path.first() else { return Ok(None) };
    let (r, dir) = match r.strip_prefix(reverse_prefix).filter(|_| !reverse_prefix.is_empty()) {
        Some(base) => (base, Direction::In),
        None => (r.as_str(), Direction::Out),
    };
    let (Some(s), Some(r)) = (store.entity_by_key(s)?, store.relation_by_key(r)?) else { return Ok(None) };
    Ok(Some((s, r, dir)))
}

/// Scores `retriever` on every turn of `dialogs` with a gold path (path@k for each of
/// `ks`, and the fixed hits@1/3/10, MRR, triple recall). `monitor` hears after each batch
/// of turns and, once cancelled, stops the evaluation with [`RetrieveError::Cancelled`].
pub fn evaluate(store: &Store, retriever: &Retriever, dialogs: &[Dialog], ks: &[usize], monitor: &Monitor) -> Result<RetrievalReport, RetrieveError> {
    evaluate_each(store, retriever, dialogs, ks, monitor, None)
}

/// [`evaluate`], handing each turn's [`TurnOutcome`] to `each` (in turn order) as it is
/// scored. To stop early (say, its output cannot be written), `each` cancels `monitor`.
pub fn evaluate_each(
    store: &Store,
    retriever: &Retriever,
    dialogs: &[Dialog],
    ks: &[usize],
    monitor: &Monitor,
    mut each: Option<&mut dyn FnMut(TurnOutcome)>,
) -> Result<RetrievalReport, RetrieveError> {
    let mut r = RetrievalReport::default();
    let kmax = ks.iter().copied().max().unwrap_or(10).max(10);
    let mut path_hits = vec![0u64; ks.len()];
    let mut triple_recall = vec![0f64; ks.len()];
    let hit_ks = [1usize, 3, 10];
    let mut hits = [0u64; 3];
    let (mut mrr, mut p_sum, mut r_sum, mut f_sum, mut size) = (0f64, 0f64, 0f64, 0f64, 0u64);
    let mut candidates = 0u64;
    let (mut top_start, mut top_relation) = (0u64, 0u64);
    let mut latencies = Vec::new();
    let prefix = store.meta().reverse_prefix.clone();
    let started = std::time::Instant::now();
    let turns: Vec<(usize, &Dialog, &crate::dataset::opendialkg::Sample)> =
        dialogs.iter().enumerate().flat_map(|(i, d)| d.samples.iter().map(move |s| (i, d, s))).collect();
    // Turns are ranked a batch at a time (the generative retriever decodes a batch
    // together); a turn's latency is its linking plus its share of the batch.
    let mut done = 0u64;
    for chunk in turns.chunks(retriever.batch_size().max(1)) {
        monitor.check()?;
        let mut inputs = Vec::with_capacity(chunk.len());
        let mut link_ms = Vec::with_capacity(chunk.len());
        for (_, dialog, sample) in chunk {
            let history = &dialog.messages[..sample.upto];
            let t = std::time::Instant::now();
            let input = retriever.input(history)?;
            link_ms.push(t.elapsed().as_secs_f64() * 1e3);
            inputs.push(input);
        }
        let t = std::time::Instant::now();
        let ranked_all = retriever.rank_batch(&inputs)?;
        let share = t.elapsed().as_secs_f64() * 1e3 / chunk.len() as f64;
        for (((dialog_index, _, sample), input), (ranked, link)) in chunk.iter().zip(&inputs).zip(ranked_all.into_iter().zip(link_ms)) {
            r.turns += 1;
            let mut gold: Vec<Fact> = Vec::new();
            let (mut unknown, mut absent) = (false, false);
            for t in &sample.gold {
                match resolve(store, t, &prefix)? {
                    Some(f) => {
                        // Known names do not make a fact: check the store holds it.
                        absent |= !store.neighbors_via(f.0, Direction::Out, f.1)?.contains(&f.2);
                        gold.push(f);
                    }
                    None => unknown = true,
                }
            }
            r.gold_not_in_store += u64::from(unknown || absent);
            r.gold_unknown_name += u64::from(unknown);
            r.gold_empty_name += u64::from(sample.gold.iter().any(|(s, rel, o)| s.is_empty() || rel.is_empty() || o.is_empty()));
            let mut right_paths: Vec<Vec<Fact>> = Vec::new();
            for p in &sample.paths {
                if let Some(facts) = p.iter().map(|t| resolve(store, t, &prefix)).collect::<Result<Option<Vec<Fact>>, _>>()? {
                    right_paths.push(facts);
                }
            }
            latencies.push(link + share);
            if let Some(top) = ranked.first() {
                let h = &top.hops[0];
                let mut starts = false;
                let mut relation = false;
                for p in &sample.paths {
                    if let Some((from, rel, dir)) = first_step(store, p, &prefix)? {
                        starts |= from == h.from;
                        relation |= from == h.from && rel == h.edge.relation && dir == h.edge.direction;
                    }
                }
                top_start += u64::from(starts);
                top_relation += u64::from(relation);
            }
            let admitted = retriever.admits_any(&input.mentioned, &right_paths)?;
            candidates += u64::from(admitted);
            size += ranked.len() as u64;
            let facts: Vec<Vec<Fact>> = ranked.iter().map(|p| p.hops.iter().map(|h| h.fact()).collect()).collect();
            let gold_set: HashSet<Fact> = gold.iter().copied().collect();
            let gold_total = gold_set.len().max(1) as f64;
            for (i, &k) in ks.iter().enumerate() {
                if facts.iter().take(k).any(|p| right_paths.contains(p)) {
                    path_hits[i] += 1;
                }
                let found: HashSet<Fact> = facts.iter().take(k).flatten().filter(|f| gold_set.contains(f)).copied().collect();
                triple_recall[i] += found.len() as f64 / gold_total;
            }
            if let Some(rank) = facts.iter().position(|p| p.iter().any(|f| gold_set.contains(f))) {
                mrr += 1.0 / (rank + 1) as f64;
                for (j, &k) in hit_ks.iter().enumerate() {
                    if rank < k {
                        hits[j] += 1;
                    }
                }
            }
            let retrieved: HashSet<Fact> = facts.iter().take(kmax).flatten().copied().collect();
            let correct = retrieved.intersection(&gold_set).count() as f64;
            let p = if retrieved.is_empty() { 0.0 } else { correct / retrieved.len() as f64 };
            let rc = correct / gold_total;
            p_sum += p;
            r_sum += rc;
            f_sum += if p + rc > 0.0 { 2.0 * p * rc / (p + rc) } else { 0.0 };
            if let Some(each) = each.as_mut() {
                let mut paths = Vec::with_capacity(ranked.len());
                for (p, f) in ranked.iter().zip(&facts) {
                    paths.push(OutcomePath {
                        facts: named_facts(store, f)?,
                        score: p.score,
                        explanation: p.explanation.clone(),
                        right: right_paths.contains(f),
                        gold_facts: f.iter().filter(|x| gold_set.contains(x)).count(),
                    });
                }
                each(TurnOutcome {
                    turn: r.turns - 1,
                    dialog: *dialog_index,
                    upto: sample.upto,
                    gold: sample.gold.clone(),
                    right_paths: sample.paths.clone(),
                    gold_in_store: !(unknown || absent),
                    right_at: paths.iter().position(|p| p.right).map(|i| i + 1),
                    paths,
                });
            }
        }
        done += chunk.len() as u64;
        monitor.report(&Progress::new(Work::Evaluate, (1, 1), "turns", done, Some(turns.len() as u64), Unit::Turns));
    }
    let n = r.turns.max(1) as f64;
    r.candidate_recall = candidates as f64 / n;
    r.path_at = ks.iter().zip(&path_hits).map(|(&k, &h)| (k, h as f64 / n)).collect();
    r.triple_recall_at = ks.iter().zip(&triple_recall).map(|(&k, &s)| (k, s / n)).collect();
    r.mrr = mrr / n;
    r.top_start_entity = top_start as f64 / n;
    r.top_first_relation = top_relation as f64 / n;
    r.hits_at = hit_ks.iter().zip(hits).map(|(&k, h)| (k, h as f64 / n)).collect();
    r.precision = p_sum / n;
    r.recall = r_sum / n;
    r.f1 = f_sum / n;
    r.mean_size = size as f64 / n;
    latencies.sort_by(f64::total_cmp);
    let pct = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    r.latency_ms_p50 = pct(0.5);
    r.latency_ms_p99 = pct(0.99);
    r.turns_per_s = r.turns as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Ok(r)
}
