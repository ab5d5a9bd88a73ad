//! One chain from a dialog to a reply: link the entities the dialog mentions, retrieve
//! knowledge paths, generate the reply grounded in them.
//!
//! A host application builds one [`Pipeline`] (it owns the store handle, the retriever and
//! the generator, each with its own session pool) and calls [`Pipeline::respond`] or
//! [`Pipeline::respond_batch`] from as many threads as it likes: a call costs its request
//! and nothing else (no model or store is opened per call). A batch is retrieved together
//! (the generative retriever decodes its requests as rows of one decoder call) and generated
//! together.

use crate::check::{CheckerModel, FactCheckError, FactChecker, ReplyCheck};
use crate::dialog::Message;
use crate::generate::{GenerateError, GenerateSettings, Generated, GenerationInput, Generator, KnowledgePath, Triple};
use crate::graph::candidates::distinct_terms;
use crate::ids::{Direction, EntityId};
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::retrieve::{RetrievalInput, RetrieveError, Retriever, ScoredPath};
use crate::store::error::ReadError;
use std::sync::Arc;
use std::time::Instant;

pub mod doctor;
pub mod jsonl;
pub mod live;

/// Why a batch got no replies: the store's, the models' or the settings' failure, or, as
/// `Generate(GenerateError::Knowledge { input, .. })`, a request's given knowledge that is
/// not a path of 1 or 2 chained triples (check it first with
/// [`check_path`](crate::generate::encoding::check_path) to keep it from failing a batch).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// Reading the store failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Retrieval failed.
    #[error(transparent)]
    Retrieve(#[from] RetrieveError),
    /// Generation failed.
    #[error("generating: {0}")]
    Generate(#[from] GenerateError),
    /// The generator was to read the rewritten dialog, but the linker does not rewrite.
    #[error("the generator reads the rewritten dialog only when the linker rewrites (set `rewrite`)")]
    RewriteWithoutLinker,
    /// The fact checker could not be made.
    #[error("the fact checker: {0}")]
    Check(#[from] FactCheckError),
    /// The work's [`Monitor`] was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl From<crate::progress::Cancelled> for PipelineError {
    fn from(_: crate::progress::Cancelled) -> PipelineError {
        PipelineError::Cancelled
    }
}

/// The knowledge a request's reply is grounded in.
#[derive(Clone, Copy, Debug, Default)]
pub enum KnowledgeSource<'a> {
    /// The retriever's best paths (the pipeline's `top`).
    #[default]
    Retrieved,
    /// Paths given by the caller (gold annotations, another system's); nothing is retrieved.
    Given(&'a [KnowledgePath]),
    /// No knowledge: the generator sees the dialog only.
    Nothing,
}

/// One request: the dialog so far (oldest first).
#[derive(Clone, Debug)]
pub struct PipelineRequest<'a> {
    /// The dialog so far, oldest first.
    pub history: &'a [Message],
    /// Entities given instead of linking the history (for callers with their own linker).
    pub entities: Option<Vec<EntityId>>,
    /// The knowledge the reply is grounded in (default: retrieved).
    pub knowledge: KnowledgeSource<'a>,
    /// The sampling seed of this request (sampling only; default: the settings').
    pub seed: Option<u64>,
}

impl<'a> PipelineRequest<'a> {
    /// Link, retrieve, generate.
    pub fn new(history: &'a [Message]) -> PipelineRequest<'a> {
        PipelineRequest { history, entities: None, knowledge: KnowledgeSource::Retrieved, seed: None }
    }
}

/// Where a request's time went, in milliseconds. Linking is the request's own; retrieval and
/// generation run a batch at a time, and each request is charged the batch's time divided
/// by its size.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct StageTimings {
    /// Linking.
    pub link_ms: f64,
    /// Retrieval.
    pub retrieve_ms: f64,
    /// Generation.
    pub generate_ms: f64,
    /// Requests in the batch that shared the retrieval and generation times.
    pub batch: usize,
}

/// A reply and how it was made.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The linked (or given) entities; empty when the knowledge was not retrieved.
    pub mentioned: Vec<EntityId>,
    /// Their names, in the same order.
    pub mentioned_names: Vec<String>,
    /// The retrieved paths, best first, at most `top` (empty unless retrieved).
    pub paths: Vec<ScoredPath>,
    /// The knowledge the generator read: `paths` by name (`~r` where a hop walks a fact
    /// backwards), the given paths, or nothing.
    pub knowledge: Vec<KnowledgePath>,
    /// The generated sequences, best first (at least one); with a fact check that reorders
    /// ([`CheckSettings::candidates`]), the best supported first.
    pub responses: Vec<Generated>,
    /// With a fact check, the check of each of `responses` (same order); else empty.
    pub checks: Vec<ReplyCheck>,
    /// With the linker's rewrite, the pronouns and references it resolved in the history
    /// (mentions of kind `Resolved`, each with its `resolution`); else empty.
    pub resolutions: Vec<crate::link::Mention>,
    /// Where the request's time went.
    pub timings: StageTimings,
}

impl Reply {
    /// The best response's text.
    pub fn text(&self) -> &str {
        self.responses.first().map_or("", |g| g.text.as_str())
    }
}

/// The pipeline's settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PipelineSettings {
    /// Retrieved paths handed to the generator (the best `top`).
    pub top: usize,
    /// How replies are generated.
    pub generate: GenerateSettings,
    /// Replies checked against the store (`None`: not checked).
    pub check: Option<CheckSettings>,
    /// The generator reads each message as the linker's rewrite resolved it ("He wrote it"
    /// -> "Lev Grossman wrote The Magicians"); needs a linker with `rewrite`.
    pub rewrite_history: bool,
}

/// How a pipeline checks its replies ([`crate::check`]).
#[derive(Clone)]
pub struct CheckSettings {
    /// The checker's cues and relation counts.
    pub model: CheckerModel,
    /// The generated sequences checked and reordered, the best supported first (fact score,
    /// a reply with no judged claim counting 0.5, then the model's order); 0: every reply
    /// is checked and none reordered.
    pub candidates: usize,
}

// Short: a batch job's checkpoint records the settings' Debug text after every round, and
// the checker file's thousands of cues are recorded there by the file's identity instead.
impl std::fmt::Debug for CheckSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckSettings")
            .field("candidates", &self.candidates)
            .field("cued_relations", &self.model.cues.len())
            .field("counted_relations", &self.model.relations.len())
            .finish()
    }
}

/// The fact score a reply with no judged claim ranks with among checked sequences: below a
/// fully supported one, above one with a refuted claim and no supported one.
pub const UNJUDGED_FACT_SCORE: f64 = 0.5;

impl PipelineSettings {
    /// The best `top` retrieved paths for the generator, with `generate`.
    pub fn new(top: usize, generate: GenerateSettings) -> PipelineSettings {
        PipelineSettings { top, generate, check: None, rewrite_history: false }
    }

    /// These settings with replies checked as `check` says.
    pub fn with_check(mut self, check: Option<CheckSettings>) -> PipelineSettings {
        self.check = check;
        self
    }
}

/// Link, retrieve, generate. `Send + Sync`: build once, share (`Arc`) across threads.
pub struct Pipeline {
    retriever: Retriever,
    generator: Arc<Generator>,
    settings: PipelineSettings,
    checker: Option<Arc<FactChecker>>,
}

/// The fact checker of `settings` over the retriever's store, linking as it links but
/// without the rewrite: replies are judged alike whether or not the pipeline rewrites (a
/// rewrite resolves a reply's pronouns, which makes claims the others would not judge).
fn checker_for(retriever: &Retriever, settings: &PipelineSettings) -> Result<Option<Arc<FactChecker>>, PipelineError> {
    let Some(c) = &settings.check else { return Ok(None) };
    let mut link = retriever.linker().config().clone();
    link.rewrite = false;
    Ok(Some(Arc::new(FactChecker::new(retriever.store().clone(), Some(&c.model), link)?)))
}

const _: () = {
    const fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Pipeline>();
};

impl Pipeline {
    /// Moves the retriever to the newest generation of its store when one was committed
    /// since it was opened (models and sessions kept; `true` when it moved). Answers already
    /// returned came from the old generation; the next ones come from the new one.
    pub fn refresh(&mut self) -> Result<bool, PipelineError> {
        match self.retriever.refreshed()? {
            Some(r) => {
                self.checker = checker_for(&r, &self.settings)?;
                self.retriever = r;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// This pipeline on the newest generation of its store (`None`: it reads the newest),
    /// for holders that share it behind an `Arc`: the generator and every model are shared.
    pub fn refreshed(&self) -> Result<Option<Pipeline>, PipelineError> {
        let Some(retriever) = self.retriever.refreshed()? else { return Ok(None) };
        let checker = checker_for(&retriever, &self.settings)?;
        Ok(Some(Pipeline { retriever, generator: self.generator.clone(), settings: self.settings.clone(), checker }))
    }

    /// A pipeline of a retriever and a generator (the generator's `trellis.json` defaults
    /// unless `settings` says otherwise); refuses settings no search can run with.
    pub fn new(retriever: Retriever, generator: Generator, settings: Option<PipelineSettings>) -> Result<Pipeline, PipelineError> {
        let settings = settings.unwrap_or_else(|| PipelineSettings::new(3, generator.settings().clone()));
        crate::limits::KNOWLEDGE_TOP.check_usize(settings.top).map_err(GenerateError::from)?;
        generator.check(&settings.generate)?;
        if settings.rewrite_history && !retriever.linker().config().rewrite {
            return Err(PipelineError::RewriteWithoutLinker);
        }
        let checker = checker_for(&retriever, &settings)?;
        Ok(Pipeline { retriever, generator: Arc::new(generator), settings, checker })
    }

    /// The fact checker replies are checked with, if any.
    pub fn checker(&self) -> Option<&FactChecker> {
        self.checker.as_deref()
    }

    /// Each response checked; with `candidates`, the first `candidates` reordered, the best
    /// supported first (a stable sort: the model's order breaks ties).
    fn check_responses(&self, history: &[Message], responses: &mut Vec<Generated>) -> Result<Vec<ReplyCheck>, PipelineError> {
        let (Some(checker), Some(check)) = (&self.checker, &self.settings.check) else { return Ok(Vec::new()) };
        let texts: Vec<&str> = responses.iter().map(|g| g.text.as_str()).collect();
        let mut checks = checker.check_each(history, &texts)?;
        let n = check.candidates.min(responses.len());
        if n > 1 {
            let key = |c: &ReplyCheck| c.fact_score.unwrap_or(UNJUDGED_FACT_SCORE);
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| key(&checks[b]).total_cmp(&key(&checks[a])));
            let mut rest_g = responses.split_off(n);
            let mut rest_c = checks.split_off(n);
            let (gs, cs): (Vec<Generated>, Vec<ReplyCheck>) = order.iter().map(|&i| (responses[i].clone(), checks[i].clone())).unzip();
            *responses = gs;
            checks = cs;
            responses.append(&mut rest_g);
            checks.append(&mut rest_c);
        }
        Ok(checks)
    }

    /// The retriever (its store and linker).
    pub fn retriever(&self) -> &Retriever {
        &self.retriever
    }

    /// The generator.
    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &PipelineSettings {
        &self.settings
    }

    /// The reply to one request.
    pub fn respond(&self, request: &PipelineRequest<'_>) -> Result<Reply, PipelineError> {
        let mut out = self.respond_batch(std::slice::from_ref(request))?;
        Ok(out.pop().expect("one reply per request"))
    }

    /// Replies to every request of `requests`, in their order: batches of as many requests
    /// as the retriever or the generator decodes together (the larger of the retriever's
    /// [`batch_size`](Retriever::batch_size) and the generation settings' `batch`) go
    /// through [`respond_batch`](Pipeline::respond_batch), batches in parallel on rayon's current
    /// pool (`ThreadPool::install` bounds it). `monitor` hears after each batch (requests
    /// done of all) and, once cancelled, stops the work before the next batch with
    /// [`PipelineError::Cancelled`].
    pub fn respond_many(&self, requests: &[PipelineRequest<'_>], monitor: &Monitor) -> Result<Vec<Reply>, PipelineError> {
        use rayon::prelude::*;
        let total = requests.len() as u64;
        let done = std::sync::atomic::AtomicU64::new(0);
        let batches: Vec<Vec<Reply>> = requests
            .par_chunks(self.retriever.batch_size().max(self.settings.generate.batch).max(1))
            .map(|chunk| {
                monitor.check()?;
                let replies = self.respond_batch(chunk)?;
                let now = done.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed) + chunk.len() as u64;
                monitor.report(&Progress::new(Work::Respond, (1, 1), "requests", now, Some(total), Unit::Requests));
                Ok(replies)
            })
            .collect::<Result<_, PipelineError>>()?;
        Ok(batches.into_iter().flatten().collect())
    }

    /// Replies to many requests, in their order; they are retrieved and generated together.
    pub fn respond_batch(&self, requests: &[PipelineRequest<'_>]) -> Result<Vec<Reply>, PipelineError> {
        let n = requests.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let store = self.retriever.store();
        // Link the requests whose knowledge is retrieved.
        let mut link_ms = vec![0.0; n];
        let mut inputs: Vec<RetrievalInput<'_>> = Vec::new();
        let mut retrieved_at: Vec<Option<usize>> = vec![None; n];
        for (i, r) in requests.iter().enumerate() {
            if !matches!(r.knowledge, KnowledgeSource::Retrieved) {
                continue;
            }
            let t = Instant::now();
            let input = match &r.entities {
                Some(e) => RetrievalInput::given(r.history, e.clone()),
                None => self.retriever.input(r.history)?,
            };
            link_ms[i] = t.elapsed().as_secs_f64() * 1e3;
            retrieved_at[i] = Some(inputs.len());
            inputs.push(input);
        }
        let t = Instant::now();
        let mut ranked = if inputs.is_empty() { Vec::new() } else { self.retriever.rank_batch(&inputs)? };
        for paths in &mut ranked {
            paths.truncate(self.settings.top);
        }
        // Every name the knowledge needs, in two batched reads.
        let facts = ranked.iter().flatten().flat_map(|p| p.hops.iter().map(|h| h.fact()));
        let (mut es, rs) = distinct_terms(facts);
        es.extend(inputs.iter().flat_map(|i| i.mentioned.iter().copied()));
        es.sort_unstable();
        es.dedup();
        let entity: hashbrown::HashMap<EntityId, String> = es.iter().copied().zip(store.entity_names(&es)?).map(|(e, n)| (e, n.unwrap_or_default())).collect();
        let relation: hashbrown::HashMap<_, String> = rs.iter().copied().zip(store.relation_names(&rs)?).map(|(r, n)| (r, n.unwrap_or_default())).collect();
        let named: Vec<Vec<KnowledgePath>> = ranked
            .iter()
            .map(|paths| {
                paths
                    .iter()
                    .map(|p| {
                        p.hops
                            .iter()
                            .map(|h| {
                                let rel = &relation[&h.edge.relation];
                                let rel = if h.edge.direction == Direction::In { format!("~{rel}") } else { rel.clone() };
                                Triple::new(entity[&h.from].as_str(), rel, entity[&h.edge.other].as_str())
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let retrieve_share = if inputs.is_empty() { 0.0 } else { t.elapsed().as_secs_f64() * 1e3 / inputs.len() as f64 };
        let knowledge: Vec<&[KnowledgePath]> = requests
            .iter()
            .zip(&retrieved_at)
            .map(|(r, at)| match (r.knowledge, at) {
                (KnowledgeSource::Given(k), _) => k,
                (KnowledgeSource::Retrieved, Some(at)) => named[*at].as_slice(),
                _ => &[],
            })
            .collect();
        // With the rewrite, each request's resolved words (explained in the reply) and, when
        // the generator reads it, the rewritten history.
        let rewrite = self.retriever.linker().config().rewrite;
        let mut resolutions: Vec<Vec<crate::link::Mention>> = Vec::with_capacity(if rewrite { n } else { 0 });
        let mut rewritten: Vec<Vec<Message>> = Vec::new();
        if rewrite {
            for r in requests {
                let mentions = self.retriever.linker().link_dialog(r.history)?;
                if self.settings.rewrite_history {
                    rewritten.push(crate::link::rewrite::rewritten_history(r.history, &mentions));
                }
                resolutions.push(mentions.into_iter().filter(|m| m.kind == crate::link::MatchKind::Resolved).collect());
            }
        }
        let mut resolutions = resolutions.into_iter();
        let gen_inputs: Vec<GenerationInput<'_>> = requests
            .iter()
            .zip(&knowledge)
            .enumerate()
            .map(|(i, (r, k))| GenerationInput { history: rewritten.get(i).map_or(r.history, Vec::as_slice), knowledge: k, seed: r.seed })
            .collect();
        let t = Instant::now();
        let generated = self.generator.generate_batch(&gen_inputs, &self.settings.generate)?;
        let generate_share = t.elapsed().as_secs_f64() * 1e3 / n as f64;
        let mut ranked = ranked.into_iter();
        let mut inputs = inputs.into_iter();
        requests
            .iter()
            .zip(retrieved_at)
            .zip(generated)
            .zip(knowledge)
            .zip(link_ms)
            .map(|((((request, at), mut responses), knowledge), link_ms)| {
                let (mentioned, paths) = match at {
                    Some(_) => (inputs.next().map(|i| i.mentioned).unwrap_or_default(), ranked.next().unwrap_or_default()),
                    None => (Vec::new(), Vec::new()),
                };
                let checks = self.check_responses(request.history, &mut responses)?;
                Ok(Reply {
                    mentioned_names: mentioned.iter().map(|e| entity.get(e).cloned().unwrap_or_default()).collect(),
                    mentioned,
                    paths,
                    knowledge: knowledge.to_vec(),
                    responses,
                    checks,
                    resolutions: resolutions.next().unwrap_or_default(),
                    timings: StageTimings { link_ms, retrieve_ms: if at.is_some() { retrieve_share } else { 0.0 }, generate_ms: generate_share, batch: n },
                })
            })
            .collect()
    }
}
