//! PCST instances in and out of Trellis, for checking its solver against `pcst_fast`
//! (tools/reference/check_pcst.py runs both on the same instances, side by side).
//!
//! ```text
//! trellis-pcst solve --input instances.jsonl --output solutions.jsonl [--repeat 5]
//! trellis-pcst instances --store DIR --dataset opendialkg|metaqa --input FILE
//!     --pcst-variant seed003|g-retriever [--pruning gw] [--limit N] --output instances.jsonl
//! ```
//!
//! An instance line: `{"id", "prizes": [..], "edges": [[u, v], ..], "costs": [..],
//! "num_clusters": 1, "pruning": "gw"|"strong"|"simple"|"none"}`. A solution line: `{"id",
//! "nodes", "edges", "net_value", "seconds"}`, `seconds` being the median over `--repeat`
//! runs of the solver alone (the instance already in memory).

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use trellis::graph::pcst::{net_value, solve, Pruning};
use trellis::graph::CandidateConfig;
use trellis::internals::{candidate_subgraph, pcst_instance};
use trellis::retrieve::pcst::{PcstConfig, PcstVariant};
use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

#[derive(Parser)]
#[command(name = "trellis-pcst", about = "Solve PCST instances with Trellis's solver, or export the ones its retriever builds")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Dataset {
    Opendialkg,
    Metaqa,
}

#[derive(Subcommand)]
enum Command {
    /// Solves every instance of a JSON-lines file.
    Solve {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        output: PathBuf,
        /// Runs per instance; the median time is reported.
        #[arg(long, default_value_t = 5)]
        repeat: usize,
    },
    /// Writes the PCST instance of every turn of a data set, as the `pcst` retriever builds it.
    Instances {
        #[arg(long)]
        store: PathBuf,
        #[arg(long, value_enum)]
        dataset: Dataset,
        #[arg(long)]
        input: PathBuf,
        /// The same flag name as `trellis retrieve`'s (`--variant` still accepted).
        #[arg(long = "pcst-variant", alias = "variant", value_parser = named::<PcstVariant>(PcstVariant::NAMES), default_value_t = PcstVariant::Seed003)]
        variant: PcstVariant,
        #[arg(long, value_parser = named::<Pruning>(Pruning::NAMES), default_value_t = Pruning::Gw)]
        pruning: Pruning,
        /// At most this many instances (the first turns).
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long)]
        output: PathBuf,
    },
}

#[derive(Serialize, Deserialize)]
struct Instance {
    #[serde(default)]
    id: serde_json::Value,
    prizes: Vec<f64>,
    edges: Vec<(u32, u32)>,
    costs: Vec<f64>,
    #[serde(default = "one")]
    num_clusters: usize,
    pruning: Pruning,
}

fn one() -> usize {
    1
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Solve { input, output, repeat } => {
            let file = std::fs::File::open(&input).with_context(|| format!("opening {}", input.display()))?;
            let mut out = BufWriter::new(std::fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?);
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let line = line.with_context(|| format!("{}:{}: reading", input.display(), i + 1))?;
                if line.trim().is_empty() {
                    continue;
                }
                let inst: Instance = serde_json::from_str(&line).with_context(|| format!("{}:{}: not an instance", input.display(), i + 1))?;
                let mut times = Vec::with_capacity(repeat.max(1));
                let mut solution = None;
                for _ in 0..repeat.max(1) {
                    let started = std::time::Instant::now();
                    let s = solve(&inst.prizes, &inst.edges, &inst.costs, inst.num_clusters, inst.pruning)
                        .with_context(|| format!("{}:{}", input.display(), i + 1))?;
                    times.push(started.elapsed().as_secs_f64());
                    solution = Some(std::hint::black_box(s));
                }
                times.sort_by(f64::total_cmp);
                let s = solution.expect("at least one run");
                let value = net_value(&inst.prizes, &inst.costs, &s);
                let line = serde_json::json!({"id": inst.id, "nodes": s.nodes, "edges": s.edges, "net_value": value, "seconds": times[times.len() / 2]});
                writeln!(out, "{line}")?;
            }
            out.flush()?;
        }
        Command::Instances { store, dataset, input, variant, pruning, limit, output } => {
            let store = std::sync::Arc::new(Store::open_read_only(&store).with_context(|| format!("opening store {}", store.display()))?);
            let dialogs = match dataset {
                Dataset::Opendialkg => trellis::dataset::opendialkg::read(&input)?,
                Dataset::Metaqa => trellis::dataset::metaqa::read(&input)?,
            };
            let mut cfg = RetrieverConfig::new(RetrieverKind::Pcst);
            cfg.pcst = PcstConfig::new(variant);
            let retriever = Retriever::new(store.clone(), cfg)?;
            let mut out = BufWriter::new(std::fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?);
            let mut written = 0;
            'all: for (d, dialog) in dialogs.iter().enumerate() {
                for sample in &dialog.samples {
                    if limit.is_some_and(|l| written >= l) {
                        break 'all;
                    }
                    let history = &dialog.messages[..sample.upto];
                    let mentions = retriever.linker().link_dialog(history)?;
                    let mentioned: Vec<_> = retriever.linker().turn_entities(&mentions, history.len()).into_iter().map(|(e, _)| e).collect();
                    let cand = candidate_subgraph(&store, &mentioned, &CandidateConfig::default())?;
                    let inst = pcst_instance(&retriever, &cand, history)?;
                    if inst.prizes.is_empty() {
                        continue;
                    }
                    let line = Instance {
                        id: serde_json::json!(format!("{d}:{}", sample.upto)),
                        prizes: inst.prizes,
                        edges: inst.edges,
                        costs: inst.costs,
                        num_clusters: 1,
                        pruning,
                    };
                    writeln!(out, "{}", serde_json::to_string(&line)?)?;
                    written += 1;
                }
            }
            out.flush()?;
            if written == 0 {
                bail!("no turn of {} gave a candidate subgraph", input.display());
            }
            eprintln!("wrote {written} instances to {}", output.display());
        }
    }
    Ok(())
}

/// A clap value parser for a setting chosen by name (as the `trellis` binary's).
fn named<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = trellis::limits::UnknownName> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).try_map(|s| s.parse::<T>())
}
