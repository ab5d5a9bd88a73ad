//! `trellis eval pipeline`: the whole chain (link, retrieve, generate) over dialog turns
//! with a gold path and a reply, scored as the papers score it: the replies by BLEU, ROUGE,
//! F1 and KF1 against the gold replies ([`super::responses`]), the retrieved paths by
//! path@k and triple recall against the gold path, and the time each stage took.
//!
//! A sample is an action with a gold path followed by a message of the same speaker (the
//! reply the action grounds); the history is the messages before that reply. The knowledge
//! is one of [`KnowledgeMode`]: none, the gold path (the ceiling of retrieval), or the
//! retriever's best `top` paths. KF1 compares the reply with the knowledge the generator
//! read, written `head relation tail` per triple, a relation without its `~` and with `_`
//! as spaces; with no knowledge there is no KF1. The grounding figures ask which entities of
//! that knowledge (its paths' heads and tails) each reply and its reference name; with no
//! knowledge there are none. Distinct replies count the generated replies. With a pipeline
//! that checks its replies (`checker`), the fact score and NEIP of the replies and of the
//! references ([`FactCheckScores`]); `replies_per_s` covers the generation's checks (the
//! references' come after the clock stops).

use super::responses::{self, ResponsePair, ResponseScores, ResponsesError};
use super::retrieval::resolve;
use crate::check::CheckTotals;
use crate::dataset::opendialkg::{Dialog, Sample};
use crate::generate::delex::knowledge_entities;
use crate::generate::targets::{gold_knowledge, reply_of};
use crate::generate::KnowledgePath;
use crate::graph::candidates::Fact;
use crate::pipeline::{KnowledgeSource, Pipeline, PipelineError, PipelineRequest, Reply};
use crate::progress::{Monitor, Progress, Unit, Work};
use rayon::prelude::*;
use std::collections::HashSet;

/// Which knowledge the generator reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum KnowledgeMode {
    /// The dialog alone.
    None,
    /// The turn's gold path.
    Gold,
    /// The retriever's best `top` paths.
    Retrieved,
}

/// Failures of the evaluation (none is a sample's fault: samples are read from the file).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineEvalError {
    /// The chain failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Scoring the replies failed (no sample to score).
    #[error(transparent)]
    Scores(#[from] ResponsesError),
}

/// The retrieved paths against the gold path (knowledge `retrieved` only).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RetrievedScores {
    /// Share of samples whose exact gold path is the top path, and among the `top` given to
    /// the generator.
    pub path_at_1: f64,
    /// Share of samples whose exact gold path is among the `top` paths.
    pub path_at_top: f64,
    /// Mean share of the gold triples among the triples of the `top` paths.
    pub triple_recall_at_top: f64,
    /// Share of samples whose top path starts at a gold path's start entity.
    pub top_start_entity: f64,
}

/// Mean milliseconds per reply of each stage (the retrieval and generation of a batch
/// divided among its replies).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StageMeans {
    /// Linking.
    pub link_ms: f64,
    /// Retrieval.
    pub retrieve_ms: f64,
    /// Generation.
    pub generate_ms: f64,
}

/// What [`evaluate`] measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PipelineReport {
    /// Which knowledge the generator read.
    pub knowledge: KnowledgeMode,
    /// Samples scored (actions with a gold path and a reply).
    pub samples: u64,
    /// Actions with a gold path but no reply of the same speaker after them (not scored).
    pub without_reply: u64,
    /// The replies' scores against the gold replies.
    pub responses: ResponseScores,
    /// The retrieved paths against the gold path (`None` unless the knowledge is retrieved).
    pub retrieval: Option<RetrievedScores>,
    /// Mean milliseconds per reply of each stage.
    pub timings: StageMeans,
    /// Samples over the wall time of the whole run.
    pub replies_per_s: f64,
    /// The fact check of the replies and of the references (`None` without a checker).
    pub fact_check: Option<FactCheckScores>,
}

/// Fact score and NEIP ([`crate::check`]) of the generated replies and of the gold replies,
/// each checked with its dialog before it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FactCheckScores {
    /// The generated replies.
    pub replies: CheckTotals,
    /// The gold replies.
    pub references: CheckTotals,
}

/// One scored sample, for error analysis and `eval responses`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Prediction {
    /// The dialog's 0-based position in the input.
    pub dialog: usize,
    /// The messages before the reply (the history is `messages[..upto]`).
    pub upto: usize,
    /// The generated reply.
    pub response: String,
    /// The gold reply.
    pub reference: String,
    /// The knowledge the generator read.
    pub knowledge: Vec<KnowledgePath>,
}

/// The KF1 text of some knowledge (module documentation).
pub fn knowledge_text(knowledge: &[KnowledgePath]) -> String {
    let words: Vec<String> =
        knowledge.iter().flatten().map(|t| format!("{} {} {}", t.head, t.relation.trim_start_matches('~').replace('_', " "), t.tail)).collect();
    words.join(" ")
}

/// Runs the chain over every sample of `dialogs`, `batch` samples per pipeline call, calls
/// in parallel on rayon's current pool; `monitor` hears after each call (samples done of
/// all) and, once cancelled, stops the evaluation with `PipelineError::Cancelled`.
pub fn evaluate(
    pipeline: &Pipeline,
    dialogs: &[Dialog],
    mode: KnowledgeMode,
    batch: usize,
    monitor: &Monitor,
) -> Result<(PipelineReport, Vec<Prediction>), PipelineEvalError> {
    let mut without_reply = 0u64;
    let mut samples: Vec<(usize, &Dialog, &Sample, &str, Vec<KnowledgePath>)> = Vec::new();
    for (i, d) in dialogs.iter().enumerate() {
        for s in &d.samples {
            match reply_of(d, s) {
                Some(reply) => samples.push((i, d, s, reply, gold_knowledge(s))),
                None => without_reply += 1,
            }
        }
    }
    let started = std::time::Instant::now();
    let chunks: Vec<_> = samples.chunks(batch.max(1)).collect();
    let (total, done) = (samples.len() as u64, std::sync::atomic::AtomicU64::new(0));
    let replies: Vec<Vec<Reply>> = chunks
        .par_iter()
        .map(|chunk| {
            let requests: Vec<PipelineRequest<'_>> = chunk
                .iter()
                .map(|(_, d, s, _, gold)| PipelineRequest {
                    history: &d.messages[..s.upto],
                    entities: None,
                    knowledge: match mode {
                        KnowledgeMode::None => KnowledgeSource::Nothing,
                        KnowledgeMode::Gold => KnowledgeSource::Given(gold),
                        KnowledgeMode::Retrieved => KnowledgeSource::Retrieved,
                    },
                    seed: None,
                })
                .collect();
            monitor.check().map_err(PipelineError::from)?;
            let out = pipeline.respond_batch(&requests)?;
            let now = done.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed) + chunk.len() as u64;
            monitor.report(&Progress::new(Work::Evaluate, (1, 1), "turns", now, Some(total), Unit::Turns));
            Ok(out)
        })
        .collect::<Result<_, PipelineError>>()?;
    let seconds = started.elapsed().as_secs_f64();
    let replies: Vec<Reply> = replies.into_iter().flatten().collect();
    let n = samples.len().max(1) as f64;
    let mut timings = StageMeans::default();
    for r in &replies {
        timings.link_ms += r.timings.link_ms / n;
        timings.retrieve_ms += r.timings.retrieve_ms / n;
        timings.generate_ms += r.timings.generate_ms / n;
    }
    let retrieval = match mode {
        KnowledgeMode::Retrieved => Some(retrieved_scores(pipeline, &samples, &replies)?),
        _ => None,
    };
    let pairs: Vec<ResponsePair> = samples
        .iter()
        .zip(&replies)
        .map(|((.., reply, _), r)| ResponsePair {
            prediction: r.text().to_owned(),
            reference: (*reply).to_owned(),
            knowledge: (mode != KnowledgeMode::None).then(|| knowledge_text(&r.knowledge)),
            entities: (mode != KnowledgeMode::None).then(|| knowledge_entities(&r.knowledge)),
        })
        .collect();
    let scores = responses::score(&pairs)?;
    let fact_check = match pipeline.checker() {
        None => None,
        Some(checker) => {
            let mut scores = FactCheckScores { replies: CheckTotals::default(), references: CheckTotals::default() };
            for ((_, d, s, reference, _), r) in samples.iter().zip(&replies) {
                match r.checks.first() {
                    Some(c) => scores.replies.add(c),
                    None => scores.replies.add(&checker.check(&d.messages[..s.upto], r.text()).map_err(PipelineError::from)?),
                }
                scores.references.add(&checker.check(&d.messages[..s.upto], reference).map_err(PipelineError::from)?);
            }
            Some(scores)
        }
    };
    let predictions = samples
        .iter()
        .zip(replies)
        .map(|((i, _, s, reply, _), r)| Prediction {
            dialog: *i,
            upto: s.upto,
            response: r.text().to_owned(),
            reference: (*reply).to_owned(),
            knowledge: r.knowledge,
        })
        .collect();
    let report = PipelineReport {
        knowledge: mode,
        samples: samples.len() as u64,
        without_reply,
        responses: scores,
        retrieval,
        timings,
        replies_per_s: samples.len() as f64 / seconds.max(1e-9),
        fact_check,
    };
    Ok((report, predictions))
}

type Scored<'a> = (usize, &'a Dialog, &'a Sample, &'a str, Vec<KnowledgePath>);

fn retrieved_scores(pipeline: &Pipeline, samples: &[Scored<'_>], replies: &[Reply]) -> Result<RetrievedScores, PipelineError> {
    let store = pipeline.retriever().store();
    let prefix = store.meta().reverse_prefix.clone();
    let mut s = RetrievedScores::default();
    let n = samples.len().max(1) as f64;
    for ((_, _, sample, ..), reply) in samples.iter().zip(replies) {
        let mut right: Vec<Vec<Fact>> = Vec::new();
        for p in &sample.paths {
            if let Some(facts) = p.iter().map(|t| resolve(store, t, &prefix)).collect::<Result<Option<Vec<Fact>>, _>>()? {
                right.push(facts);
            }
        }
        // As `eval retrieval`: the gold triples the store knows.
        let mut gold: HashSet<Fact> = HashSet::new();
        for t in &sample.gold {
            if let Some(f) = resolve(store, t, &prefix)? {
                gold.insert(f);
            }
        }
        let facts: Vec<Vec<Fact>> = reply.paths.iter().map(|p| p.hops.iter().map(|h| h.fact()).collect()).collect();
        s.path_at_1 += f64::from(u8::from(facts.first().is_some_and(|p| right.contains(p)))) / n;
        s.path_at_top += f64::from(u8::from(facts.iter().any(|p| right.contains(p)))) / n;
        let found: HashSet<&Fact> = facts.iter().flatten().filter(|f| gold.contains(f)).collect();
        s.triple_recall_at_top += found.len() as f64 / gold.len().max(1) as f64 / n;
        if let (Some(top), Some(start)) = (reply.paths.first().and_then(|p| p.hops.first()), sample.paths.first().and_then(|p| p.first())) {
            let starts = store.entity_by_key(&start.0)? == Some(top.from);
            s.top_start_entity += f64::from(u8::from(starts)) / n;
        }
    }
    Ok(s)
}

crate::limits::named_choices!(KnowledgeMode, "knowledge", { None => "none", Gold => "gold", Retrieved => "retrieved" });
