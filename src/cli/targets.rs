//! `trellis targets`: training data made by the code that runs the model. For a retriever's
//! model directory: encoder inputs, gold paths as decoder tokens, the constraint's allowed
//! sets. For a generator's: encoder inputs (history and gold path) and replies as tokens.
//! For a subgraph model's (task `subgraph`): the candidate subgraph as the model's inputs,
//! the candidate paths as fact indices, the gold one's index.

use super::dialogs::ActionsOption;
use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::dataset::opendialkg;
use trellis::decode::CandidateMode;
use trellis::generate::targets::{response_target, ResponseTarget};
use trellis::generate::GenerationConfig;
use trellis::graph::informativeness::KatzConfig;
use trellis::graph::{CandidateConfig, CandidateScope};
use trellis::limits;
use trellis::model::dir::ModelDir;
use trellis::model::dir::TaskSection;
use trellis::model::encoder::{EncoderDir, EncoderTask};
use trellis::retrieve::surge::{SurgeTarget, SurgeTargetMaker};
use trellis::retrieve::targets::{TargetMaker, TrainingTarget};
use trellis::Store;

#[derive(Args)]
pub struct TargetsArgs {
    /// The store the targets are read from (with the token index of the model's tokenizer);
    /// a retriever's targets need it, a generator's do not read it.
    #[arg(long)]
    store: Option<PathBuf>,
    /// A model directory, or one with only config.json, tokenizer.json and trellis.json:
    /// its input format, tokenizer and linearization decide the targets.
    #[arg(long)]
    model: PathBuf,
    /// OpenDialKG dialogs csv.
    #[arg(long, alias = "dialogs")]
    input: PathBuf,
    #[command(flatten)]
    actions: ActionsOption,
    /// A generator's targets only: also the replies that follow no action, with no
    /// knowledge in the input (so the generator learns to answer without any).
    #[arg(long)]
    without_knowledge: bool,
    /// Whose candidates the allowed sets are: the capped candidate subgraph, or the whole 1-
    /// and 2-hop neighbourhood (what `retrieve --scope` decodes over).
    #[arg(long, value_parser = super::named::<CandidateScope>(CandidateScope::NAMES), default_value_t = CandidateScope::Capped)]
    scope: CandidateScope,
    #[command(flatten)]
    link: super::link::LinkOptions,
    /// JSON lines out, one per turn with a gold path, in file order: {"dialog", "upto",
    /// "speaker", "input_ids", "target_ids", "skipped"}, and for a retriever "allowed",
    /// "admitted"; for a subgraph model the model's inputs, "paths" and "gold"
    /// (schema/model.md).
    #[arg(long)]
    output: PathBuf,
    /// Worker threads (default, or 0: all cores).
    #[arg(long, value_parser = super::usize_in(&limits::THREADS), allow_hyphen_values = true)]
    threads: Option<usize>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: TargetsArgs) -> Result<ExitCode> {
    if trellis::model::encoder::config::task_of(&args.model)?.as_deref() == Some("subgraph") {
        return subgraph_targets(&args);
    }
    let dir = ModelDir::open_spec(&args.model)?;
    let mut dialogs = opendialkg::read(&args.input)?;
    let generator = dir.trellis().task == GenerationConfig::TASK;
    if args.without_knowledge {
        if !generator {
            anyhow::bail!(super::Usage(format!("--without-knowledge is for a generator's targets; {} is a retriever", args.model.display())));
        }
        opendialkg::add_turns_without_action(&mut dialogs);
    }
    args.actions.apply(&mut dialogs);
    if generator {
        let config: GenerationConfig = dir.section()?;
        return generator_targets(&args, &dir, &config, &dialogs);
    }
    let Some(store_path) = &args.store else {
        anyhow::bail!(super::Usage(format!("{} is a retriever: its targets need --store DIR (the store with its token index)", args.model.display())));
    };
    let store = std::sync::Arc::new(Store::open_read_only(store_path).with_context(|| format!("opening store {}", store_path.display()))?);
    let mode = match args.scope {
        CandidateScope::Capped => CandidateMode::Capped(CandidateConfig::default()),
        CandidateScope::Uncapped => CandidateMode::Uncapped { hub_degree: KatzConfig::default().hub_degree },
    };
    let maker = TargetMaker::open(store.clone(), &dir, args.link.config()?, mode)?;
    let (mut admitted, mut steps, mut choices) = (0u64, 0u64, 0u64);
    let mut skipped: std::collections::BTreeMap<&'static str, u64> = Default::default();
    let written = write_targets(
        &args,
        &turns(&dialogs),
        |(i, d, s)| maker.target(*i, d, s).with_context(|| format!("reading store {}", store_path.display())),
        |t: &TrainingTarget| match t.skipped {
            Some(why) => *skipped.entry(why).or_default() += 1,
            None => {
                admitted += u64::from(t.admitted);
                steps += t.allowed.len() as u64;
                choices += t.allowed.iter().map(|a| a.len() as u64).sum::<u64>();
            }
        },
    )?;
    let with_target = written - skipped.values().sum::<u64>();
    let summary = serde_json::json!({
        "turns": written,
        "with_target": with_target,
        "admitted": admitted,
        "skipped": skipped,
        "mean_allowed_set": if steps > 0 { choices as f64 / steps as f64 } else { 0.0 },
        "output": args.output.display().to_string(),
    });
    if args.json {
        outln!("{summary}");
    } else {
        eprintln!(
            "wrote {written} turns to {}: {with_target} with a target, {admitted} of them candidates of the {:?} scope; skipped {:?}",
            args.output.display(),
            args.scope,
            skipped
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A subgraph model's targets: the turn's candidate subgraph, linked and read as
/// `--retriever surge` does.
fn subgraph_targets(args: &TargetsArgs) -> Result<ExitCode> {
    if args.without_knowledge {
        anyhow::bail!(super::Usage(format!("--without-knowledge is for a generator's targets; {} is a subgraph model", args.model.display())));
    }
    if args.scope != CandidateScope::Capped {
        anyhow::bail!(super::Usage("--scope uncapped is for a generative retriever's targets; a subgraph model ranks the capped candidates".into()));
    }
    let Some(store_path) = &args.store else {
        anyhow::bail!(super::Usage(format!("{} is a subgraph model: its targets need --store DIR", args.model.display())));
    };
    let dir = EncoderDir::open_spec(&args.model, Some(EncoderTask::Subgraph))?;
    let mut dialogs = opendialkg::read(&args.input)?;
    args.actions.apply(&mut dialogs);
    let store = std::sync::Arc::new(Store::open_read_only(store_path).with_context(|| format!("opening store {}", store_path.display()))?);
    let maker = SurgeTargetMaker::open(store, dir, args.link.config()?)?;
    let (mut facts, mut paths) = (0u64, 0u64);
    let mut skipped: std::collections::BTreeMap<&'static str, u64> = Default::default();
    let written = write_targets(
        args,
        &turns(&dialogs),
        |(i, d, s)| maker.target(*i, d, s).with_context(|| format!("reading store {}", store_path.display())),
        |t: &SurgeTarget| match t.skipped {
            Some(why) => *skipped.entry(why).or_default() += 1,
            None => {
                facts += t.ids.fact_head.len() as u64;
                paths += t.paths.len() as u64;
            }
        },
    )?;
    let with_target = written - skipped.values().sum::<u64>();
    let mean = |x: u64| if with_target > 0 { x as f64 / with_target as f64 } else { 0.0 };
    let summary = serde_json::json!({
        "turns": written,
        "with_target": with_target,
        "skipped": skipped,
        "mean_facts": mean(facts),
        "mean_paths": mean(paths),
        "output": args.output.display().to_string(),
    });
    if args.json {
        outln!("{summary}");
    } else {
        eprintln!(
            "wrote {written} turns to {}: {with_target} with the gold path among the candidates ({:.0} facts, {:.0} paths a turn); skipped {:?}",
            args.output.display(),
            mean(facts),
            mean(paths),
            skipped
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A generator's targets: no store, no linking; the gold path is the knowledge.
fn generator_targets(args: &TargetsArgs, dir: &ModelDir, config: &GenerationConfig, dialogs: &[opendialkg::Dialog]) -> Result<ExitCode> {
    let (mut tokens, mut skipped) = (0u64, std::collections::BTreeMap::<&'static str, u64>::new());
    let written = write_targets(
        args,
        &turns(dialogs),
        |(i, d, s)| {
            response_target(dir, config, *i, d, s)
                .with_context(|| format!("{}: dialog {} (0-based), the turn after message {}", args.input.display(), i, s.upto))
        },
        |t: &ResponseTarget| match t.skipped {
            Some(why) => *skipped.entry(why).or_default() += 1,
            None => tokens += t.target_ids.len() as u64,
        },
    )?;
    let with_target = written - skipped.values().sum::<u64>();
    let summary = serde_json::json!({
        "turns": written,
        "with_target": with_target,
        "skipped": skipped,
        "mean_target_tokens": if with_target > 0 { tokens as f64 / with_target as f64 } else { 0.0 },
        "output": args.output.display().to_string(),
    });
    if args.json {
        outln!("{summary}");
    } else {
        eprintln!("wrote {written} turns to {}: {with_target} with a reply; skipped {:?}", args.output.display(), skipped);
    }
    Ok(ExitCode::SUCCESS)
}

type Turn<'d> = (usize, &'d opendialkg::Dialog, &'d opendialkg::Sample);

/// Every turn with a gold path: the dialog's index, the dialog, the turn.
fn turns(dialogs: &[opendialkg::Dialog]) -> Vec<Turn<'_>> {
    dialogs.iter().enumerate().flat_map(|(i, d)| d.samples.iter().map(move |s| (i, d, s))).collect()
}

/// Makes every turn's target, in parallel a chunk at a time, and writes them as JSON lines in
/// file order, with a progress bar; `tally` sees each in order. Returns how many were written.
fn write_targets<T: serde::Serialize + Send>(
    args: &TargetsArgs,
    turns: &[Turn<'_>],
    make: impl Fn(&Turn<'_>) -> Result<T> + Sync,
    mut tally: impl FnMut(&T),
) -> Result<u64> {
    let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(turns.len() as u64), target);
    bar.set_style(ProgressStyle::with_template("targets {bar:30} {human_pos}/{human_len} turns ({per_sec}, ETA {eta})")?);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let out = std::fs::File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = BufWriter::new(out);
    let writing = || format!("writing {}", args.output.display());
    let mut written = 0u64;
    for chunk in turns.chunks(512) {
        let made: Vec<Result<T>> = pool.install(|| chunk.par_iter().map(&make).collect());
        for t in made {
            let t = t?;
            tally(&t);
            serde_json::to_writer(&mut out, &t).with_context(writing)?;
            out.write_all(b"\n").with_context(writing)?;
            written += 1;
        }
        bar.inc(chunk.len() as u64);
    }
    out.flush().with_context(writing)?;
    bar.finish_and_clear();
    Ok(written)
}
