//! `trellis retrieve`: batch retrieval over JSON lines, in parallel, output in input order.

use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::decode::{ModelNorm, PriorMode, PriorNorm};
use trellis::graph::pcst::Pruning;
use trellis::graph::CandidateScope;
use trellis::ingest::OnError;
use trellis::limits;
use trellis::model::session::Device;
use trellis::retrieve::dense::DenseOptions;
use trellis::retrieve::gsr::GsrOptions;
use trellis::retrieve::jsonl::{answer_batch, parse_request_bytes, AnswerOptions, Request, RequestError};
use trellis::retrieve::pcst::{PcstConfig, PcstScores, PcstVariant};
use trellis::retrieve::rerank::RerankOptions;
use trellis::retrieve::surge::SurgeOptions;
use trellis::retrieve::{RetrieveError, Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

/// The retrievers by name (the library's `RetrieverKind`, whose `gsr` carries its model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RetrieverName {
    /// Every candidate path, in candidate order.
    All,
    /// The candidates in a seeded random order.
    Random,
    /// BM25 of verbalized paths against the last messages.
    Bm25,
    /// The informativeness of the path's entities.
    Katz,
    /// The paths inside a prize-collecting Steiner tree of the candidates.
    Pcst,
    /// Generative retrieval (DialogGSR; needs --model).
    Gsr,
    /// Dense retrieval: a bi-encoder's inner product (needs --dense-model).
    Dense,
    /// SURGE: a graph neural network over the candidate subgraph scores each fact (needs
    /// --surge-model).
    Surge,
}

impl RetrieverName {
    fn from_text(name: &str) -> Option<RetrieverName> {
        <RetrieverName as clap::ValueEnum>::from_str(name, false).ok()
    }
}

/// Which retriever, and the knobs of those that have any.
#[derive(Args, Clone)]
pub struct RetrieverOptions {
    #[arg(long, value_enum)]
    pub retriever: RetrieverName,
    /// pcst: whose prizes and costs (seed003: rank prizes, facts as virtual nodes at cost
    /// C/2; g-retriever: decayed fact prizes, costs lowered by prizes).
    #[arg(long, value_parser = super::named::<PcstVariant>(PcstVariant::NAMES), default_value_t = PcstVariant::Seed003)]
    pub pcst_variant: PcstVariant,
    /// pcst: pruning after the Goemans-Williamson growth.
    #[arg(long, value_parser = super::named::<Pruning>(Pruning::NAMES), default_value_t = Pruning::Gw)]
    pub pruning: Pruning,
    /// pcst: what ranks entities and facts for the prizes: bm25, or dense (the bi-encoder
    /// of --dense-model, averaged over the same messages).
    #[arg(long, value_parser = ["bm25", "dense"], default_value = "bm25")]
    pub pcst_scores: String,
    /// bm25, pcst: relevance is the mean over the last 1..N messages.
    #[arg(long, default_value_t = 3, value_parser = super::usize_in(&limits::BM25_TURNS), allow_hyphen_values = true)]
    pub bm25_turns: usize,
    /// random: the seed.
    #[arg(long, default_value_t = 42, value_parser = super::u64_in(&limits::SEED), allow_hyphen_values = true)]
    pub seed: u64,
    /// How the history is linked (as `trellis link`); unused by requests that give their entities.
    #[command(flatten)]
    pub link: super::link::LinkOptions,
    /// Candidates: the capped candidate subgraph (every retriever), or the whole 1- and
    /// 2-hop neighbourhood walked lazily (gsr only).
    #[arg(long, value_parser = super::named::<CandidateScope>(CandidateScope::NAMES), default_value_t = CandidateScope::Capped)]
    pub scope: CandidateScope,
    #[command(flatten)]
    pub gsr: GsrArgs,
    #[command(flatten)]
    pub encoders: EncoderArgs,
}

/// The encoder models: a bi-encoder for dense retrieval and PCST's dense prizes, a
/// cross-encoder that reranks (device and threads as for gsr: --device, --model-threads).
#[derive(Args, Clone)]
pub struct EncoderArgs {
    /// dense, --pcst-scores dense: the bi-encoder's directory (model.onnx, tokenizer.json,
    /// config.json, trellis.json with task "dense"; see schema/model.md).
    #[arg(long)]
    pub dense_model: Option<PathBuf>,
    /// surge: the subgraph model's directory (model.onnx, tokenizer.json, config.json,
    /// trellis.json with task "subgraph"; see schema/model.md).
    #[arg(long)]
    pub surge_model: Option<PathBuf>,
    /// Rerank with this cross-encoder (a directory like --dense-model's, task "rerank"):
    /// the union of the pooled retrievers' top --rerank-top paths, in its order.
    #[arg(long)]
    pub rerank: Option<PathBuf>,
    /// --rerank: paths taken from each pooled retriever.
    #[arg(long, default_value_t = trellis::retrieve::rerank::DEFAULT_TOP, value_parser = super::usize_in(&limits::RERANK_TOP), allow_hyphen_values = true)]
    pub rerank_top: usize,
    /// --rerank: retrievers whose top paths join --retriever's, comma-separated (e.g.
    /// gsr,pcst); each takes its settings from the other options.
    #[arg(long, value_delimiter = ',')]
    pub rerank_pool: Vec<String>,
    /// --rerank: a path's score is the cross-encoder's plus this weight times the sum of
    /// 1/rank over the pooled retrievers that found it (0: the cross-encoder alone; the
    /// default, 1, was chosen on OpenDialKG dev: docs/retrieval.md).
    #[arg(long, value_parser = super::f64_in(&limits::RERANK_FUSION), allow_hyphen_values = true)]
    pub rerank_fusion: Option<f64>,
    /// dense, --rerank: texts embedded or pairs scored together.
    #[arg(long, default_value_t = trellis::model::encoder::DEFAULT_BATCH, value_parser = super::usize_in(&limits::BATCH), allow_hyphen_values = true)]
    pub encoder_batch: usize,
}

/// The generative retriever's model and decoding (defaults: the model's trellis.json).
#[derive(Args, Clone)]
pub struct GsrArgs {
    /// gsr: the exported model's directory (encoder/decoder ONNX files, tokenizer.json,
    /// config.json, trellis.json; see schema/model.md).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// gsr: none (unconstrained), hard (constraint only), connection or katz (constraint and
    /// graph prior).
    #[arg(long)]
    pub prior: Option<PriorMode>,
    /// gsr: proportional (the paper) or softmax (the authors' code).
    #[arg(long)]
    pub prior_norm: Option<PriorNorm>,
    /// gsr: weight of the model against the prior.
    #[arg(long, value_parser = super::f64_in(&limits::ALPHA), allow_hyphen_values = true)]
    pub alpha: Option<f64>,
    /// gsr: the prior's start recency: at the path's first entity, an entity mentioned k
    /// messages ago has its prior mass scaled by exp(-X * k) (0: off, the paper's prior).
    #[arg(long, value_parser = super::f64_in(&limits::START_RECENCY), allow_hyphen_values = true)]
    pub start_recency: Option<f64>,
    /// gsr: vocabulary (the model's log-softmax over the whole vocabulary: transformers, the
    /// paper) or allowed (over the tokens the constraint allows at each step).
    #[arg(long)]
    pub model_norm: Option<ModelNorm>,
    #[arg(long, value_parser = super::usize_in(&limits::BEAMS), allow_hyphen_values = true)]
    pub beams: Option<usize>,
    /// gsr: sequences returned per step (at most --beams).
    #[arg(long, value_parser = super::usize_in(&limits::RETURN_SEQUENCES), allow_hyphen_values = true)]
    pub return_sequences: Option<usize>,
    /// gsr: the beam score is the sum of log-probabilities / length^X (0: the sum, which
    /// prefers shorter paths; negative values prefer them more).
    #[arg(long, value_parser = super::f64_in(&limits::LENGTH_PENALTY), allow_hyphen_values = true)]
    pub length_penalty: Option<f64>,
    #[arg(long, value_parser = super::usize_in(&limits::MAX_NEW_TOKENS), allow_hyphen_values = true)]
    pub max_new_tokens: Option<usize>,
    /// gsr: retrieval steps; step k > 0 re-encodes the dialog with the paths found so far.
    #[arg(long, default_value_t = 1, value_parser = super::usize_in(&limits::STEPS), allow_hyphen_values = true)]
    pub steps: usize,
    /// gsr: dialogs decoded together (their beams are the rows of one decoder call); respond,
    /// run, eval pipeline: requests retrieved and generated together, whatever the retriever.
    #[arg(long, default_value_t = 8, value_parser = super::usize_in(&limits::BATCH), allow_hyphen_values = true)]
    pub batch: usize,
    /// gsr: cpu, cuda or cuda:N (CUDA never falls back to CPU silently).
    #[arg(long, default_value = "cpu")]
    pub device: Device,
    /// gsr: threads ONNX Runtime uses inside each model call (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = super::usize_in(&limits::MODEL_THREADS), allow_hyphen_values = true)]
    pub model_threads: usize,
}

impl RetrieverOptions {
    /// The library's configuration; a usage error for a retriever without its model (gsr
    /// without --model, dense without --dense-model, ...) or an unknown pooled retriever.
    pub fn config(&self) -> Result<RetrieverConfig, super::Usage> {
        let kind = self.kind(self.retriever)?;
        let mut cfg = RetrieverConfig::new(kind);
        cfg.pcst = PcstConfig::new(self.pcst_variant);
        cfg.pcst.pruning = self.pruning;
        if self.pcst_scores == "dense" {
            cfg.pcst.scores = PcstScores::Dense(
                self.dense_options()
                    .ok_or_else(|| super::Usage("--pcst-scores dense needs --dense-model DIR (an exported bi-encoder: see schema/model.md)".into()))?,
            );
        }
        let e = &self.encoders;
        if !e.rerank_pool.is_empty() && e.rerank.is_none() {
            return Err(super::Usage("--rerank-pool needs --rerank MODEL (a cross-encoder: see schema/model.md)".into()));
        }
        if e.rerank_fusion.is_some() && e.rerank.is_none() {
            return Err(super::Usage("--rerank-fusion needs --rerank MODEL (a cross-encoder: see schema/model.md)".into()));
        }
        if let Some(model) = &e.rerank {
            let mut r = RerankOptions::new(model);
            r.runtime.device = self.gsr.device;
            r.runtime.threads = self.gsr.model_threads;
            r.batch = e.encoder_batch;
            r.top = e.rerank_top;
            r.fusion = e.rerank_fusion.unwrap_or(r.fusion);
            for name in &e.rerank_pool {
                let which = RetrieverName::from_text(name.trim())
                    .ok_or_else(|| super::Usage(format!("--rerank-pool: unknown retriever {name:?} (all, random, bm25, katz, pcst, gsr, dense, surge)")))?;
                r.pool.push(self.kind(which)?);
            }
            cfg.rerank = Some(r);
        }
        cfg.bm25_turns = self.bm25_turns;
        cfg.seed = self.seed;
        cfg.link = self.link.config();
        cfg.scope = self.scope;
        Ok(cfg)
    }

    fn kind(&self, name: RetrieverName) -> Result<RetrieverKind, super::Usage> {
        Ok(match name {
            RetrieverName::All => RetrieverKind::All,
            RetrieverName::Random => RetrieverKind::Random,
            RetrieverName::Bm25 => RetrieverKind::Bm25,
            RetrieverName::Katz => RetrieverKind::Katz,
            RetrieverName::Pcst => RetrieverKind::Pcst,
            RetrieverName::Gsr => RetrieverKind::Gsr(
                self.gsr_options().ok_or_else(|| super::Usage("--retriever gsr needs --model DIR (an exported retriever: see schema/model.md)".into()))?,
            ),
            RetrieverName::Dense => RetrieverKind::Dense(
                self.dense_options()
                    .ok_or_else(|| super::Usage("--retriever dense needs --dense-model DIR (an exported bi-encoder: see schema/model.md)".into()))?,
            ),
            RetrieverName::Surge => {
                let model = self
                    .encoders
                    .surge_model
                    .as_ref()
                    .ok_or_else(|| super::Usage("--retriever surge needs --surge-model DIR (an exported subgraph model: see schema/model.md)".into()))?;
                let mut o = SurgeOptions::new(model);
                o.runtime.device = self.gsr.device;
                o.runtime.threads = self.gsr.model_threads;
                RetrieverKind::Surge(o)
            }
        })
    }

    fn dense_options(&self) -> Option<DenseOptions> {
        let mut d = DenseOptions::new(self.encoders.dense_model.as_ref()?);
        d.runtime.device = self.gsr.device;
        d.runtime.threads = self.gsr.model_threads;
        d.batch = self.encoders.encoder_batch;
        Some(d)
    }

    fn gsr_options(&self) -> Option<GsrOptions> {
        let model = self.gsr.model.as_ref()?;
        let g = &self.gsr;
        {
            let mut o = GsrOptions::new(model);
            o.runtime.device = g.device;
            o.runtime.threads = g.model_threads;
            let v = &mut o.overrides;
            (v.prior, v.prior_norm, v.alpha, v.start_recency, v.model_norm) = (g.prior, g.prior_norm, g.alpha, g.start_recency, g.model_norm);
            (v.beams, v.return_sequences, v.length_penalty, v.max_new_tokens) = (g.beams, g.return_sequences, g.length_penalty, g.max_new_tokens);
            o.steps = g.steps;
            o.batch = g.batch;
            Some(o)
        }
    }

    /// What the answers depend on, for `--resume` to compare: the configuration without
    /// the thread and session counts (answers do not depend on them), the model directory
    /// as an absolute path.
    pub fn fingerprint(&self) -> String {
        let Ok(mut cfg) = self.config() else { return format!("{:?} without a model", self.retriever) };
        let mut models = String::new();
        // The models' files too: weights or trellis.json replaced in place change answers.
        let mut note = |path: &mut PathBuf, runtime: &mut trellis::model::session::RuntimeOptions| {
            models.push_str(&format!(", model files {}", super::batch::model_identity(path).as_str().unwrap_or_default()));
            *path = super::batch::absolute(path).into();
            runtime.threads = 0;
            runtime.sessions = 0;
        };
        let mut kinds = vec![&mut cfg.kind];
        if let Some(r) = &mut cfg.rerank {
            note(&mut r.model, &mut r.runtime);
            kinds.extend(r.pool.iter_mut());
        }
        for kind in kinds {
            match kind {
                RetrieverKind::Gsr(g) => note(&mut g.model, &mut g.runtime),
                RetrieverKind::Dense(d) => note(&mut d.model, &mut d.runtime),
                RetrieverKind::Surge(o) => note(&mut o.model, &mut o.runtime),
                _ => {}
            }
        }
        if let PcstScores::Dense(d) = &mut cfg.pcst.scores {
            note(&mut d.model, &mut d.runtime);
        }
        format!("{cfg:?}{models}")
    }

    /// The retriever, with its model loaded for gsr (which needs --model), with one model
    /// session per core (the library's default): `retrieve` runs its batches in parallel.
    pub fn open(&self, store: std::sync::Arc<Store>) -> Result<Retriever> {
        self.open_with_sessions(store, 0)
    }

    /// [`open`](Self::open) with `sessions` model sessions (threads that can decode at once).
    pub fn open_with_sessions(&self, store: std::sync::Arc<Store>, sessions: usize) -> Result<Retriever> {
        if self.scope == CandidateScope::Uncapped && self.retriever != RetrieverName::Gsr {
            anyhow::bail!(super::Usage("--scope uncapped needs --retriever gsr (the other retrievers enumerate their candidates)".into()));
        }
        let mut cfg = self.config()?;
        let mut kinds = vec![&mut cfg.kind];
        if let Some(r) = &mut cfg.rerank {
            r.runtime.sessions = sessions;
            kinds.extend(r.pool.iter_mut());
        }
        for kind in kinds {
            match kind {
                RetrieverKind::Gsr(g) => g.runtime.sessions = sessions,
                RetrieverKind::Dense(d) => d.runtime.sessions = sessions,
                RetrieverKind::Surge(o) => o.runtime.sessions = sessions,
                _ => {}
            }
        }
        if let PcstScores::Dense(d) = &mut cfg.pcst.scores {
            d.runtime.sessions = sessions;
        }
        let r = Retriever::new(store, cfg)?;
        if let Some(g) = r.generative() {
            note_batch("gsr", self.gsr.batch, g.settings().batch, g.settings().search.beams);
        }
        Ok(r)
    }
}

/// Says on stderr that a batch was cut to fit the memory budget of one decoding call.
pub fn note_batch(what: &str, asked: usize, used: usize, beams: usize) {
    if used < asked {
        eprintln!(
            "note: {what}: decoding {used} requests at a time, not --batch {asked}: {asked} x {beams} beams would hold more than {} MiB of attention cache and logits",
            trellis::limits::DECODE_MEMORY_BUDGET >> 20
        );
    }
}

#[derive(Args)]
pub struct RetrieveArgs {
    #[arg(long)]
    store: PathBuf,
    #[command(flatten)]
    retriever: RetrieverOptions,
    /// JSON lines: {"id", "history": [messages], "entities": [keys] (optional)}.
    #[arg(long)]
    input: PathBuf,
    /// JSON lines out, one per request line, in input order, each with its input line
    /// number ("line"). Written to OUTPUT.partial and renamed when complete.
    #[arg(long)]
    output: PathBuf,
    /// Continue an interrupted run on the same input and options (OUTPUT.partial and
    /// OUTPUT.checkpoint): every input line is answered exactly once.
    #[arg(long)]
    resume: bool,
    /// Paths per request: the best N.
    #[arg(long, default_value_t = 10, value_parser = super::usize_in(&limits::TOP), allow_hyphen_values = true)]
    top: usize,
    /// Worker threads (default, or 0: all cores).
    #[arg(long, value_parser = super::usize_in(&limits::THREADS), allow_hyphen_values = true)]
    threads: Option<usize>,
    /// `stop` at the first bad input line, or `skip` it (reported on stderr). A store that
    /// cannot be read, or an output that cannot be written, stops the run either way.
    #[arg(long, value_parser = super::named::<OnError>(OnError::NAMES), default_value_t = OnError::Stop)]
    on_error: OnError,
    /// Print the summary (requests answered and skipped) as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// gsr: each path's generated tokens with the model's and the prior's log-probabilities.
    #[arg(long)]
    explain: bool,
}

const BATCH: usize = 256;

pub fn run(args: RetrieveArgs) -> Result<ExitCode> {
    let store = std::sync::Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening store {}", args.store.display()))?);
    let started = std::time::Instant::now();
    let retriever = args.retriever.open(store.clone())?;
    // Answering time, apart from opening the store and loading a model.
    let answering = std::time::Instant::now();
    let mut opts = AnswerOptions::new(args.top);
    opts.explain = args.explain;
    // The input first: a missing input leaves an existing output file untouched.
    let mut input = super::batch::NumberedLines::open(&args.input)?;
    let mut settings = serde_json::Map::new();
    settings.insert("store".into(), super::batch::store_identity(&store));
    settings.insert("retriever".into(), args.retriever.fingerprint().into());
    settings.insert("top".into(), args.top.into());
    settings.insert("explain".into(), args.explain.into());
    let job = super::batch::Job { command: "retrieve", settings };
    let mut out = super::batch::BatchOutput::open(&args.output, args.resume, job, &mut input)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let (bar, file) = (input.bar.clone(), input.file.clone());
    while !out.finished {
        let batch = input.round(BATCH)?;
        if batch.is_empty() {
            break;
        }
        // Parse every line, then answer them a chunk at a time (gsr decodes a chunk
        // together), chunks in parallel; answers keep input order.
        type Parsed<'a> = (&'a super::batch::InputLine, Result<Request, RequestError>);
        let mut parsed = batch.iter().map(|l| (l, parse_request_bytes(&l.bytes)));
        let mut chunks: Vec<Vec<Parsed>> = Vec::new();
        loop {
            let chunk: Vec<Parsed> = parsed.by_ref().take(retriever.batch_size()).collect();
            if chunk.is_empty() {
                break;
            }
            chunks.push(chunk);
        }
        type Answered<'a> =
            Result<Vec<(&'a super::batch::InputLine, Result<serde_json::Value, RequestError>)>, (&'a super::batch::InputLine, Box<RetrieveError>)>;
        let answered: Vec<Answered> = pool.install(|| {
            chunks
                .into_par_iter()
                .map(|chunk| {
                    let ok: Vec<&Request> = chunk.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
                    let first = chunk[0].0;
                    let mut lines = answer_batch(&store, &retriever, &ok, &opts).map_err(|e| (first, Box::new(e)))?.into_iter();
                    Ok(chunk.into_iter().map(|(l, r)| (l, r.and_then(|_| lines.next().unwrap_or(Ok(serde_json::Value::Null))))).collect())
                })
                .collect()
        });
        // In input order: a chunk's lines (written, skipped or stopping the run as bad input),
        // or the store's failure on a chunk, which stops the run with exit 1 whatever the mode.
        for a in answered {
            let lines = match a {
                Ok(v) => v,
                // Not the lines' fault: no line is skipped for it, and the exit code is 1.
                Err((l, e)) => {
                    bar.finish_and_clear();
                    out.stop_at(l.start);
                    return Err(anyhow::Error::new(*e).context(format!(
                        "reading store {} (while answering the requests from {file}:{}; the requests are not at fault)",
                        args.store.display(),
                        l.number
                    )));
                }
            };
            for (l, result) in lines {
                match result {
                    Ok(v) => out.answer(l.number, v)?,
                    Err(e) if args.on_error == OnError::Skip => {
                        bar.suspend(|| eprintln!("{file}:{}: {e} (skipped)", l.number));
                        out.skip();
                    }
                    Err(e) => {
                        bar.finish_and_clear();
                        out.stop_at(l.start);
                        return Err(super::BadInputLine { file: file.clone(), line: l.number as u64, what: e.to_string() }.into());
                    }
                }
            }
        }
        out.checkpoint(input.position())?;
        bar.set_message(format!("{} answered", out.answered()));
    }
    let (done, skipped, resumed_at, now) = (out.answered(), out.skipped(), out.resumed_at, out.answered_now);
    out.finish(input.position())?;
    bar.finish_and_clear();
    if args.json {
        let mut summary = serde_json::json!({"answered": done, "skipped": skipped, "resumed_at_line": resumed_at, "answered_now": now, "input": file, "output": args.output.display().to_string(), "seconds": started.elapsed().as_secs_f64(), "seconds_answering": answering.elapsed().as_secs_f64()});
        if let Some(g) = retriever.generative() {
            let t = g.timings();
            summary["gsr"] = serde_json::json!({"timings": t, "outside_onnx_runtime_share": t.outside_share(), "settings": format!("{:?}", g.settings())});
        }
        println!("{summary}");
    } else {
        eprintln!(
            "answered {done} requests{}{}",
            if skipped > 0 { format!(", skipped {skipped} bad lines") } else { String::new() },
            super::batch::resumed_note(resumed_at, now)
        );
    }
    Ok(ExitCode::SUCCESS)
}
