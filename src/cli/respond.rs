//! `trellis respond` and `trellis run`: link, retrieve, generate.

use super::retrieve::RetrieverOptions;
use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use trellis::generate::Generator;
use trellis::ingest::OnError;
use trellis::limits;
use trellis::link::Message;
use trellis::pipeline::jsonl::{parse_line_bytes, render, LineError, PipelineLine};
use trellis::pipeline::{KnowledgeSource, Pipeline, PipelineError, PipelineRequest};
use trellis::retrieve::jsonl::resolve_entities;
use trellis::settings::PipelineSpec;
use trellis::Store;

/// The generator and how it decodes: `--gen-*` flags (the library's `GENERATOR` settings;
/// defaults: the model's trellis.json `generation` section).
#[derive(Args, Clone)]
pub struct GeneratorOptions {
    /// The exported generator's directory (encoder/decoder ONNX files, tokenizer.json,
    /// config.json, trellis.json with "task": "generator"; see schema/model.md).
    #[arg(long)]
    pub generator: PathBuf,
    /// Retrieved paths the generator reads (the retriever's best N).
    #[arg(long, default_value_t = 3, value_parser = super::usize_in(&limits::KNOWLEDGE_TOP), allow_hyphen_values = true)]
    pub top: usize,
    #[command(flatten)]
    pub flags: super::settings::GeneratorFlags,
    #[command(flatten)]
    pub check: super::settings::CheckFlags,
}

/// A pipeline of the store's retriever and the generator, and the settings it was made
/// with (one runtime for both models, one batch).
pub(super) fn open_pipeline(store: Arc<Store>, retriever: &RetrieverOptions, generator: &GeneratorOptions) -> Result<(Pipeline, PipelineSpec)> {
    let spec = retriever.pipeline(&generator.flags, &generator.check)?;
    let r = super::retrieve::open_config(store, spec.retriever.clone())?;
    let g = Generator::open(&generator.generator, &spec.runtime).with_context(|| format!("opening the generator {}", generator.generator.display()))?;
    let generate = spec.generator.apply(g.settings())?;
    let beams = match &generate.strategy {
        trellis::generate::Strategy::Beam(b) => b.beams,
        _ => 1,
    };
    super::retrieve::note_batch("generator", generate.batch, g.batch_for(&generate)?, beams);
    let settings = spec.settings(generator.top, generate)?;
    Ok((Pipeline::new(r, g, Some(settings))?, spec))
}

pub(super) fn open_store(path: &std::path::Path) -> Result<Arc<Store>> {
    Ok(Arc::new(Store::open_read_only(path).with_context(|| format!("opening store {}", path.display()))?))
}

#[derive(Args)]
pub struct RespondArgs {
    #[arg(long)]
    store: PathBuf,
    #[command(flatten)]
    retriever: RetrieverOptions,
    #[command(flatten)]
    generator: GeneratorOptions,
    /// The dialog so far, one argument per message, oldest first.
    messages: Vec<String>,
    /// The dialog from a file instead: a JSON object {"history": [...]} as `trellis run`
    /// reads, or plain text with one message per line.
    #[arg(long, conflicts_with = "messages")]
    dialog: Option<PathBuf>,
    /// Print the whole answer (knowledge, paths, timings) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn respond(args: RespondArgs) -> Result<ExitCode> {
    let line: PipelineLine = match &args.dialog {
        Some(path) => {
            let mut text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            // A byte-order mark says nothing about the dialog (as `ingest` and `run` drop it).
            if text.starts_with(b"\xef\xbb\xbf") {
                text.drain(..3);
            }
            let trimmed = text.trim_ascii();
            if trimmed.first() == Some(&b'{') {
                parse_line_bytes(trimmed).map_err(|e| super::BadInputLine { file: path.display().to_string(), line: 1, what: e.to_string() })?
            } else {
                let text = String::from_utf8(text).map_err(|e| super::BadInputLine {
                    file: path.display().to_string(),
                    line: 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count() as u64,
                    what: "invalid UTF-8".into(),
                })?;
                let history = text.lines().filter(|l| !l.trim().is_empty()).map(|l| Message { speaker: String::new(), text: l.to_owned() }).collect();
                PipelineLine {
                    request: trellis::retrieve::jsonl::Request { id: serde_json::Value::Null, history, entities: None },
                    knowledge: None,
                    seed: None,
                }
            }
        }
        None if args.messages.is_empty() => anyhow::bail!(super::Usage("give the dialog: one argument per message, or --dialog FILE".into())),
        None => PipelineLine {
            request: trellis::retrieve::jsonl::Request {
                id: serde_json::Value::Null,
                history: args.messages.iter().map(|m| Message { speaker: String::new(), text: m.clone() }).collect(),
                entities: None,
            },
            knowledge: None,
            seed: None,
        },
    };
    let source = args.dialog.as_ref().map_or("the command line".to_string(), |p| p.display().to_string());
    // As a request line's: at most `limits::DIALOG_BYTES` of text, whatever way it came.
    trellis::dialog::check_dialog_size(&line.request.history).map_err(|e| super::BadInputLine { file: source.clone(), line: 1, what: e.to_string() })?;
    let store = open_store(&args.store)?;
    let (pipeline, _) = open_pipeline(store.clone(), &args.retriever, &args.generator)?;
    let request = request_of(&store, &line).with_context(|| format!("reading store {}", args.store.display()))?.map_err(|e| super::BadInputLine {
        file: source,
        line: 1,
        what: e.to_string(),
    })?;
    let reply = pipeline.respond(&request)?;
    if args.json {
        outln!("{}", render(&line.request.id, &reply));
    } else {
        outln!("{}", reply.text());
        // What the rewrite resolved, on stderr: the reply stays the only line on stdout.
        for m in &reply.resolutions {
            if let (Some(r), Some(e)) = (&m.resolution, m.entities.first()) {
                let facts: Vec<String> = r.agreed.iter().map(|[h, rel, t]| format!("{h} {rel} {t}")).collect();
                eprintln!(
                    "resolved \"{}\" (message {}) -> {} ({} back; agreed: {})",
                    m.text,
                    m.message + 1,
                    e.name,
                    r.messages_back,
                    if facts.is_empty() { "recency".to_string() } else { facts.join("; ") }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The pipeline request of a parsed line: an unknown entity key is the line's fault (the
/// inner error), a store that cannot be read is not (the outer one).
fn request_of<'l>(store: &Store, line: &'l PipelineLine) -> Result<Result<PipelineRequest<'l>, LineError>, trellis::ReadError> {
    let entities = match &line.request.entities {
        None => None,
        Some(keys) => match resolve_entities(store, keys)? {
            Ok(ids) => Some(ids),
            Err(e) => return Ok(Err(e.into())),
        },
    };
    let knowledge = match &line.knowledge {
        None => KnowledgeSource::Retrieved,
        Some(k) if k.is_empty() => KnowledgeSource::Nothing,
        Some(k) => KnowledgeSource::Given(k.as_slice()),
    };
    Ok(Ok(PipelineRequest { history: &line.request.history, entities, knowledge, seed: line.seed }))
}

#[derive(Args)]
pub struct RunArgs {
    #[arg(long)]
    store: PathBuf,
    #[command(flatten)]
    retriever: RetrieverOptions,
    #[command(flatten)]
    generator: GeneratorOptions,
    /// JSON lines: {"id", "history", "entities" (optional), "knowledge" (optional), "seed"
    /// (optional)}; see `trellis::pipeline::jsonl`.
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
    /// Worker threads (default, or 0: all cores).
    #[arg(long, value_parser = super::usize_in(&limits::THREADS), allow_hyphen_values = true)]
    threads: Option<usize>,
    /// `stop` at the first bad input line, or `skip` it (reported on stderr). A store or a
    /// model that fails, or an output that cannot be written, stops the run either way.
    #[arg(long, value_parser = super::named::<OnError>(OnError::NAMES), default_value_t = OnError::Stop)]
    on_error: OnError,
    /// Print the summary (requests answered, skipped, mean stage times) as JSON on stdout.
    #[arg(long)]
    json: bool,
}

const LINES_PER_ROUND: usize = 256;

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let store = open_store(&args.store)?;
    let started = std::time::Instant::now();
    let (pipeline, spec) = open_pipeline(store.clone(), &args.retriever, &args.generator)?;
    let answering = std::time::Instant::now();
    // The input first: a missing input leaves an existing output file untouched.
    let mut input = super::batch::NumberedLines::open(&args.input)?;
    let mut settings = serde_json::Map::new();
    settings.insert("store".into(), super::batch::store_identity(&store));
    settings.insert("retriever".into(), super::retrieve::fingerprint(&spec.retriever).into());
    settings.insert("generator".into(), super::batch::model_identity(&args.generator.generator));
    settings.insert("generation".into(), format!("{:?}", pipeline.settings()).into());
    if let Some(checker) = &spec.checker {
        // The checker file's content (its cues and counts are only summed up in "generation").
        settings.insert("checker".into(), super::batch::path_identity(checker));
    }
    let job = super::batch::Job { command: "run", settings };
    let mut out = super::batch::BatchOutput::open(&args.output, args.resume, job, &mut input)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let (bar, file) = (input.bar.clone(), input.file.clone());
    // Stage times of the replies of this run (the mean is over them).
    let mut stage_ms = [0f64; 3];
    let batch = spec.batch.max(1);
    while !out.finished {
        let round_start = input.position();
        let round = input.round(LINES_PER_ROUND)?;
        if round.is_empty() {
            break;
        }
        // Parse every line, then answer the good ones `batch` at a time, batches in
        // parallel; answers keep input order.
        let mut parsed: Vec<(usize, PipelineLine)> = Vec::with_capacity(round.len());
        let mut errors: std::collections::BTreeMap<usize, LineError> = Default::default();
        for l in &round {
            match parse_line_bytes(&l.bytes) {
                Ok(p) => parsed.push((l.number, p)),
                Err(e) => drop(errors.insert(l.number, e)),
            }
        }
        let mut good: Vec<(usize, &PipelineLine, PipelineRequest<'_>)> = Vec::with_capacity(parsed.len());
        for (n, line) in &parsed {
            let request = match request_of(&store, line) {
                Ok(r) => r,
                Err(e) => {
                    bar.finish_and_clear();
                    out.stop_at(round_start);
                    return Err(
                        anyhow::Error::new(e).context(format!("reading store {} (answering {file}:{n}; the line is not at fault)", args.store.display()))
                    );
                }
            };
            match request {
                Ok(r) => good.push((*n, line, r)),
                Err(e) => drop(errors.insert(*n, e)),
            }
        }
        let chunks: Vec<&[(usize, &PipelineLine, PipelineRequest<'_>)]> = good.chunks(batch).collect();
        // A chunk's replies, or its first line and the failure (boxed: the error is large).
        type Answered = Result<Vec<trellis::pipeline::Reply>, (usize, Box<PipelineError>)>;
        let answered: Vec<Answered> = pool.install(|| {
            chunks
                .par_iter()
                .map(|chunk| {
                    let reqs: Vec<PipelineRequest<'_>> = chunk.iter().map(|(_, _, r)| r.clone()).collect();
                    pipeline.respond_batch(&reqs).map_err(|e| (chunk[0].0, Box::new(e)))
                })
                .collect()
        });
        let mut replies = Vec::with_capacity(good.len());
        for a in answered {
            match a {
                Ok(r) => replies.extend(r),
                Err((n, e)) => {
                    // Nothing of this round is written yet: the run stops at its start.
                    bar.finish_and_clear();
                    out.stop_at(round_start);
                    return Err(anyhow::Error::new(*e)
                        .context(format!("answering the requests from {file}:{n} (store {}; the requests are not at fault)", args.store.display())));
                }
            }
        }
        // In input order: each line's reply, or its fault.
        let mut answers = good.iter().zip(replies);
        for l in &round {
            let n = l.number;
            if let Some(e) = errors.remove(&n) {
                if args.on_error == OnError::Skip {
                    bar.suspend(|| eprintln!("{file}:{n}: {e} (skipped)"));
                    out.skip();
                    continue;
                }
                bar.finish_and_clear();
                out.stop_at(l.start);
                return Err(super::BadInputLine { file: file.clone(), line: n as u64, what: e.to_string() }.into());
            }
            let Some(((_, line, _), reply)) = answers.next() else { anyhow::bail!("internal: a line of {file} got no reply") };
            stage_ms[0] += reply.timings.link_ms;
            stage_ms[1] += reply.timings.retrieve_ms;
            stage_ms[2] += reply.timings.generate_ms;
            out.answer(n, render(&line.request.id, &reply))?;
        }
        out.checkpoint(input.position())?;
        bar.set_message(format!("{} answered", out.answered()));
    }
    let (done, skipped, resumed_at, now) = (out.answered(), out.skipped(), out.resumed_at, out.answered_now);
    out.finish(input.position())?;
    bar.finish_and_clear();
    let per = |x: f64| if now > 0 { x / now as f64 } else { 0.0 };
    if args.json {
        let summary = serde_json::json!({
            "answered": done, "skipped": skipped, "resumed_at_line": resumed_at, "answered_now": now, "input": file, "output": args.output.display().to_string(),
            "seconds": started.elapsed().as_secs_f64(), "seconds_answering": answering.elapsed().as_secs_f64(),
            "mean_ms": {"link": per(stage_ms[0]), "retrieve": per(stage_ms[1]), "generate": per(stage_ms[2])},
            "generator": {"timings": pipeline.generator().model().timings()},
        });
        let mut summary = summary;
        if let Some(g) = pipeline.retriever().generative() {
            summary["gsr"] = serde_json::json!({"timings": g.timings()});
        }
        outln!("{summary}");
    } else {
        eprintln!(
            "answered {done} requests{}{} in {:.1} s; per reply: link {:.1} ms, retrieve {:.1} ms, generate {:.1} ms",
            if skipped > 0 { format!(", skipped {skipped} bad lines") } else { String::new() },
            super::batch::resumed_note(resumed_at, now),
            answering.elapsed().as_secs_f64(),
            per(stage_ms[0]),
            per(stage_ms[1]),
            per(stage_ms[2])
        );
    }
    Ok(ExitCode::SUCCESS)
}
