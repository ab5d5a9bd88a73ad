//! The generative retriever (DialogGSR): a T5 retriever writes linearized paths token by
//! token under the constraint automaton (`decode::automaton`), mixed with the graph prior,
//! by beam search (`decode::beam`). Many dialogs decode together: their beams are the rows
//! of one decoder call.
//!
//! Multi-step retrieval (the paper's Fig. 1): step k > 0 encodes the dialog again with the
//! paths retrieved so far appended (`model::dir` writes the text) and keeps the best path not
//! yet retrieved; the last step keeps all its new paths.

use crate::decode::automaton::{Boundaries, CandidateMode, DecodeError, DecodedPath, PathGraph, State};
use crate::decode::beam::{beam_search, Allowed, Constraint, Hypothesis, ModelNorm, SearchConfig, SearchError, Unconstrained};
use crate::decode::prior::{PriorConfig, PriorMode, PriorNorm};
use crate::graph::candidates::Hop;
use crate::graph::informativeness::KatzConfig;
use crate::ids::Direction;
use crate::limits::{self, OutOfRange, TooMuchMemory};
use crate::linearize::HopText;
use crate::model::dir::{FieldProblem, InputEntity, ModelDir, ModelDirError, TaskSection, TOKENIZER_FILE};
use crate::model::session::{RuntimeOptions, Seq2Seq, Seq2SeqError, SessionSteps};
use crate::store::error::ReadError;
use crate::store::tokens::{TokenIndex, TokenIndexError};
use crate::store::Store;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::RetrievalInput;

/// Decoding settings: `trellis.json`'s `decoding`, overridden field by field.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct GsrOverrides {
    /// How the decoder is constrained and scored (`decoding.prior`).
    pub prior: Option<PriorMode>,
    /// How entity masses become probabilities (`decoding.prior_norm`).
    pub prior_norm: Option<PriorNorm>,
    /// Weight of the model's log-probability against the log prior, 0..=1 (`decoding.alpha`).
    pub alpha: Option<f64>,
    /// Added to each entity's score under the proportional prior, 0..=1e6 (`decoding.prior_epsilon`).
    pub prior_epsilon: Option<f64>,
    /// gamma of the prior's start recency, 0..=1e6 (0: off; `decoding.start_recency`).
    pub start_recency: Option<f64>,
    /// The model's log-softmax over the vocabulary or the allowed tokens (`decoding.model_norm`).
    pub model_norm: Option<ModelNorm>,
    /// Beams per dialog, 1..=64 (`decoding.beams`).
    pub beams: Option<usize>,
    /// Paths returned per dialog, 1..=`beams` (`decoding.return_sequences`; its default is cut to `beams`).
    pub return_sequences: Option<usize>,
    /// Beam search's length penalty, -100..=100 (`decoding.length_penalty`).
    pub length_penalty: Option<f64>,
    /// Tokens a path may take at most, 1..=1024 (`decoding.max_new_tokens`).
    pub max_new_tokens: Option<usize>,
}

/// How to build a generative retriever.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GsrOptions {
    /// The exported model's directory (`schema/model.md`).
    pub model: PathBuf,
    /// ONNX Runtime's threads, sessions and decoder layout.
    pub runtime: RuntimeOptions,
    /// Settings that replace `trellis.json`'s `decoding` (`None`: the file's).
    pub overrides: GsrOverrides,
    /// Retrieval steps (the paper's multi-step retrieval); 1 by default.
    pub steps: usize,
    /// Dialogs decoded together in one batch of decoder calls.
    pub batch: usize,
}

impl GsrOptions {
    /// Options for the model at `model`, with the defaults: one step, batches of 8, no overrides.
    pub fn new(model: impl Into<PathBuf>) -> GsrOptions {
        GsrOptions { model: model.into(), runtime: RuntimeOptions::default(), overrides: GsrOverrides::default(), steps: 1, batch: 8 }
    }

    /// Every numeric setting given here within its range of `crate::limits` (those left to
    /// `trellis.json` were checked when it was read; `return_sequences` against `beams` and
    /// the memory of a batch are checked when the model is opened).
    pub fn validate(&self) -> Result<(), OutOfRange> {
        limits::STEPS.check_usize(self.steps)?;
        limits::BATCH.check_usize(self.batch)?;
        limits::check_runtime(self.runtime.threads, self.runtime.sessions)?;
        let o = &self.overrides;
        if let Some(v) = o.alpha {
            limits::ALPHA.check(v)?;
        }
        if let Some(v) = o.prior_epsilon {
            limits::PRIOR_EPSILON.check(v)?;
        }
        if let Some(v) = o.start_recency {
            limits::START_RECENCY.check(v)?;
        }
        if let Some(v) = o.beams {
            limits::BEAMS.check_usize(v)?;
        }
        if let Some(v) = o.return_sequences {
            limits::RETURN_SEQUENCES.check_usize(v)?;
        }
        if let Some(v) = o.length_penalty {
            limits::LENGTH_PENALTY.check(v)?;
        }
        if let Some(v) = o.max_new_tokens {
            limits::MAX_NEW_TOKENS.check_usize(v)?;
        }
        Ok(())
    }
}

/// The settings a retriever decodes with, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct GsrSettings {
    /// How the decoder is constrained and scored.
    pub prior: PriorMode,
    /// How entity masses become probabilities.
    pub prior_norm: PriorNorm,
    /// Weight of the model's log-probability against the log prior (0..=1).
    pub alpha: f64,
    /// Added to each entity's score under the proportional prior.
    pub prior_epsilon: f64,
    /// gamma of the prior's start recency (0: off).
    pub start_recency: f64,
    /// The beam search's settings (`alpha` set only for the `connection` and `katz` priors).
    pub search: SearchConfig,
    /// Retrieval steps.
    pub steps: usize,
    /// Dialogs decoded together: at most the batch asked for, cut to what fits the decoding memory budget.
    pub batch: usize,
}

/// Opening or running the generative retriever.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GsrError {
    /// The model could not be loaded or run.
    #[error(transparent)]
    Model(#[from] Seq2SeqError),
    /// The model directory cannot be used.
    #[error(transparent)]
    ModelDir(#[from] ModelDirError),
    /// The store has no usable token index for the model's tokenizer and linearization.
    #[error("{model}: {source}")]
    TokenIndex {
        /// The model directory.
        model: PathBuf,
        /// Why the index cannot be used.
        source: TokenIndexError,
    },
    /// As `TokenIndex`, for a model directory without `trellis.json`: its defaults were
    /// used, and the index does not fit them (often: the model needs its `trellis.json`).
    #[error("{model} has no trellis.json, so its defaults were used (linearization dialoggsr): {source}")]
    TokenIndexWithDefaults {
        /// The model directory.
        model: PathBuf,
        /// Why the index cannot be used.
        source: TokenIndexError,
    },
    /// The constraint automaton failed (boundaries the tokenizer cannot write, a state from elsewhere).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Reading the store failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A path cannot be written with the model's linearization.
    #[error(transparent)]
    Linearize(#[from] crate::linearize::LinearizeError),
    /// Boxed: the search's error is the biggest, and every caller's `Result` carries it.
    #[error("beam search: {0}")]
    Search(Box<SearchError<Seq2SeqError, DecodeError>>),
    /// The model directory's `trellis.json` names another task.
    #[error("{model}: trellis.json says the model is a {task:?}, not a retriever")]
    NotARetriever {
        /// The model directory.
        model: PathBuf,
        /// The task it names.
        task: String,
    },
    /// A setting outside its range (`crate::limits`).
    #[error("{0}")]
    Setting(#[from] OutOfRange),
    /// Even one dialog of a batch would hold more decoding memory than the budget.
    #[error("{0}")]
    Memory(#[from] TooMuchMemory),
}

/// One retrieved path with how the model wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct GsrPath {
    /// The path: its entities and relations.
    pub path: DecodedPath,
    /// The hypothesis' score (`sum / generated_len ^ length_penalty`).
    pub score: f64,
    /// The generated tokens (EOS included).
    pub tokens: Vec<u32>,
    /// Per token: the model's log-probability and the log prior.
    pub token_scores: Vec<(f64, f64)>,
    /// The retrieval step that found it (0-based).
    pub step: usize,
}

/// A generative retriever over one store: the model (a pool of sessions), the token index
/// of its tokenizer, and the decoding settings. `Send + Sync`; build once, call from many
/// threads (each call takes a session from the pool).
pub struct GsrRetriever {
    store: Arc<Store>,
    model: Arc<Seq2Seq>,
    index: TokenIndex,
    boundaries: Boundaries,
    settings: GsrSettings,
    katz: KatzConfig,
    search_ns: AtomicU64,
    encode_ns: AtomicU64,
}

/// Where decoding time went, summed over every call since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GsrTimings {
    /// Wall time inside beam search (decoder calls, the automaton, the prior, the search).
    pub search_ns: u64,
    /// Wall time encoding the dialogs.
    pub encode_ns: u64,
    /// Decoder calls, and the time inside ONNX Runtime's `run` for them.
    pub decoder_steps: u64,
    /// Of those, the calls that computed only the allowed tokens' logits
    /// (`decoder_listed_model.onnx`, under `model_norm: allowed`).
    pub decoder_listed_steps: u64,
    /// Tokens fed to the decoder in those calls (every beam's row).
    pub decoder_tokens: u64,
    /// Time inside ONNX Runtime's `run` for the decoder calls.
    pub decoder_run_ns: u64,
    /// The model's own work around `run` (inputs, outputs, cache reorders).
    pub decoder_outside_ns: u64,
}

impl GsrTimings {
    /// The share of beam-search time spent outside ONNX Runtime.
    pub fn outside_share(&self) -> f64 {
        if self.search_ns == 0 {
            return 0.0;
        }
        self.search_ns.saturating_sub(self.decoder_run_ns) as f64 / self.search_ns as f64
    }
}

/// The encoder input ids of a request for a model directory (one definition, shared by the
/// retriever and the training targets): its messages, its linked entities with their
/// recency when the model's input shows them, and the paths of earlier steps.
pub fn encoder_input_ids(store: &Store, dir: &ModelDir, input: &RetrievalInput<'_>, previous_paths: &[String]) -> Result<Vec<u32>, GsrError> {
    let mut entities = Vec::new();
    if dir.shows_entities() {
        let names = store.entity_names(&input.mentioned)?;
        for (i, name) in names.into_iter().enumerate() {
            let age = input.ages.get(i).copied().unwrap_or(0);
            entities.push(InputEntity { name: name.unwrap_or_default(), age });
        }
    }
    Ok(dir.encode_history(input.text_history(), &entities, previous_paths)?)
}

/// The beam search's view of one request's automaton (borrowed: it outlives the search).
struct GraphConstraint<'r, 'a> {
    graph: &'r mut PathGraph<'a>,
}

impl Constraint for GraphConstraint<'_, '_> {
    type State = State;
    type Error = DecodeError;
    fn start(&mut self) -> Result<State, DecodeError> {
        Ok(self.graph.start())
    }
    fn allowed(&mut self, state: &State, out: &mut Vec<(u32, f64)>) -> Result<Allowed, DecodeError> {
        self.graph.allowed(state, out)?;
        Ok(Allowed::Listed)
    }
    fn advance(&mut self, state: &State, token: u32) -> Result<State, DecodeError> {
        // The search takes only offered tokens; anything else is a bug, reported.
        self.graph.advance(state, token)?.ok_or(DecodeError::NotAllowed { token })
    }
}

/// The fewest tokens a one-hop path takes (`[HEAD] e [Int1] r [Int2] e [TAIL]` and EOS): its
/// boundary tokens, one token for each of the three names at least, and EOS.
fn shortest_path_tokens(lin: &crate::linearize::Linearization) -> usize {
    let hop = (lin.int[0].len() + lin.int[1].len()).min(lin.rev[0].len() + lin.rev[1].len());
    lin.head.len() + hop + lin.tail.len() + 3 + 1
}

/// `trellis.json` `decoding`: the defaults command-line flags override.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct DecodingConfig {
    /// Beams per dialog, 1..=64 (default 5).
    pub beams: usize,
    /// Paths returned per dialog, 1..=`beams` (default 5).
    pub return_sequences: usize,
    /// Weight of the model's log-probability against the log prior, 0..=1 (default 0.8).
    pub alpha: f64,
    /// How the decoder is constrained and scored (default `katz`).
    pub prior: PriorMode,
    /// How entity masses become probabilities (default `proportional`).
    pub prior_norm: PriorNorm,
    /// Added to each entity's score under the proportional prior, 0..=1e6 (default 0.001).
    pub prior_epsilon: f64,
    /// gamma of the prior's start recency (0: off; src/decode/prior.rs).
    pub start_recency: f64,
    /// The model's log-softmax over the vocabulary or over the allowed tokens.
    pub model_norm: ModelNorm,
    /// Beam search's length penalty, -100..=100 (default 1).
    pub length_penalty: f64,
    /// Tokens a path may take at most, 1..=1024 (default 64).
    pub max_new_tokens: usize,
    /// A dialog is done once it has `beams` finished paths (default true).
    pub early_stopping: bool,
}

impl Default for DecodingConfig {
    fn default() -> Self {
        DecodingConfig {
            beams: 5,
            return_sequences: 5,
            alpha: 0.8,
            prior: PriorMode::Katz,
            prior_norm: PriorNorm::Proportional,
            prior_epsilon: 0.001,
            start_recency: 0.0,
            model_norm: ModelNorm::Vocabulary,
            length_penalty: 1.0,
            max_new_tokens: 64,
            early_stopping: true,
        }
    }
}

impl TaskSection for DecodingConfig {
    const FIELD: &'static str = "decoding";
    const TASK: &'static str = "retriever";

    fn check(&self) -> Result<(), (String, FieldProblem)> {
        use crate::limits::*;
        let range = |e: OutOfRange| (e.name().to_owned(), FieldProblem::OutOfRange { range: e.range().into(), value: e.value().into() });
        BEAMS.check_usize(self.beams).map_err(range)?;
        RETURN_SEQUENCES.up_to(self.beams as u64).check_usize(self.return_sequences).map_err(range)?;
        ALPHA.check(self.alpha).map_err(range)?;
        PRIOR_EPSILON.check(self.prior_epsilon).map_err(range)?;
        START_RECENCY.check(self.start_recency).map_err(range)?;
        LENGTH_PENALTY.check(self.length_penalty).map_err(range)?;
        MAX_NEW_TOKENS.check_usize(self.max_new_tokens).map_err(range)?;
        Ok(())
    }
}

fn search_error<C: Into<DecodeError>>(e: SearchError<Seq2SeqError, C>) -> GsrError {
    GsrError::Search(Box::new(match e {
        SearchError::Model(m) => SearchError::Model(m),
        SearchError::Constraint(c) => SearchError::Constraint(c.into()),
        SearchError::LogitsShape { got, rows, vocab } => SearchError::LogitsShape { got, rows, vocab },
        SearchError::NaN { row, token } => SearchError::NaN { row, token },
        SearchError::TokenOutOfRange { token, vocab } => SearchError::TokenOutOfRange { token, vocab },
    }))
}

impl GsrRetriever {
    /// Loads the model and opens the token index of its tokenizer (built by `trellis
    /// index-tokens --tokenizer MODEL/tokenizer.json --linearization ...`).
    pub fn open(store: Arc<Store>, opts: &GsrOptions, katz: &KatzConfig) -> Result<GsrRetriever, GsrError> {
        opts.validate()?;
        let model_dir = ModelDir::open(&opts.model, opts.runtime.layout).map_err(Seq2SeqError::from)?;
        if model_dir.trellis().task != "retriever" {
            return Err(GsrError::NotARetriever { model: opts.model.clone(), task: model_dir.trellis().task.clone() });
        }
        let d: DecodingConfig = model_dir.section()?;
        // The listed-logits step is loaded only for the decoding that uses it.
        let lists = opts.overrides.model_norm.unwrap_or(d.model_norm) == ModelNorm::Allowed;
        let model = Arc::new(Seq2Seq::with_dir_listing(model_dir, &opts.runtime, lists)?);
        let dir = model.dir();
        let lin = dir.linearization().clone();
        let index = TokenIndex::open(store.clone(), dir.names().fingerprint(), &lin).map_err(|e| {
            let source = e.with_tokenizer(&dir.path().join(TOKENIZER_FILE));
            if dir.has_trellis_file() {
                GsrError::TokenIndex { model: opts.model.clone(), source }
            } else {
                GsrError::TokenIndexWithDefaults { model: opts.model.clone(), source }
            }
        })?;
        let cfg = dir.config();
        let boundaries = Boundaries::new(&lin, dir.tokenizer(), cfg.eos_token_id)?;
        let o = &opts.overrides;
        let prior = o.prior.unwrap_or(d.prior);
        // Each value is `trellis.json`'s (checked when read) or an override (checked above).
        let alpha = o.alpha.unwrap_or(d.alpha);
        let start_recency = o.start_recency.unwrap_or(d.start_recency);
        let beams = o.beams.unwrap_or(d.beams);
        // The model's default follows a lower --beams; a number asked for must fit.
        let return_sequences = match o.return_sequences {
            Some(r) => limits::RETURN_SEQUENCES.up_to(beams as u64).check_usize(r)?,
            None => d.return_sequences.min(beams),
        };
        let max_new_tokens = o.max_new_tokens.unwrap_or(d.max_new_tokens);
        let shortest = shortest_path_tokens(&lin);
        if max_new_tokens < shortest {
            return Err(GsrError::Setting(limits::MAX_NEW_TOKENS.refuse(max_new_tokens).with_range(format!(
                "at least {shortest} with the {} linearization (its shortest path: five or more boundary tokens, three names and EOS)",
                lin.name
            ))));
        }
        let shape = limits::DecoderShape { layers: cfg.num_decoder_layers, heads: cfg.num_heads, d_kv: cfg.d_kv, vocab: cfg.vocab_size as usize };
        let batch =
            limits::batch_that_fits(shape, opts.batch, beams, crate::model::session::padded_batch_length(dir.trellis().input.max_tokens), max_new_tokens)?;
        let settings = GsrSettings {
            prior,
            prior_norm: o.prior_norm.unwrap_or(d.prior_norm),
            alpha,
            prior_epsilon: o.prior_epsilon.unwrap_or(d.prior_epsilon),
            start_recency,
            search: SearchConfig {
                beams,
                return_sequences,
                length_penalty: o.length_penalty.unwrap_or(d.length_penalty),
                max_new_tokens,
                early_stopping: d.early_stopping,
                // `hard` and `none` score with the model alone.
                alpha: matches!(prior, PriorMode::Connection | PriorMode::Katz).then_some(alpha),
                model_norm: o.model_norm.unwrap_or(d.model_norm),
                start_token: cfg.decoder_start_token_id,
                eos_token: cfg.eos_token_id,
            },
            steps: opts.steps,
            // What fits in `limits::DECODE_MEMORY_BUDGET`: at most the batch asked for.
            batch,
        };
        Ok(GsrRetriever { store, model, index, boundaries, settings, katz: katz.clone(), search_ns: AtomicU64::new(0), encode_ns: AtomicU64::new(0) })
    }

    /// The same retriever (its model and session pool shared) over another generation of
    /// its store: the token index is opened there, nothing else is read again.
    pub(crate) fn on_store(&self, store: Arc<Store>, model_path: &std::path::Path) -> Result<GsrRetriever, GsrError> {
        let dir = self.model.dir();
        let index = TokenIndex::open(store.clone(), dir.names().fingerprint(), dir.linearization()).map_err(|e| {
            let source = e.with_tokenizer(&dir.path().join(TOKENIZER_FILE));
            if dir.has_trellis_file() {
                GsrError::TokenIndex { model: model_path.to_path_buf(), source }
            } else {
                GsrError::TokenIndexWithDefaults { model: model_path.to_path_buf(), source }
            }
        })?;
        Ok(GsrRetriever {
            store,
            model: self.model.clone(),
            index,
            boundaries: self.boundaries.clone(),
            settings: self.settings.clone(),
            katz: self.katz.clone(),
            search_ns: AtomicU64::new(0),
            encode_ns: AtomicU64::new(0),
        })
    }

    /// The resolved decoding settings.
    pub fn settings(&self) -> &GsrSettings {
        &self.settings
    }

    /// The model and its session pool.
    pub fn model(&self) -> &Seq2Seq {
        &self.model
    }

    /// Where decoding time went, summed over every call since open.
    pub fn timings(&self) -> GsrTimings {
        let m = self.model.timings();
        GsrTimings {
            search_ns: self.search_ns.load(Ordering::Relaxed),
            encode_ns: self.encode_ns.load(Ordering::Relaxed),
            decoder_steps: m.steps,
            decoder_listed_steps: m.listed_steps,
            decoder_tokens: m.tokens,
            decoder_run_ns: m.run_ns,
            decoder_outside_ns: m.outside_ns,
        }
    }

    fn prior_config(&self) -> PriorConfig {
        let mut p = PriorConfig::new(self.settings.prior, self.settings.prior_norm, self.settings.prior_epsilon);
        p.katz = self.katz.clone();
        p.start_recency = self.settings.start_recency;
        p
    }

    /// The text of a path as the linearization writes it (for multi-step inputs).
    fn path_text(&self, hops: &[Hop]) -> Result<String, GsrError> {
        let lin = self.model.dir().linearization();
        let mut es = vec![hops[0].from];
        es.extend(hops.iter().map(|h| h.edge.other));
        let rs: Vec<_> = hops.iter().map(|h| h.edge.relation).collect();
        let en = self.store.entity_names(&es)?;
        let rn = self.store.relation_names(&rs)?;
        let name = |n: &Option<String>| n.clone().unwrap_or_default();
        let texts: Vec<(String, String)> = hops.iter().enumerate().map(|(i, _)| (name(&rn[i]), name(&en[i + 1]))).collect();
        let hop_texts: Vec<HopText<'_>> =
            hops.iter().zip(&texts).map(|(h, (r, to))| HopText { relation: r, reversed: h.edge.direction == Direction::In, to }).collect();
        Ok(lin.render_path(&name(&en[0]), &hop_texts)?)
    }

    /// The encoder input ids of a request (schema/gsr-decoding.md §2): its messages, its
    /// linked entities when the model's input shows them, and the paths of earlier steps.
    pub fn encoder_ids(&self, input: &RetrievalInput<'_>, previous_paths: &[String]) -> Result<Vec<u32>, GsrError> {
        encoder_input_ids(&self.store, self.model.dir(), input, previous_paths)
    }

    /// Retrieves for many dialogs; per input its paths, best first (at most
    /// `return_sequences` per step). Inputs are decoded `batch` at a time.
    pub fn retrieve_batch(&self, inputs: &[RetrievalInput<'_>], mode: &CandidateMode) -> Result<Vec<Vec<GsrPath>>, GsrError> {
        let mut out = Vec::with_capacity(inputs.len());
        for chunk in inputs.chunks(self.settings.batch) {
            out.extend(self.retrieve_chunk(chunk, mode)?);
        }
        Ok(out)
    }

    fn retrieve_chunk(&self, inputs: &[RetrievalInput<'_>], mode: &CandidateMode) -> Result<Vec<Vec<GsrPath>>, GsrError> {
        let mut graphs = Vec::with_capacity(inputs.len());
        for input in inputs {
            let mut graph = PathGraph::new(self.store.clone(), &self.index, &self.boundaries, &input.mentioned, mode.clone(), self.prior_config())?;
            graph.set_ages(&input.mentioned, &input.ages)?;
            graphs.push(graph);
        }
        let mut found: Vec<Vec<GsrPath>> = vec![Vec::new(); inputs.len()];
        let mut texts: Vec<Vec<String>> = vec![Vec::new(); inputs.len()];
        let mut guard = self.model.session()?;
        for step in 0..self.settings.steps {
            let last = step + 1 == self.settings.steps;
            // Only requests with candidates are decoded (an empty one has no path).
            let mut live = Vec::new();
            for (i, g) in graphs.iter_mut().enumerate() {
                if !g.is_empty()? {
                    live.push(i);
                }
            }
            if live.is_empty() {
                break;
            }
            let mut ids = Vec::with_capacity(live.len());
            for &i in &live {
                ids.push(self.encoder_ids(&inputs[i], &texts[i])?);
            }
            let t = Instant::now();
            let enc = guard.encode(&ids)?;
            self.encode_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            let t = Instant::now();
            let rows: Vec<usize> = (0..live.len()).collect();
            let state = guard.start(&enc, &rows)?;
            let mut steps = SessionSteps { guard: &mut guard, state, vocab: self.model.config().vocab_size as usize };
            let hyps: Vec<Vec<(Hypothesis<()>, Option<DecodedPath>)>> = if self.settings.prior == PriorMode::None {
                let mut free = vec![Unconstrained; live.len()];
                let hyps = beam_search(&mut steps, &mut free, &self.settings.search).map_err(search_error)?;
                let mut parsed = Vec::with_capacity(hyps.len());
                for (k, hs) in hyps.into_iter().enumerate() {
                    let g = &mut graphs[live[k]];
                    let mut v = Vec::with_capacity(hs.len());
                    for h in hs {
                        let p = g.parse(&h.tokens)?;
                        v.push((h, p));
                    }
                    parsed.push(v);
                }
                parsed
            } else {
                let mut cons: Vec<GraphConstraint<'_, '_>> =
                    graphs.iter_mut().enumerate().filter(|(i, _)| live.binary_search(i).is_ok()).map(|(_, graph)| GraphConstraint { graph }).collect();
                let hyps = beam_search(&mut steps, &mut cons, &self.settings.search).map_err(search_error)?;
                drop(cons);
                hyps.into_iter()
                    .enumerate()
                    .map(|(k, hs)| {
                        let g = &graphs[live[k]];
                        hs.into_iter()
                            .map(|h| {
                                let p = g.path(&h.state);
                                (Hypothesis { tokens: h.tokens, score: h.score, sum: h.sum, token_scores: h.token_scores, state: () }, p)
                            })
                            .collect()
                    })
                    .collect()
            };
            self.search_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            for (k, hs) in hyps.into_iter().enumerate() {
                let i = live[k];
                let mut added = 0;
                for (h, p) in hs {
                    // A sequence cut at max_new_tokens, or (unconstrained) one that is no
                    // path of the store, retrieves nothing.
                    let Some(path) = p else { continue };
                    if found[i].iter().any(|f| f.path.hops == path.hops) {
                        continue;
                    }
                    if !last && added == 1 {
                        break;
                    }
                    texts[i].push(self.path_text(&path.hops)?);
                    found[i].push(GsrPath { path, score: h.score, tokens: h.tokens, token_scores: h.token_scores, step });
                    added += 1;
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod section_tests {
    use super::*;
    use crate::model::dir::TrellisConfig;
    use serde_json::json;
    use std::path::Path;

    fn parse(v: serde_json::Value) -> Result<DecodingConfig, ModelDirError> {
        let p = Path::new("m/trellis.json");
        TrellisConfig::from_value(p, v)?.section(p)
    }

    #[test]
    fn the_decoding_section() {
        let d = parse(json!({})).unwrap();
        assert_eq!(d, DecodingConfig::default());
        assert_eq!((d.beams, d.alpha, d.model_norm, d.start_recency), (5, 0.8, ModelNorm::Vocabulary, 0.0));
        let d = parse(json!({"linearization": "trellis", "decoding": {"beams": 8, "prior": "hard", "prior_norm": "softmax"}})).unwrap();
        assert_eq!((d.beams, d.return_sequences, d.prior, d.prior_norm), (8, 5, PriorMode::Hard, PriorNorm::Softmax));
        assert_eq!(parse(json!({"decoding": {"model_norm": "allowed"}})).unwrap().model_norm, ModelNorm::Allowed);
        let e = parse(json!({"decoding": {"model_norm": "allowed_tokens"}})).unwrap_err();
        assert!(e.to_string().contains("unknown variant `allowed_tokens`"), "{e}");
        assert_eq!(parse(json!({"decoding": {"start_recency": 32.0}})).unwrap().start_recency, 32.0);
        let e = parse(json!({"decoding": {"start_recency": -1.0}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `decoding.start_recency`: must be a finite number within [0, 1000000], not -1");
        let e = parse(json!({"decoding": {"beam": 3}})).unwrap_err();
        assert!(matches!(e, ModelDirError::Json { .. }) && e.to_string().contains("unknown field `beam`"), "{e}");
        let e = parse(json!({"decoding": {"beams": 2}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `decoding.return_sequences`: must be within 1..=2, not 5");
        let e = parse(json!({"decoding": {"alpha": 1.5}})).unwrap_err();
        assert!(matches!(&e, ModelDirError::Field { field, .. } if field == "decoding.alpha"), "{e:?}");
        let e = parse(json!({"decoding": {"prior": "strong"}})).unwrap_err();
        assert!(matches!(e, ModelDirError::Json { .. }), "{e:?}");
        // Inside the old documented range, but 1000 beams of a batch of 8 took 1.3 GB a chunk.
        let e = parse(json!({"decoding": {"beams": 1000}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `decoding.beams`: must be within 1..=64, not 1000");
        let e = parse(json!({"task": "generator"})).unwrap_err();
        assert!(e.to_string().contains("field `task`"), "a generator's directory has no decoding section to read: {e}");
    }
}
