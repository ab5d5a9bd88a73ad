//! `trellis retrieve`: batch retrieval over JSON lines, in parallel, output in input order.

use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::ingest::OnError;
use trellis::limits;
use trellis::retrieve::jsonl::{answer_batch, parse_request_bytes, AnswerOptions, Request, RequestError};
use trellis::retrieve::pcst::PcstScores;
use trellis::retrieve::{RetrieveError, Retriever, RetrieverConfig, RetrieverKind};
use trellis::settings::PipelineSpec;
use trellis::Store;

/// The retrievers by name, in the order of the library's `RetrieverKind::NAMES`.
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
    /// Knowledge from search: the query producer's top queries in the text index (needs
    /// --search-producer and `trellis index-text`).
    Search,
}

/// Which retriever, and its settings: the flags of `trellis::settings::RETRIEVER`, `LINK`
/// and `RUNTIME`, handed to the library as given (it checks them and gives the defaults).
#[derive(Args, Clone)]
pub struct RetrieverOptions {
    #[arg(long, value_enum)]
    pub retriever: RetrieverName,
    #[command(flatten)]
    pub flags: super::settings::RetrieverFlags,
}

impl RetrieverOptions {
    /// The retriever's name as the library takes it.
    pub fn name(&self) -> &'static str {
        use clap::ValueEnum;
        let given = self.retriever.to_possible_value().expect("every retriever has a name");
        RetrieverKind::NAMES.iter().copied().find(|n| *n == given.get_name()).expect("the command line's names are the library's")
    }

    /// The library's configuration of the retriever alone.
    pub fn config(&self) -> Result<RetrieverConfig> {
        Ok(trellis::settings::retriever(self.name(), &self.flags.0)?)
    }

    /// The library's configuration of a pipeline with this retriever and `generator`'s
    /// flags (`--gen-*`): one runtime and one batch for both.
    pub fn pipeline(&self, generator: &super::settings::GeneratorFlags, check: &super::settings::CheckFlags) -> Result<PipelineSpec> {
        Ok(PipelineSpec::read(self.name(), &self.flags.0.merged(&generator.0).merged(&check.0))?)
    }

    /// The retriever of [`config`](Self::config), with its models loaded.
    pub fn open(&self, store: std::sync::Arc<Store>) -> Result<(Retriever, RetrieverConfig)> {
        let cfg = self.config()?;
        Ok((open_config(store, cfg.clone())?, cfg))
    }
}

/// A retriever of `cfg`; says when a gsr batch was cut to fit the decoding memory.
pub fn open_config(store: std::sync::Arc<Store>, cfg: RetrieverConfig) -> Result<Retriever> {
    let asked = match &cfg.kind {
        RetrieverKind::Gsr(g) => g.batch,
        _ => 0,
    };
    let r = Retriever::new(store, cfg)?;
    if let Some(g) = r.generative() {
        note_batch("gsr", asked, g.settings().batch, g.settings().search.beams);
    }
    Ok(r)
}

/// What a retriever's answers depend on, for `--resume` to compare: its configuration
/// without the thread and session counts (answers do not depend on them), the model
/// directories as absolute paths, and the models' files.
pub fn fingerprint(cfg: &RetrieverConfig) -> String {
    let mut cfg = cfg.clone();
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
    #[arg(long, default_value_t = 10, value_parser = super::usize_in(&limits::PATHS_TOP), allow_hyphen_values = true)]
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
    let (retriever, cfg) = args.retriever.open(store.clone())?;
    // Answering time, apart from opening the store and loading a model.
    let answering = std::time::Instant::now();
    let mut opts = AnswerOptions::new(args.top);
    opts.explain = args.explain;
    // The input first: a missing input leaves an existing output file untouched.
    let mut input = super::batch::NumberedLines::open(&args.input)?;
    let mut settings = serde_json::Map::new();
    settings.insert("store".into(), super::batch::store_identity(&store));
    settings.insert("retriever".into(), fingerprint(&cfg).into());
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
        outln!("{summary}");
    } else {
        eprintln!(
            "answered {done} requests{}{}",
            if skipped > 0 { format!(", skipped {skipped} bad lines") } else { String::new() },
            super::batch::resumed_note(resumed_at, now)
        );
    }
    Ok(ExitCode::SUCCESS)
}
