//! One retriever interface and the non-neural retrievers: `all`, `random`, `bm25`, `katz`
//! and `pcst`, over the capped candidate subgraph of the entities linked in the dialog
//! history; `dense` (a bi-encoder, [`dense`]) and `surge` (a graph neural network over the
//! candidate subgraph, [`surge`]) over the same candidates, `gsr` (generative); and
//! reranking any of them with a cross-encoder ([`rerank`]).

pub mod bm25;
pub mod dense;
mod error;
pub mod gsr;
pub mod jsonl;
pub mod pcst;
pub mod rerank;
pub mod search;
pub mod surge;
pub mod targets;

use crate::graph::candidates::{
    candidate_fact_paths, candidate_subgraph_with, distinct_terms, entity_candidates, in_neighbourhood, CandidateConfig, CandidateScope, Candidates, Fact, Hop,
};
use crate::graph::informativeness::{Informativeness, KatzConfig};
use crate::ids::EntityId;
use crate::ingest::tokenizer::fnv1a64;
use crate::link::{LinkConfig, Linker, Message};
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::store::error::ReadError;
use crate::store::Store;
use pcst::{PcstConfig, PcstScores, PcstVariant};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use error::RetrieveError;

/// A retrieved path (1 or 2 hops) with its score and a short explanation.
#[derive(Clone, Debug)]
pub struct ScoredPath {
    /// 1 or 2 hops from the path's first entity.
    pub hops: Vec<Hop>,
    /// The retriever's own score (1 for `all`; a BM25, informativeness or hypothesis score for the others).
    pub score: f64,
    /// Why the path was chosen, for people (e.g. `bm25 0.8123, mean over the last 3 messages`).
    pub explanation: String,
    /// The generative retriever's tokens with their model and prior log-probabilities
    /// (empty for the others).
    pub tokens: Vec<TokenScore>,
}

/// One generated token of a path: its id, `log_softmax(logits)[id]` and `log p_graph(id)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenScore {
    /// The token id.
    pub id: u32,
    /// The model's log-probability of it, `log_softmax(logits)[id]`.
    pub model: f64,
    /// The graph prior's log-probability of it, `log p_graph(id)`.
    pub prior: f64,
}

/// What retrievers see: the dialog history (oldest first) and the entities linked in it.
#[derive(Clone)]
pub struct RetrievalInput<'a> {
    /// The messages so far, oldest first.
    pub history: &'a [Message],
    /// The entities linked in them (the candidates' seeds).
    pub mentioned: Vec<EntityId>,
    /// Per mentioned entity, how many messages back it was last named (0: the last
    /// message); empty when the entities were given rather than linked (all taken as 0).
    /// Only a generative retriever whose input shows the entities reads it.
    pub ages: Vec<u32>,
    /// The history as the linker's rewrite resolved it ("he" -> "Lev Grossman"), when some
    /// part of the ranking reads it ([`RetrieverConfig::rewrite_input`]); the other parts read
    /// `history`.
    pub rewritten: Option<Vec<Message>>,
}

impl<'a> RetrievalInput<'a> {
    /// Entities given by the caller (no recency known, no rewrite: every part reads
    /// `history` as written).
    pub fn given(history: &'a [Message], mentioned: Vec<EntityId>) -> RetrievalInput<'a> {
        RetrievalInput { history, mentioned, ages: Vec::new(), rewritten: None }
    }

    /// The messages a ranking that reads the rewrite reads (a model's input, BM25's terms):
    /// the rewritten history when there is one, else the history as given.
    pub(crate) fn text_history(&self) -> &[Message] {
        self.rewritten.as_deref().unwrap_or(self.history)
    }

    /// The same input without its rewritten history: what a part that reads the dialog as
    /// written ranks.
    fn as_written(&self) -> RetrievalInput<'a> {
        RetrievalInput { history: self.history, mentioned: self.mentioned.clone(), ages: self.ages.clone(), rewritten: None }
    }
}

/// The parts of a ranking that can read the rewritten dialog ([`RetrieverConfig::rewrite_input`]):
/// the retrievers that read the dialog's text, and the reranker. `all` and `katz` read no
/// text; `random` seeds its order and `search` finds its mentions in the dialog as written.
pub const REWRITE_PARTS: &[&str] = &["bm25", "pcst", "gsr", "dense", "surge", "rerank"];

/// Which retriever; the generative one with what it needs (its model), so that no
/// retriever can be built without it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum RetrieverKind {
    /// Every candidate path, in candidate order.
    All,
    /// The candidates in a seeded random order.
    Random,
    /// BM25 of verbalized paths against the last 1..L messages, averaged (seed 003).
    Bm25,
    /// The informativeness of the path's entities with respect to the mentioned ones.
    Katz,
    /// The paths inside a prize-collecting Steiner tree of the candidates (seed 003 /
    /// G-Retriever prizes), by the mean BM25 relevance of their facts.
    Pcst,
    /// Generative retrieval (DialogGSR): a T5 model writes the paths under the graph
    /// constraint and prior.
    Gsr(gsr::GsrOptions),
    /// Dense retrieval (SURGE's bi-encoder baseline): the candidates ranked by the inner
    /// product of the dialog's vector and each verbalized path's.
    Dense(dense::DenseOptions),
    /// SURGE's context-relevant subgraph retrieval: every candidate fact scored by a graph
    /// neural network over the candidate subgraph against the dialog; a path by the mean of
    /// its facts.
    Surge(surge::SurgeOptions),
    /// Knowledge from search (seed 002): the query producer's top queries searched in the
    /// store's text index, the entities found turned into paths.
    Search(search::SearchOptions),
}

impl RetrieverKind {
    /// The names, in the order of the variants.
    pub const NAMES: &'static [&'static str] = &["all", "random", "bm25", "katz", "pcst", "gsr", "dense", "surge", "search"];

    /// The retriever's name (`all`, `random`, `bm25`, `katz`, `pcst`, `gsr`, `dense`, `surge`, `search`).
    pub fn name(&self) -> &'static str {
        match self {
            RetrieverKind::All => "all",
            RetrieverKind::Random => "random",
            RetrieverKind::Bm25 => "bm25",
            RetrieverKind::Katz => "katz",
            RetrieverKind::Pcst => "pcst",
            RetrieverKind::Gsr(_) => "gsr",
            RetrieverKind::Dense(_) => "dense",
            RetrieverKind::Surge(_) => "surge",
            RetrieverKind::Search(_) => "search",
        }
    }
}

/// A retriever's settings; [`RetrieverConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RetrieverConfig {
    /// Which retriever.
    pub kind: RetrieverKind,
    /// How candidate paths are gathered around the mentioned entities.
    pub candidates: CandidateConfig,
    /// Capped candidates (every retriever) or the whole neighbourhood (generative only).
    pub scope: CandidateScope,
    /// The entity linker's settings.
    pub link: LinkConfig,
    /// The informativeness (Katz) settings: the `katz` retriever's and the generative prior's;
    /// its hub degree also bounds the uncapped scope.
    pub katz: KatzConfig,
    /// BM25: average over the last 1..=L messages.
    pub bm25_turns: usize,
    /// The seed of `random`'s order (default 42).
    pub seed: u64,
    /// The PCST retriever's settings.
    pub pcst: PcstConfig,
    /// Rerank the answer (and the other pooled retrievers' top paths) with a cross-encoder.
    pub rerank: Option<rerank::RerankOptions>,
    /// The parts of the ranking that read the history as the linker's rewrite resolved it
    /// ("Lev Grossman wrote it" for "He wrote it"; needs `link.rewrite`): retriever names of
    /// this retriever and its rerank pool, and `rerank` for the cross-encoder
    /// ([`REWRITE_PARTS`]). The others read it as written. On OpenDialKG's dev turns the
    /// rewritten text helped gsr and surge and hurt pcst's BM25 prizes and the T5 reranker.
    /// A set, as the rerank pool is: a part named twice counts once (the settings layer
    /// drops the repeat too).
    pub rewrite_input: Vec<String>,
}

impl RetrieverConfig {
    /// The defaults for `kind`: capped candidates, BM25 over 3 messages, seed 42, PCST seed 003.
    pub fn new(kind: RetrieverKind) -> RetrieverConfig {
        RetrieverConfig {
            kind,
            candidates: CandidateConfig::default(),
            scope: CandidateScope::Capped,
            link: LinkConfig::default(),
            katz: KatzConfig::default(),
            bm25_turns: 3,
            seed: 42,
            pcst: PcstConfig::new(PcstVariant::Seed003),
            rerank: None,
            rewrite_input: Vec::new(),
        }
    }

    /// Every numeric setting within its range of `crate::limits` (the model's own decoding
    /// settings are checked when it is opened, against its `trellis.json`).
    pub fn validate(&self) -> Result<(), crate::limits::OutOfRange> {
        self.link.validate()?;
        crate::limits::BM25_TURNS.check_usize(self.bm25_turns)?;
        let mut kinds = vec![&self.kind];
        if let Some(r) = &self.rerank {
            r.validate()?;
            kinds.extend(&r.pool);
        }
        for kind in kinds {
            match kind {
                RetrieverKind::Gsr(g) => g.validate()?,
                RetrieverKind::Dense(d) => d.validate()?,
                RetrieverKind::Surge(s) => s.validate()?,
                RetrieverKind::Search(s) => s.validate()?,
                _ => {}
            }
        }
        if let PcstScores::Dense(d) = &self.pcst.scores {
            d.validate()?;
        }
        Ok(())
    }
}

/// A configured retriever over one store. Owns its handle, is `Send + Sync`, and is
/// meant to be built once and called from many threads.
pub struct Retriever {
    store: Arc<Store>,
    linker: Linker,
    cfg: RetrieverConfig,
    /// Whether this retriever ranks with the rewritten history (`rewrite_input` names it).
    reads_rewrite: bool,
    /// Names read for earlier calls: consecutive turns of a dialog share most candidates.
    names: std::sync::Mutex<NameCache>,
    /// Each mentioned entity's capped candidates from earlier calls: a dialog's turns mention
    /// the same entities, and an evaluation asks for a turn's candidates twice (admits, ranks).
    candidates: std::sync::Mutex<hashbrown::HashMap<EntityId, Arc<Candidates>>>,
    gsr: Option<gsr::GsrRetriever>,
    /// The `dense` retriever's bi-encoder.
    dense: Option<Arc<dense::DenseScorer>>,
    /// PCST's dense prizes' bi-encoder (the same one when the model is).
    pcst_dense: Option<Arc<dense::DenseScorer>>,
    /// The store's vectors of that bi-encoder, when `trellis index-vectors` wrote them.
    vectors: Option<Arc<crate::vectors::StoredVectors>>,
    /// The `surge` retriever's subgraph model.
    surge: Option<Arc<crate::model::encoder::subgraph::SubgraphScorer>>,
    /// The `search` retriever's producer and text index.
    search: Option<search::SearchState>,
    rerank: Option<Reranking>,
}

/// A reranker and the other retrievers of its pool.
struct Reranking {
    encoder: Arc<crate::model::encoder::CrossEncoder>,
    top: usize,
    pool: Vec<Retriever>,
    fusion: f64,
    /// Whether the cross-encoder's query is the rewritten history (`rewrite_input` names `rerank`).
    reads_rewrite: bool,
}

impl Retriever {
    /// Any retriever; `gsr` loads its model and opens its token index. Refused outside the
    /// ranges of [`RetrieverConfig::validate`].
    pub fn new(store: Arc<Store>, cfg: RetrieverConfig) -> Result<Retriever, RetrieveError> {
        cfg.validate()?;
        if !cfg.rewrite_input.is_empty() && !cfg.link.rewrite {
            return Err(RetrieveError::RewriteInputWithoutRewrite);
        }
        let mut parts: Vec<&str> = vec![cfg.kind.name()];
        if let Some(r) = &cfg.rerank {
            parts.push("rerank");
            parts.extend(r.pool.iter().map(RetrieverKind::name));
        }
        if let Some(p) = cfg.rewrite_input.iter().find(|p| !parts.contains(&p.as_str()) || !REWRITE_PARTS.contains(&p.as_str())) {
            return Err(RetrieveError::RewriteInputNotInPlay { part: p.clone(), parts: parts.join(", ") });
        }
        let mut scorers = Vec::new();
        let mut main = Self::build(store.clone(), cfg.clone(), &mut scorers)?;
        if let Some(r) = &cfg.rerank {
            let mut pool = Vec::new();
            let mut seen = vec![cfg.kind.name()];
            for kind in &r.pool {
                if seen.contains(&kind.name()) {
                    continue;
                }
                seen.push(kind.name());
                let mut c = cfg.clone();
                c.kind = kind.clone();
                c.rerank = None;
                pool.push(Self::build(store.clone(), c, &mut scorers)?);
            }
            let encoder = Arc::new(crate::model::encoder::CrossEncoder::open(&r.model, &r.runtime, r.batch)?);
            let reads_rewrite = cfg.rewrite_input.iter().any(|p| p == "rerank");
            main.rerank = Some(Reranking { encoder, top: r.top, pool, fusion: r.fusion, reads_rewrite });
        }
        Ok(main)
    }

    /// A retriever without its reranking; bi-encoders of the same model directory shared
    /// through `scorers`.
    fn build(
        store: Arc<Store>,
        mut cfg: RetrieverConfig,
        scorers: &mut Vec<(std::path::PathBuf, Arc<dense::DenseScorer>)>,
    ) -> Result<Retriever, RetrieveError> {
        let gsr = match &cfg.kind {
            RetrieverKind::Gsr(opts) => Some(gsr::GsrRetriever::open(store.clone(), opts, &cfg.katz)?),
            _ => None,
        };
        let mut scorer = |opts: &dense::DenseOptions| -> Result<Arc<dense::DenseScorer>, RetrieveError> {
            if let Some((_, s)) = scorers.iter().find(|(p, _)| *p == opts.model) {
                return Ok(s.clone());
            }
            let s = Arc::new(dense::DenseScorer::open(opts)?);
            scorers.push((opts.model.clone(), s.clone()));
            Ok(s)
        };
        let dense = match &cfg.kind {
            RetrieverKind::Dense(opts) => Some(scorer(opts)?),
            _ => None,
        };
        let pcst_dense = match (&cfg.kind, &cfg.pcst.scores) {
            (RetrieverKind::Pcst, PcstScores::Dense(opts)) => Some(scorer(opts)?),
            _ => None,
        };
        let surge = match &cfg.kind {
            RetrieverKind::Surge(opts) => Some(Arc::new(crate::model::encoder::subgraph::SubgraphScorer::open(&opts.model, &opts.runtime)?)),
            _ => None,
        };
        let search = match &cfg.kind {
            RetrieverKind::Search(opts) => Some(search::SearchState::open(&store, opts, None)?),
            _ => None,
        };
        let rerank = cfg.rerank.take();
        let vectors = stored_vectors(&store, vector_reader(&cfg, &dense, &pcst_dense))?;
        let reads_rewrite = cfg.rewrite_input.iter().any(|p| p == cfg.kind.name());
        let mut r = Retriever {
            linker: Linker::new(store.clone(), cfg.link.clone())?,
            store,
            cfg,
            reads_rewrite,
            names: Default::default(),
            candidates: Default::default(),
            gsr,
            dense,
            pcst_dense,
            vectors,
            surge,
            search,
            rerank: None,
        };
        r.cfg.rerank = rerank;
        Ok(r)
    }

    /// The same retriever over another generation of its store (`Store::refresh`): its
    /// models and session pools are shared, what it read from the old generation (cached
    /// names, the token index) is not: answers come from `store` alone.
    pub fn on_store(&self, store: Arc<Store>) -> Result<Retriever, RetrieveError> {
        let gsr = match (&self.gsr, &self.cfg.kind) {
            (Some(g), RetrieverKind::Gsr(opts)) => Some(g.on_store(store.clone(), &opts.model)?),
            _ => None,
        };
        let rerank = match &self.rerank {
            Some(r) => Some(Reranking {
                encoder: r.encoder.clone(),
                top: r.top,
                pool: r.pool.iter().map(|p| p.on_store(store.clone())).collect::<Result<_, _>>()?,
                fusion: r.fusion,
                reads_rewrite: r.reads_rewrite,
            }),
            None => None,
        };
        // The text index is the generation's own; the producer (a loaded scorer) is kept.
        let search = match (&self.search, &self.cfg.kind) {
            (Some(s), RetrieverKind::Search(opts)) => Some(search::SearchState::open(&store, opts, Some(&s.producer))?),
            _ => None,
        };
        Ok(Retriever {
            linker: Linker::new(store.clone(), self.cfg.link.clone())?,
            vectors: stored_vectors(&store, vector_reader(&self.cfg, &self.dense, &self.pcst_dense))?,
            store,
            cfg: self.cfg.clone(),
            reads_rewrite: self.reads_rewrite,
            names: Default::default(),
            candidates: Default::default(),
            gsr,
            dense: self.dense.clone(),
            pcst_dense: self.pcst_dense.clone(),
            surge: self.surge.clone(),
            search,
            rerank,
        })
    }

    /// This retriever moved to the newest generation of its store, when one was committed
    /// since its store was opened (`None`: it reads the newest). Requests in flight on this
    /// one finish on the generation they started with.
    pub fn refreshed(&self) -> Result<Option<Retriever>, RetrieveError> {
        match self.store.refresh()? {
            Some(store) => Ok(Some(self.on_store(Arc::new(store))?)),
            None => Ok(None),
        }
    }

    /// The generative retriever, when this is one.
    pub fn generative(&self) -> Option<&gsr::GsrRetriever> {
        self.gsr.as_ref()
    }

    /// How many requests [`rank_batch`](Retriever::rank_batch) decodes together (1 for
    /// the retrievers that gain nothing from it).
    pub fn batch_size(&self) -> usize {
        let own = self.gsr.as_ref().map_or(1, |g| g.settings().batch);
        self.rerank.as_ref().map_or(own, |r| r.pool.iter().map(Retriever::batch_size).fold(own, usize::max))
    }

    fn candidate_mode(&self) -> crate::decode::automaton::CandidateMode {
        match self.cfg.scope {
            CandidateScope::Capped => crate::decode::automaton::CandidateMode::Capped(self.cfg.candidates.clone()),
            CandidateScope::Uncapped => crate::decode::automaton::CandidateMode::Uncapped { hub_degree: self.cfg.katz.hub_degree },
        }
    }

    /// Ranks many requests; the generative retriever decodes them together, a reranker
    /// scores their pooled paths together.
    pub fn rank_batch(&self, inputs: &[RetrievalInput<'_>]) -> Result<Vec<Vec<ScoredPath>>, RetrieveError> {
        match &self.rerank {
            Some(r) => self.rerank_batch(r, inputs),
            None => self.rank_batch_own(inputs),
        }
    }

    /// The pool's top paths of each input, merged and ordered by the cross-encoder.
    fn rerank_batch(&self, r: &Reranking, inputs: &[RetrievalInput<'_>]) -> Result<Vec<Vec<ScoredPath>>, RetrieveError> {
        let mut lists = vec![(self.cfg.kind.name(), self.rank_batch_own(inputs)?)];
        for p in &r.pool {
            lists.push((p.cfg.kind.name(), p.rank_batch(inputs)?));
        }
        let turns = r.encoder.dir().turns();
        let mut pooled = Vec::with_capacity(inputs.len());
        let (mut queries, mut texts, mut owner) = (Vec::new(), Vec::new(), Vec::new());
        for (i, input) in inputs.iter().enumerate() {
            let these: Vec<(&'static str, &[ScoredPath])> = lists.iter().map(|(n, l)| (*n, l[i].as_slice())).collect();
            let u = rerank::union(&these, r.top);
            let paths: Vec<&[Hop]> = u.iter().map(|p| p.hops.as_slice()).collect();
            texts.extend(self.path_texts(&paths)?);
            queries.push(dense::query_text(if r.reads_rewrite { input.text_history() } else { input.history }, turns));
            owner.extend(std::iter::repeat_n(i, u.len()));
            pooled.push(u);
        }
        let pairs: Vec<(&str, &str)> = owner.iter().zip(&texts).map(|(&i, t)| (queries[i].as_str(), t.as_str())).collect();
        let scores = r.encoder.score(&pairs)?;
        let mut at = 0;
        Ok(pooled
            .into_iter()
            .map(|u| {
                let n = u.len();
                at += n;
                rerank::order(u, &scores[at - n..at], r.fusion)
            })
            .collect())
    }

    /// [`rank_batch`](Self::rank_batch) without the reranking.
    fn rank_batch_own(&self, inputs: &[RetrievalInput<'_>]) -> Result<Vec<Vec<ScoredPath>>, RetrieveError> {
        let Some(g) = &self.gsr else {
            return inputs.iter().map(|i| self.rank_own(i)).collect();
        };
        let as_written: Vec<RetrievalInput<'_>>;
        let inputs = if self.reads_rewrite || inputs.iter().all(|i| i.rewritten.is_none()) {
            inputs
        } else {
            as_written = inputs.iter().map(RetrievalInput::as_written).collect();
            &as_written
        };
        let found = g.retrieve_batch(inputs, &self.candidate_mode())?;
        Ok(found
            .into_iter()
            .map(|paths| {
                paths
                    .into_iter()
                    .map(|p| {
                        let homonyms = if p.path.homonyms > 1 { format!(", one of {} paths with the same names", p.path.homonyms) } else { String::new() };
                        ScoredPath {
                            explanation: format!("generated at step {}, score {:.4}{homonyms}", p.step, p.score),
                            score: p.score,
                            tokens: p.tokens.iter().zip(&p.token_scores).map(|(&id, &(model, prior))| TokenScore { id, model, prior }).collect(),
                            hops: p.path.hops,
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// Links and ranks every history of `histories`: the answers, in input order, are
    /// those [`retrieve`](Retriever::retrieve) gives each alone (an answer never depends on
    /// the batch). Batches of [`batch_size`](Retriever::batch_size) histories are ranked
    /// together, batches in parallel on rayon's current pool (`ThreadPool::install` bounds
    /// it). `monitor` hears after each batch (turns done of all) and, once cancelled, stops
    /// the work before the next batch with [`RetrieveError::Cancelled`].
    pub fn retrieve_many(&self, histories: &[&[Message]], monitor: &Monitor) -> Result<Vec<Vec<ScoredPath>>, RetrieveError> {
        use rayon::prelude::*;
        let total = histories.len() as u64;
        let done = AtomicU64::new(0);
        let batches: Vec<Vec<Vec<ScoredPath>>> = histories
            .par_chunks(self.batch_size().max(1))
            .map(|chunk| {
                monitor.check()?;
                let inputs = chunk.iter().map(|h| self.input(h)).collect::<Result<Vec<_>, _>>()?;
                let ranked = self.rank_batch(&inputs)?;
                let now = done.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                monitor.report(&Progress::new(Work::Retrieve, (1, 1), "turns", now, Some(total), Unit::Turns));
                Ok(ranked)
            })
            .collect::<Result<_, RetrieveError>>()?;
        Ok(batches.into_iter().flatten().collect())
    }

    /// The store it retrieves from.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The linker that finds the mentioned entities.
    pub fn linker(&self) -> &Linker {
        &self.linker
    }

    /// Links the history, then ranks its candidate paths; best first.
    pub fn retrieve(&self, history: &[Message]) -> Result<Vec<ScoredPath>, RetrieveError> {
        let input = self.input(history)?;
        self.rank(&input)
    }

    /// The entities the retriever starts from: those linked in the history.
    pub fn mentioned(&self, history: &[Message]) -> Result<Vec<EntityId>, ReadError> {
        let mentions = self.linker.link_dialog(history)?;
        Ok(self.linker.turn_entities(&mentions, history.len()).into_iter().map(|(e, _)| e).collect())
    }

    /// The history linked: its mentioned entities with their recency.
    pub fn input<'h>(&self, history: &'h [Message]) -> Result<RetrievalInput<'h>, ReadError> {
        let mentions = self.linker.link_dialog(history)?;
        let mentioned: Vec<EntityId> = self.linker.turn_entities(&mentions, history.len()).into_iter().map(|(e, _)| e).collect();
        let ages = self.linker.entity_ages(&mentions, history.len(), &mentioned);
        let rewritten = (!self.cfg.rewrite_input.is_empty()).then(|| crate::link::rewrite::rewritten_history(history, &mentions));
        Ok(RetrievalInput { history, mentioned, ages, rewritten })
    }

    /// Whether this retriever could return one of `paths` (facts in walking order) for these
    /// mentioned entities: it is among its candidates. The share of turns whose gold path it
    /// admits is the ceiling of its path@k. Capped: one candidate walk for all the paths.
    pub fn admits_any(&self, mentioned: &[EntityId], paths: &[Vec<Fact>]) -> Result<bool, ReadError> {
        if paths.is_empty() {
            return Ok(false);
        }
        match self.cfg.scope {
            CandidateScope::Capped => {
                let cands = candidate_fact_paths(&self.candidates(mentioned)?);
                Ok(paths.iter().any(|p| cands.contains(p)))
            }
            CandidateScope::Uncapped => {
                for p in paths {
                    if in_neighbourhood(&self.store, mentioned, p, self.cfg.katz.hub_degree)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// Ranks the candidate paths of already linked entities.
    pub fn rank(&self, input: &RetrievalInput<'_>) -> Result<Vec<ScoredPath>, RetrieveError> {
        if self.gsr.is_some() || self.rerank.is_some() {
            return Ok(self.rank_batch(std::slice::from_ref(input))?.pop().unwrap_or_default());
        }
        self.rank_own(input)
    }

    fn rank_own(&self, input: &RetrievalInput<'_>) -> Result<Vec<ScoredPath>, RetrieveError> {
        if self.gsr.is_some() {
            return Ok(self.rank_batch_own(std::slice::from_ref(input))?.pop().unwrap_or_default());
        }
        let as_written;
        let input = if self.reads_rewrite || input.rewritten.is_none() {
            input
        } else {
            as_written = input.as_written();
            &as_written
        };
        let cand = self.candidates(&input.mentioned)?;
        let mut paths: Vec<Vec<Hop>> = cand.one_hop.iter().map(|h| vec![*h]).collect();
        paths.extend(cand.two_hop.iter().map(|p| p.to_vec()));
        let mut scored: Vec<ScoredPath> = match &self.cfg.kind {
            RetrieverKind::All => paths.into_iter().map(|hops| ScoredPath { hops, score: 1.0, explanation: "candidate".into(), tokens: Vec::new() }).collect(),
            RetrieverKind::Random => {
                let text: String = input.history.iter().map(|m| m.text.as_str()).collect();
                let mut state = self.cfg.seed ^ fnv1a64(text.as_bytes());
                paths
                    .into_iter()
                    .map(|hops| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ScoredPath { hops, score: (state >> 11) as f64 / (1u64 << 53) as f64, explanation: "seeded random".into(), tokens: Vec::new() }
                    })
                    .collect()
            }
            RetrieverKind::Bm25 => {
                let names = self.names_of(&cand)?;
                let scores = bm25::mean_over_last_turns_with(
                    paths.len(),
                    |i, add| paths[i].iter().for_each(|h| names.fact_tokens(h.fact(), add)),
                    input.text_history(),
                    self.cfg.bm25_turns,
                );
                let turns = self.cfg.bm25_turns.max(1).min(input.history.len().max(1));
                paths
                    .into_iter()
                    .zip(scores)
                    .map(|(hops, score)| ScoredPath {
                        hops,
                        score,
                        explanation: format!("bm25 {score:.4}, mean over the last {} messages", turns),
                        tokens: Vec::new(),
                    })
                    .collect()
            }
            RetrieverKind::Katz => {
                let mut inf = Informativeness::new(self.store.clone(), &input.mentioned, self.cfg.katz.clone())?;
                let mut out = Vec::with_capacity(paths.len());
                for hops in paths {
                    // The entities the path reaches, beyond the mentioned start.
                    let reached: Vec<EntityId> = hops.iter().map(|h| h.edge.other).collect();
                    let mut total = 0.0;
                    for &e in &reached {
                        total += inf.score(e)?.value;
                    }
                    let score = total / reached.len() as f64;
                    out.push(ScoredPath { hops, score, explanation: format!("mean informativeness {score:.4}"), tokens: Vec::new() });
                }
                out
            }
            RetrieverKind::Pcst => self.pcst_paths(&cand, paths, input.text_history())?,
            RetrieverKind::Dense(opts) if opts.paths == dense::DensePaths::Facts => {
                let scorer = self.dense.as_ref().expect("a dense retriever has its model");
                let names = self.names_of(&cand)?;
                let mut facts: Vec<Fact> = paths.iter().flat_map(|hops| hops.iter().map(|h| h.fact())).collect();
                facts.sort_unstable();
                facts.dedup();
                let texts: Vec<String> = facts.iter().map(|&f| names.fact_text(f)).collect();
                let keys: Vec<crate::vectors::VectorKey> = facts.iter().map(|&(s, r, o)| crate::vectors::VectorKey::Fact(s, r, o)).collect();
                let q = scorer.query(input.text_history(), scorer.encoder().dir().turns())?;
                let vectors = scorer.keyed_documents(&keys, &texts, self.vectors.as_deref(), q.len())?;
                let dots: hashbrown::HashMap<Fact, f64> = facts.iter().zip(&vectors).map(|(&f, v)| (f, crate::model::encoder::pooling::dot(&q, v))).collect();
                paths
                    .into_iter()
                    .map(|hops| {
                        let score = hops.iter().map(|h| dots[&h.fact()]).sum::<f64>() / hops.len().max(1) as f64;
                        let explanation = format!("dense {score:.4}, mean inner product of its {} fact(s)", hops.len());
                        ScoredPath { hops, score, explanation, tokens: Vec::new() }
                    })
                    .collect()
            }
            RetrieverKind::Dense(_) => {
                let scorer = self.dense.as_ref().expect("a dense retriever has its model");
                let names = self.names_of(&cand)?;
                let texts: Vec<String> = paths.iter().map(|hops| names.path_text(hops)).collect();
                let turns = scorer.encoder().dir().turns();
                let scores = scorer.scores(input.text_history(), turns, &texts)?;
                paths
                    .into_iter()
                    .zip(scores)
                    .map(|(hops, score)| ScoredPath { hops, score, explanation: format!("dense {score:.4}, inner product"), tokens: Vec::new() })
                    .collect()
            }
            RetrieverKind::Surge(_) => {
                let scorer = self.surge.as_ref().expect("a surge retriever has its model");
                self.surge_paths(scorer, input, &cand, paths)?
            }
            RetrieverKind::Search(opts) => {
                let state = self.search.as_ref().expect("a search retriever has its index");
                let mentions = self.linker.link_dialog(input.history)?;
                let found = state.found(input.history, &mentions, opts.queries)?;
                match opts.paths {
                    search::SearchPaths::Facts => search::fact_paths(&self.store, &found)?,
                    search::SearchPaths::Paths => search::candidate_paths(paths, &found),
                }
            }
            // Answered above: a gsr retriever always has its model.
            RetrieverKind::Gsr(_) => return self.rank_batch_own(std::slice::from_ref(input)).map(|mut v| v.pop().unwrap_or_default()),
        };
        // Stable: ties keep candidate order, so results are deterministic.
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(scored)
    }

    /// The PCST instance of a candidate subgraph (what `pcst` solves), for inspection and
    /// for checking the solver against other implementations.
    pub(crate) fn pcst_instance(&self, cand: &Candidates, history: &[Message]) -> Result<pcst::PcstInstance, RetrieveError> {
        let names = self.names_of(cand)?;
        let Some(scorer) = &self.pcst_dense else {
            return Ok(pcst::build_instance(
                cand,
                history,
                self.cfg.bm25_turns,
                &self.cfg.pcst,
                |e, add| names.entity_tokens(e, add),
                |f, add| names.fact_tokens(f, add),
            ));
        };
        pcst::build_instance_with(cand, &self.cfg.pcst, |entities, facts| {
            use crate::vectors::VectorKey;
            let entity_texts: Vec<String> = entities.iter().map(|&e| names.entity_text(e).to_owned()).collect();
            let fact_texts: Vec<String> = facts.iter().map(|&f| names.fact_text(f)).collect();
            let entity_keys: Vec<VectorKey> = entities.iter().map(|&e| VectorKey::Entity(e)).collect();
            let fact_keys: Vec<VectorKey> = facts.iter().map(|&(s, r, o)| VectorKey::Fact(s, r, o)).collect();
            let queries = scorer.queries_over_last_turns(history, self.cfg.bm25_turns)?;
            let stored = self.vectors.as_deref();
            Ok::<_, RetrieveError>((
                scorer.keyed_mean_over_last_turns(&entity_keys, &entity_texts, &queries, stored)?,
                scorer.keyed_mean_over_last_turns(&fact_keys, &fact_texts, &queries, stored)?,
            ))
        })
    }

    fn pcst_paths(&self, cand: &Candidates, paths: Vec<Vec<Hop>>, history: &[Message]) -> Result<Vec<ScoredPath>, RetrieveError> {
        let inst = self.pcst_instance(cand, history)?;
        let chosen = pcst::select_facts(&inst, self.cfg.pcst.pruning)?;
        let index: hashbrown::HashMap<Fact, usize> = inst.facts.iter().enumerate().filter(|&(i, _)| chosen[i]).map(|(i, &f)| (f, i)).collect();
        let variant = match self.cfg.pcst.variant {
            PcstVariant::Seed003 => "seed 003",
            PcstVariant::GRetriever => "G-Retriever",
        };
        let mut seen: hashbrown::HashSet<Vec<usize>> = hashbrown::HashSet::new();
        let mut out = Vec::new();
        for hops in paths {
            // Only paths whose every fact is in the tree (most are not: look before building).
            let Some(ids) = hops.iter().map(|h| index.get(&h.fact()).copied()).collect::<Option<Vec<usize>>>() else { continue };
            let score = ids.iter().map(|&i| inst.fact_relevance[i]).sum::<f64>() / ids.len() as f64;
            if seen.insert(ids) {
                out.push(ScoredPath { hops, score, explanation: format!("in the {variant} Steiner tree; mean fact relevance {score:.4}"), tokens: Vec::new() });
            }
        }
        Ok(out)
    }

    /// The capped candidate subgraph of `mentioned` (`candidate_subgraph`), each entity's
    /// part read once and kept (this retriever reads one generation: what it keeps stays true).
    pub(crate) fn candidates(&self, mentioned: &[EntityId]) -> Result<Candidates, ReadError> {
        let mut cursor = None;
        candidate_subgraph_with(mentioned, |m| {
            if let Some(c) = self.candidates.lock().unwrap_or_else(|e| e.into_inner()).get(&m) {
                return Ok(c.clone());
            }
            let cursor = cursor.get_or_insert_with(|| self.store.neighbor_cursor());
            let mut c = entity_candidates(cursor, m, &self.cfg.candidates)?;
            c.two_hop.shrink_to_fit();
            let c = Arc::new(c);
            let mut cache = self.candidates.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= CANDIDATE_CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(m, c.clone());
            Ok(c)
        })
    }

    /// The names of a candidate subgraph's entities and relations: from the cache, the rest
    /// in two batched reads.
    fn names_of(&self, cand: &Candidates) -> Result<Names, ReadError> {
        self.names_of_facts(cand.facts())
    }

    /// The "head relation tail ..." texts of paths (as the dense retriever and the reranker
    /// read them), names from the cache.
    fn path_texts(&self, paths: &[&[Hop]]) -> Result<Vec<String>, ReadError> {
        let names = self.names_of_facts(paths.iter().flat_map(|p| p.iter().map(|h| h.fact())))?;
        Ok(paths.iter().map(|p| names.path_text(p)).collect())
    }

    fn names_of_facts(&self, facts: impl Iterator<Item = Fact>) -> Result<Names, ReadError> {
        let (es, rs) = distinct_terms(facts);
        let mut names = Names { entities: hashbrown::HashMap::with_capacity(es.len()), relations: hashbrown::HashMap::with_capacity(rs.len()) };
        let (mut missing_e, mut missing_r) = (Vec::new(), Vec::new());
        {
            let cache = self.names.lock().unwrap_or_else(|e| e.into_inner());
            for e in es {
                match cache.entities.get(&e) {
                    Some(n) => drop(names.entities.insert(e, n.clone())),
                    None => missing_e.push(e),
                }
            }
            for r in rs {
                match cache.relations.get(&r) {
                    Some(n) => drop(names.relations.insert(r, n.clone())),
                    None => missing_r.push(r),
                }
            }
        }
        if missing_e.is_empty() && missing_r.is_empty() {
            return Ok(names);
        }
        let read_e = self.store.entity_names(&missing_e)?;
        let read_r = self.store.relation_names(&missing_r)?;
        let mut cache = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if cache.entities.len() + missing_e.len() > NAME_CACHE_ENTRIES {
            cache.entities.clear();
        }
        for (e, n) in missing_e.into_iter().zip(read_e) {
            let n = Term::new(n.unwrap_or_default());
            cache.entities.insert(e, n.clone());
            names.entities.insert(e, n);
        }
        for (r, n) in missing_r.into_iter().zip(read_r) {
            let n = Term::new(relation_phrase(&n.unwrap_or_default()));
            cache.relations.insert(r, n.clone());
            names.relations.insert(r, n);
        }
        Ok(names)
    }

    fn entity_name(&self, e: EntityId) -> Result<String, ReadError> {
        Ok(self.store.entity(e)?.map(|r| r.name).unwrap_or_default())
    }

    /// "head relation tail", the relation name lowercased with `_`/`-` as spaces.
    pub fn verbalize_fact(&self, (s, r, o): Fact) -> Result<String, ReadError> {
        let rel = self.store.relation(r)?.map(|r| r.name).unwrap_or_default();
        Ok(format!("{} {} {}", self.entity_name(s)?, relation_phrase(&rel), self.entity_name(o)?))
    }

    /// A path's facts verbalized one after the other.
    pub fn verbalize(&self, hops: &[Hop]) -> Result<String, ReadError> {
        let parts = hops.iter().map(|h| self.verbalize_fact(h.fact())).collect::<Result<Vec<_>, _>>()?;
        Ok(parts.join(" "))
    }
}

/// The bi-encoder whose stored vectors a retriever reads: PCST's with dense prizes, or the
/// dense retriever's when it scores paths by their facts (`dense_paths facts`). Scoring
/// whole path texts reads none, so a damaged vector file cannot fail it.
fn vector_reader<'a>(
    cfg: &RetrieverConfig,
    dense: &'a Option<Arc<dense::DenseScorer>>,
    pcst_dense: &'a Option<Arc<dense::DenseScorer>>,
) -> Option<&'a Arc<dense::DenseScorer>> {
    match &cfg.kind {
        RetrieverKind::Dense(opts) if opts.paths == dense::DensePaths::Facts => dense.as_ref(),
        _ => pcst_dense.as_ref(),
    }
}

/// The vector file of `scorer`'s model in `store`'s generation, when there is one (the
/// model's identity, a hash of its files, is computed only for a store with vector files).
fn stored_vectors(store: &Store, scorer: Option<&Arc<dense::DenseScorer>>) -> Result<Option<Arc<crate::vectors::StoredVectors>>, RetrieveError> {
    let Some(scorer) = scorer else { return Ok(None) };
    if !store.generation_dir().join(crate::vectors::VECTORS_DIR).is_dir() {
        return Ok(None);
    }
    Ok(crate::vectors::StoredVectors::open(store, scorer.vectors_id()?)?.map(Arc::new))
}

/// A relation name as words, as the default linearization writes it (lowercased, `_` and
/// `-` as spaces).
fn relation_phrase(name: &str) -> String {
    static TRELLIS: std::sync::LazyLock<crate::linearize::Linearization> = std::sync::LazyLock::new(crate::linearize::Linearization::trellis);
    TRELLIS.relation_text(name)
}

/// Entities whose name tokens a retriever keeps between calls (some 100-200 bytes each,
/// so tens of MB at most); past it, the cache starts over. Relations are few and all kept.
const NAME_CACHE_ENTRIES: usize = 200_000;

/// Mentioned entities whose candidates a retriever keeps (at most ~6 KB each under the
/// default caps, ~24 MB in all; each retriever of a rerank pool has its own; emptied when full).
const CANDIDATE_CACHE_ENTRIES: usize = 4096;

#[derive(Default)]
struct NameCache {
    entities: hashbrown::HashMap<EntityId, std::sync::Arc<Term>>,
    relations: hashbrown::HashMap<crate::ids::RelationId, std::sync::Arc<Term>>,
}

/// An entity name or a relation phrase, and its BM25 tokens.
struct Term {
    text: String,
    tokens: Vec<String>,
}

impl Term {
    fn new(text: String) -> std::sync::Arc<Term> {
        std::sync::Arc::new(Term { tokens: bm25::tokenize(&text), text })
    }
}

/// The tokens of the names a candidate subgraph needs (entity names, relation phrases).
struct Names {
    entities: hashbrown::HashMap<EntityId, std::sync::Arc<Term>>,
    relations: hashbrown::HashMap<crate::ids::RelationId, std::sync::Arc<Term>>,
}

impl Names {
    /// The BM25 tokens of an entity's name.
    fn entity_tokens(&self, e: EntityId, add: &mut dyn FnMut(&str)) {
        if let Some(t) = self.entities.get(&e) {
            t.tokens.iter().for_each(|x| add(x));
        }
    }

    /// An entity's name (empty when it has none).
    fn entity_text(&self, e: EntityId) -> &str {
        self.entities.get(&e).map_or("", |t| t.text.as_str())
    }

    /// A relation's phrase (empty when it has none).
    fn relation_text(&self, r: crate::ids::RelationId) -> &str {
        self.relations.get(&r).map_or("", |t| t.text.as_str())
    }

    /// "head relation tail", as [`Retriever::verbalize_fact`] writes it.
    fn fact_text(&self, (s, r, o): Fact) -> String {
        let rel = self.relations.get(&r).map_or("", |t| t.text.as_str());
        format!("{} {rel} {}", self.entity_text(s), self.entity_text(o))
    }

    /// A path's facts, "head relation tail" each, joined by spaces ([`Retriever::verbalize`]).
    fn path_text(&self, hops: &[Hop]) -> String {
        hops.iter().map(|h| self.fact_text(h.fact())).collect::<Vec<_>>().join(" ")
    }

    /// The BM25 tokens of "head relation tail": the tokens of the three, since a space
    /// separates tokens.
    fn fact_tokens(&self, (s, r, o): Fact, add: &mut dyn FnMut(&str)) {
        self.entity_tokens(s, add);
        if let Some(t) = self.relations.get(&r) {
            t.tokens.iter().for_each(|x| add(x));
        }
        self.entity_tokens(o, add);
    }
}

#[cfg(test)]
mod rewrite_input_tests;
