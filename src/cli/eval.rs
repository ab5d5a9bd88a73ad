//! `trellis eval retrieval` and `trellis eval linking`.

use super::dialogs::{keep_first_samples, ActionsOption};
use super::link::LinkOptions;
use super::retrieve::RetrieverOptions;
use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use trellis::dataset::metaqa;
use trellis::dataset::opendialkg;
use trellis::eval::{linking, retrieval};
use trellis::limits;
use trellis::link::Linker;
use trellis::Store;

// Parsed once per process: the size of its largest variant (the retriever options) costs
// nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum EvalCommand {
    /// Path@k, triple recall@k, MRR, Hits@k, P/R/F1 of a retriever on dialog turns with a gold path.
    Retrieval {
        #[arg(long)]
        store: PathBuf,
        /// The data set's format.
        #[arg(long, value_enum, default_value_t = Dataset::Opendialkg)]
        dataset: Dataset,
        /// The data set file.
        #[arg(long)]
        input: PathBuf,
        #[command(flatten)]
        actions: ActionsOption,
        #[command(flatten)]
        retriever: RetrieverOptions,
        /// Cut-offs for path@k and triple recall@k.
        #[arg(long, value_delimiter = ',', default_values_t = [1, 3, 5, 10], value_parser = super::usize_in(&limits::EVAL_K), allow_hyphen_values = true)]
        k: Vec<usize>,
        /// Score only the first N turns of the file (quick checks; figures use all).
        #[arg(long, value_parser = super::usize_in(&limits::MAX_TURNS), allow_hyphen_values = true)]
        max_turns: Option<usize>,
        #[arg(long)]
        json: bool,
        /// Write each turn's ranked paths beside its gold to this file (JSON lines, turn
        /// order), for error analysis; written beside it under a temporary name and renamed
        /// when complete.
        #[arg(long)]
        turns: Option<PathBuf>,
    },
    /// BLEU (sacrebleu, nltk), ROUGE-1/2/L, F1, KF1 and distinct-1/2 of generated responses against gold ones.
    Responses(super::eval_responses::ResponsesArgs),
    /// Link, retrieve and generate over OpenDialKG turns: response metrics with no, gold or
    /// retrieved knowledge, retrieval metrics, and the time of each stage.
    Pipeline(Box<super::eval_pipeline::EvalPipelineArgs>),
    /// The query producer (seed 002): R@1/3/5 of its producers and label functions, the
    /// candidate ceiling and count, on OpenDialKG turns (needs the store's text index).
    Queries(super::eval_queries::EvalQueriesArgs),
    /// Recall of the gold start entity among a turn's linked entities (OpenDialKG csv).
    Linking {
        #[arg(long)]
        store: PathBuf,
        /// OpenDialKG dialogs csv.
        #[arg(long, alias = "dialogs")]
        input: PathBuf,
        #[command(flatten)]
        actions: ActionsOption,
        /// Skip the substring baseline (it holds every name in memory).
        #[arg(long)]
        no_substring: bool,
        /// Write the turns Trellis misses to this file (JSON lines), for error analysis.
        #[arg(long)]
        misses: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        options: LinkOptions,
    },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Dataset {
    /// OpenDialKG dialogs csv.
    Opendialkg,
    /// MetaQA one-hop questions, JSON lines.
    Metaqa,
}

fn open(store: &Path) -> Result<std::sync::Arc<Store>> {
    Ok(std::sync::Arc::new(Store::open_read_only(store).with_context(|| format!("opening store {}", store.display()))?))
}

pub fn run(cmd: EvalCommand) -> Result<ExitCode> {
    match cmd {
        EvalCommand::Retrieval { store, dataset, input, actions, retriever, k, max_turns, json, turns } => {
            let store = open(&store)?;
            let mut dialogs = match dataset {
                Dataset::Opendialkg => opendialkg::read(&input)?,
                Dataset::Metaqa => metaqa::read(&input)?,
            };
            actions.apply(&mut dialogs);
            if let Some(n) = max_turns {
                keep_first_samples(&mut dialogs, n);
            }
            let (r, _) = retriever.open(store.clone())?;
            let bar = super::progress::Bar::new();
            let monitor = bar.monitor();
            let report: Result<retrieval::RetrievalReport> = match &turns {
                None => retrieval::evaluate(&store, &r, &dialogs, &k, &monitor).map_err(Into::into),
                Some(path) => {
                    // The evaluation runs inside the writer: the file appears whole, or not at all.
                    let mut report = None;
                    let written = super::batch::write_replacing(path, |out| {
                        let mut failed: Option<std::io::Error> = None;
                        let mut write = |t: retrieval::TurnOutcome| {
                            if failed.is_none() {
                                let line = serde_json::to_string(&t).map_err(std::io::Error::from);
                                if let Err(e) = line.and_then(|l| writeln!(out, "{l}")) {
                                    failed = Some(e);
                                    monitor.cancel();
                                }
                            }
                        };
                        let r = retrieval::evaluate_each(&store, &r, &dialogs, &k, &monitor, Some(&mut write));
                        if let Some(e) = failed {
                            return Err(e).with_context(|| format!("writing {}", path.display()));
                        }
                        report = Some(r?);
                        Ok(())
                    });
                    written.and_then(|()| report.ok_or_else(|| anyhow::anyhow!("the evaluation gave no report")))
                }
            };
            bar.finish();
            let report = report?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                let at = |v: &std::collections::BTreeMap<usize, f64>| v.iter().map(|(k, x)| format!("@{k} {x:.4}")).collect::<Vec<_>>().join("  ");
                outln!(
                    "retriever {:?} on {} turns ({} with a gold triple not in the store: {} naming an entity or relation it lacks, {} with an empty name)",
                    retriever.retriever,
                    report.turns,
                    report.gold_not_in_store,
                    report.gold_unknown_name,
                    report.gold_empty_name
                );
                outln!("candidate recall {:.4} (turns whose gold path the retriever could return: the ceiling of path@k)", report.candidate_recall);
                outln!("path       {}", at(&report.path_at));
                outln!("triple rec {}", at(&report.triple_recall_at));
                outln!("hits       {}", at(&report.hits_at));
                outln!("top path: starts at a gold start entity {:.4}, and takes its first relation {:.4}", report.top_start_entity, report.top_first_relation);
                outln!("MRR {:.4}  P {:.4}  R {:.4}  F1 {:.4}  mean size {:.1}", report.mrr, report.precision, report.recall, report.f1, report.mean_size);
                outln!("latency p50 {:.2} ms, p99 {:.2} ms, {:.0} turns/s", report.latency_ms_p50, report.latency_ms_p99, report.turns_per_s);
            }
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Responses(args) => super::eval_responses::run(args),
        EvalCommand::Queries(args) => super::eval_queries::run(args),
        EvalCommand::Pipeline(args) => super::eval_pipeline::eval_pipeline(*args),
        EvalCommand::Linking { store, input, actions, no_substring, misses, json, options } => {
            let store = open(&store)?;
            let mut dialogs = opendialkg::read(&input)?;
            actions.apply(&mut dialogs);
            let linker = Linker::new(store.clone(), options.config()?)?;
            let substring = if no_substring { None } else { Some(linking::SubstringMatcher::new(&store)?) };
            let started = std::time::Instant::now();
            let r = linking::evaluate(&store, &linker, &dialogs, substring.as_ref())?;
            if let Some(path) = misses {
                let lines: Vec<String> = r
                    .misses
                    .iter()
                    .map(|(gold, named, last, linked)| serde_json::json!({"gold": gold, "named": named, "last_message": last, "linked": linked}).to_string())
                    .collect();
                super::batch::write_replacing(&path, |out| {
                    out.write_all((lines.join("\n") + "\n").as_bytes()).with_context(|| format!("writing {}", path.display()))
                })?;
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&r)?);
                return Ok(ExitCode::SUCCESS);
            }
            outln!("turns with a gold path: {} (start entity named in the history: {})", r.turns, r.turns_named);
            outln!("| linker | recall (named) | recall (all) | entities/turn |");
            outln!("|---|---|---|---|");
            let row = |name: &str, s: &linking::Scores| outln!("| {name} | {:.4} | {:.4} | {:.2} |", s.recall_named, s.recall_all, s.mean_entities_per_turn);
            row(&format!("trellis (window {})", options.config()?.window), &r.trellis);
            if substring.is_some() {
                row("case-insensitive substring", &r.substring);
            }
            outln!("linked {} messages: p50 {:.0} µs, p99 {:.0} µs per message", r.messages, r.latency_us_p50, r.latency_us_p99);
            eprintln!("evaluated in {:.1} s", started.elapsed().as_secs_f64());
            Ok(ExitCode::SUCCESS)
        }
    }
}
