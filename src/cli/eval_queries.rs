//! `trellis eval queries`.

use super::dialogs::{keep_first_samples, ActionsOption};
use super::link::LinkOptions;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use trellis::dataset::{opendialkg, wow};
use trellis::eval::queries;
use trellis::link::Linker;
use trellis::queries::{LinearScorer, Producer, QueryEngine};
use trellis::text::TextIndex;
use trellis::Store;

#[derive(Args)]
pub struct EvalQueriesArgs {
    #[arg(long)]
    store: PathBuf,
    /// The dialogs: OpenDialKG's csv, or Wizard of Wikipedia's JSON (`--dataset wow`).
    #[arg(long)]
    input: PathBuf,
    /// The dialogs' format: `opendialkg` (gold: the path's new entities) or `wow` (gold:
    /// the entity each wizard turn's checked passage title names).
    #[arg(long, value_enum, default_value_t = QueryDataset::Opendialkg)]
    dataset: QueryDataset,
    #[command(flatten)]
    actions: ActionsOption,
    /// The learned producer (a directory with query-producer.json, or the file): adds its row.
    #[arg(long)]
    producer_model: Option<PathBuf>,
    /// Score only the first N turns of the file (quick checks; figures use all).
    #[arg(long, value_parser = super::usize_in(&trellis::limits::MAX_TURNS), allow_hyphen_values = true)]
    max_turns: Option<usize>,
    /// Write each scored turn's candidates, features and labels (JSON lines): the learned
    /// producer's training data (tools/train/query_producer.py).
    #[arg(long)]
    features: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    link: LinkOptions,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum QueryDataset {
    /// OpenDialKG dialogs csv.
    Opendialkg,
    /// Wizard of Wikipedia JSON (ParlAI's layout).
    Wow,
}

pub fn run(args: EvalQueriesArgs) -> Result<ExitCode> {
    let store = Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening store {}", args.store.display()))?);
    let mut dialogs = match args.dataset {
        QueryDataset::Opendialkg => opendialkg::read(&args.input)?,
        QueryDataset::Wow => {
            anyhow::ensure!(args.actions.is_all(), "--actions picks OpenDialKG's speakers; Wizard of Wikipedia's samples are the wizard's turns");
            wow::read(&args.input)?
        }
    };
    args.actions.apply(&mut dialogs);
    if let Some(n) = args.max_turns {
        keep_first_samples(&mut dialogs, n);
    }
    let learned = match &args.producer_model {
        Some(p) => Some(Producer::Learned(Arc::new(LinearScorer::from_path(p)?))),
        None => None,
    };
    let index = TextIndex::open(&store)?;
    let engine = QueryEngine::new(Linker::new(store.clone(), args.link.config()?)?, index);
    let bar = super::progress::Bar::new();
    let (report, records) = queries::evaluate(&engine, &dialogs, learned.as_ref(), args.features.is_some(), &bar.monitor())?;
    bar.finish();
    if let Some(path) = &args.features {
        super::batch::write_replacing(path, |out| {
            for r in &records {
                writeln!(out, "{}", serde_json::to_string(r)?).with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(())
        })?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let r = |m: &std::collections::BTreeMap<usize, f64>, k: usize| m.get(&k).copied().unwrap_or(0.0);
    if let QueryDataset::Wow = args.dataset {
        // No gold path: the fact columns do not apply.
        outln!("{} turns scored ({} whose checked passage's title names no entity of the store)", report.turns, report.excluded_not_in_store);
        outln!("candidates per turn {:.2}; ceiling R@M {:.4}", report.mean_candidates, report.ceiling);
        outln!("| producer | R@1 | R@3 | R@5 |");
        outln!("|---|---|---|---|");
        for row in &report.rows {
            let a = &row.recall_at;
            outln!("| {} | {:.4} | {:.4} | {:.4} |", row.name, r(a, 1), r(a, 3), r(a, 5));
        }
    } else {
        outln!(
            "{} turns scored ({} excluded: the gold path names only entities the dialog had named; {} with no gold entity in the store)",
            report.turns,
            report.excluded_no_new_entity,
            report.excluded_not_in_store
        );
        outln!("candidates per turn {:.2}; ceiling R@M {:.4}, fact R@M {:.4}", report.mean_candidates, report.ceiling, report.fact_ceiling);
        outln!("| producer | R@1 | R@3 | R@5 | fact R@1 | fact R@3 | fact R@5 |");
        outln!("|---|---|---|---|---|---|---|");
        for row in &report.rows {
            let (a, b) = (&row.recall_at, &row.fact_recall_at);
            outln!("| {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} |", row.name, r(a, 1), r(a, 3), r(a, 5), r(b, 1), r(b, 3), r(b, 5));
        }
    }
    eprintln!("evaluated in {:.1} s ({} searches)", report.seconds, report.searches);
    Ok(ExitCode::SUCCESS)
}
