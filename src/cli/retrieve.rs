//! `trellis retrieve`: batch retrieval over JSON lines, in parallel, output in input order.

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use std::io::{BufRead, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::ingest::OnError;
use trellis::retrieve::jsonl::{answer, parse_request};
use trellis::graph::pcst::Pruning;
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
}

impl RetrieverOptions {
    pub fn config(&self) -> RetrieverConfig {
        let mut cfg = RetrieverConfig::new(self.retriever);
        cfg.pcst = PcstConfig::new(self.pcst_variant);
        cfg.pcst.pruning = self.pruning;
        cfg.bm25_turns = self.bm25_turns;
        cfg.seed = self.seed;
        cfg
    }
}

#[derive(Args)]
pub struct RetrieveArgs {
    #[arg(long)]
    store: PathBuf,
    #[command(flatten)]
    retriever: RetrieverOptions,
    /// JSON lines: {"id", "history": [messages]}.
    #[arg(long)]
    input: PathBuf,
    /// JSON lines out, one per input line, in input order.
    #[arg(long)]
    output: PathBuf,
    /// Paths per request.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// `stop` at the first bad input line, or `skip` it (reported on stderr).
    #[arg(long, value_enum, default_value_t = OnError::Stop)]
    on_error: OnError,
}

const BATCH: usize = 256;

pub fn run(args: RetrieveArgs) -> Result<ExitCode> {
    let store = std::sync::Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening store {}", args.store.display()))?);
    let retriever = Retriever::new(store.clone(), args.retriever.config());
    let input = std::fs::File::open(&args.input).with_context(|| format!("opening {}", args.input.display()))?;
    let total = std::fs::metadata(&args.input).map(|m| m.len()).unwrap_or(0);
    let out = std::fs::File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = BufWriter::new(out);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} ({per_sec}, ETA {eta}) {msg}")?);
    let file = args.input.display().to_string();
    let mut lines = std::io::BufReader::new(input).lines().enumerate();
    let (mut done, mut skipped) = (0u64, 0u64);
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        for (i, line) in lines.by_ref().take(BATCH) {
            let line = line.with_context(|| format!("{file}:{}: cannot read the line", i + 1))?;
            bar.inc(line.len() as u64 + 1);
            if !line.trim().is_empty() {
                batch.push((i + 1, line));
            }
        }
        if batch.is_empty() {
            break;
        }
        let answers: Vec<(usize, Result<serde_json::Value, String>)> = pool.install(|| {
            batch
                .par_iter()
                .map(|(n, line)| {
                    let result = parse_request(line).and_then(|req| answer(&store, &retriever, &req, args.top));
                    (*n, result)
                })
                .collect()
        });
        for (n, result) in answers {
            match result {
                Ok(v) => {
                    writeln!(out, "{v}")?;
                    done += 1;
                }
                Err(e) if args.on_error == OnError::Skip => {
                    bar.suspend(|| eprintln!("{file}:{n}: {e} (skipped)"));
                    skipped += 1;
                }
                Err(e) => {
                    out.flush()?;
                    return Err(super::BadInputLine { file: file.clone(), line: n as u64, what: e }.into());
                }
            }
        }
        bar.set_message(format!("{done} answered"));
    }
    out.flush()?;
    bar.finish_and_clear();
    eprintln!("answered {done} requests{}", if skipped > 0 { format!(", skipped {skipped} bad lines") } else { String::new() });
    Ok(ExitCode::SUCCESS)
}
