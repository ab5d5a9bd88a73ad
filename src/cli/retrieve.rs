//! `trellis retrieve`: batch retrieval over JSON lines, in parallel, output in input order.

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use std::io::{BufRead, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::graph::pcst::Pruning;
use trellis::ingest::OnError;
use trellis::retrieve::jsonl::{answer, parse_request_bytes, AnswerError};
use trellis::retrieve::pcst::{PcstConfig, PcstVariant};
use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

/// Which retriever, and the knobs of those that have any.
#[derive(Args, Clone)]
pub struct RetrieverOptions {
    #[arg(long, value_enum)]
    pub retriever: RetrieverKind,
    /// pcst: whose prizes and costs (seed003: rank prizes, facts as virtual nodes at cost
    /// C/2; g-retriever: decayed fact prizes, costs lowered by prizes).
    #[arg(long, value_enum, default_value_t = PcstVariant::Seed003)]
    pub pcst_variant: PcstVariant,
    /// pcst: pruning after the Goemans-Williamson growth.
    #[arg(long, value_enum, default_value_t = Pruning::Gw)]
    pub pruning: Pruning,
    /// bm25, pcst: relevance is the mean over the last 1..N messages.
    #[arg(long, default_value_t = 3)]
    pub bm25_turns: usize,
    /// random: the seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How the history is linked (as `trellis link`); unused by requests that give their entities.
    #[command(flatten)]
    pub link: super::link::LinkOptions,
}

impl RetrieverOptions {
    pub fn config(&self) -> RetrieverConfig {
        let mut cfg = RetrieverConfig::new(self.retriever);
        cfg.pcst = PcstConfig::new(self.pcst_variant);
        cfg.pcst.pruning = self.pruning;
        cfg.bm25_turns = self.bm25_turns;
        cfg.seed = self.seed;
        cfg.link = self.link.config();
        cfg
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
    /// JSON lines out, one per input line, in input order.
    #[arg(long)]
    output: PathBuf,
    /// Paths per request: the best N.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// `stop` at the first bad input line, or `skip` it (reported on stderr). A store that
    /// cannot be read, or an output that cannot be written, stops the run either way.
    #[arg(long, value_enum, default_value_t = OnError::Stop)]
    on_error: OnError,
    /// Print the summary (requests answered and skipped) as JSON on stdout.
    #[arg(long)]
    json: bool,
}

const BATCH: usize = 256;

pub fn run(args: RetrieveArgs) -> Result<ExitCode> {
    let store = std::sync::Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening store {}", args.store.display()))?);
    let retriever = Retriever::new(store.clone(), args.retriever.config());
    let input = std::fs::File::open(&args.input).with_context(|| format!("opening {}", args.input.display()))?;
    let total = std::fs::metadata(&args.input).map(|m| m.len()).unwrap_or(0);
    let out = std::fs::File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = BufWriter::new(out);
    let writing = || format!("writing {}", args.output.display());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} ({per_sec}, ETA {eta}) {msg}")?);
    let file = args.input.display().to_string();
    // Lines as bytes: invalid UTF-8 is a fault of that line (bad input), not a read error.
    let mut lines = std::io::BufReader::new(input).split(b'\n').enumerate();
    let (mut done, mut skipped) = (0u64, 0u64);
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        for (i, line) in lines.by_ref().take(BATCH) {
            let mut line = line.with_context(|| format!("reading {file} at line {}", i + 1))?;
            bar.inc(line.len() as u64 + 1);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.trim_ascii().is_empty() {
                batch.push((i + 1, line));
            }
        }
        if batch.is_empty() {
            break;
        }
        let answers: Vec<(usize, Result<serde_json::Value, AnswerError>)> = pool.install(|| {
            batch
                .par_iter()
                .map(|(n, line)| {
                    let result = parse_request_bytes(line).map_err(AnswerError::from).and_then(|req| answer(&store, &retriever, &req, args.top));
                    (*n, result)
                })
                .collect()
        });
        for (n, result) in answers {
            match result {
                Ok(v) => {
                    writeln!(out, "{v}").with_context(writing)?;
                    done += 1;
                }
                Err(AnswerError::Request(e)) if args.on_error == OnError::Skip => {
                    bar.suspend(|| eprintln!("{file}:{n}: {e} (skipped)"));
                    skipped += 1;
                }
                Err(AnswerError::Request(e)) => {
                    out.flush().with_context(writing)?;
                    return Err(super::BadInputLine { file: file.clone(), line: n as u64, what: e.to_string() }.into());
                }
                // Not the line's fault: no line is skipped for it, and the exit code is 1.
                Err(AnswerError::Retrieve(e)) => {
                    bar.finish_and_clear();
                    return Err(anyhow::Error::new(e)
                        .context(format!("reading store {} (while answering the request on {file}:{n}; the request is not at fault)", args.store.display())));
                }
            }
        }
        bar.set_message(format!("{done} answered"));
    }
    out.flush().with_context(writing)?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::json!({"answered": done, "skipped": skipped, "input": file, "output": args.output.display().to_string()}));
    } else {
        eprintln!("answered {done} requests{}", if skipped > 0 { format!(", skipped {skipped} bad lines") } else { String::new() });
    }
    Ok(ExitCode::SUCCESS)
}
