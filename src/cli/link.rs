//! `trellis link` and `trellis eval linking`.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::eval::{linking, opendialkg, retrieval};
use trellis::retrieve::Retriever;
use trellis::link::{LinkConfig, Linker, Message};
use trellis::Store;

#[derive(Args, Clone)]
pub struct LinkOptions {
    /// Messages of history whose mentions form a turn's entity set.
    #[arg(long, default_value_t = LinkConfig::default().window)]
    window: usize,
    /// Longest mention tried, in words.
    #[arg(long, default_value_t = LinkConfig::default().max_ngram)]
    max_ngram: usize,
    /// At most this many entities per mention.
    #[arg(long, default_value_t = LinkConfig::default().max_entities_per_mention)]
    max_entities: usize,
    /// A one-word mention needs at least this many characters.
    #[arg(long, default_value_t = LinkConfig::default().min_single_word_chars)]
    min_word_chars: usize,
}

impl LinkOptions {
    fn config(&self) -> LinkConfig {
        LinkConfig {
            window: self.window,
            max_ngram: self.max_ngram,
            max_entities_per_mention: self.max_entities,
            min_single_word_chars: self.min_word_chars,
            ..LinkConfig::default()
        }
    }
}

#[derive(Args)]
pub struct LinkArgs {
    #[arg(long)]
    store: PathBuf,
    /// A JSON dialog: a list of messages, each a string or {"speaker"|"sender", "text"|"message"}.
    #[arg(long, conflicts_with = "text")]
    dialog: Option<PathBuf>,
    /// Text to link.
    text: Option<String>,
    /// JSON lines: one per mention, then {"turn_entities": [...]} for the next turn.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    options: LinkOptions,
}

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Path@k, triple recall@k, MRR, Hits@k, P/R/F1 of a retriever on OpenDialKG dialogs.
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
        retriever: super::retrieve::RetrieverOptions,
        /// Cut-offs for path@k and triple recall@k.
        #[arg(long, value_delimiter = ',', default_values_t = [1, 3, 5, 10])]
        k: Vec<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Recall of the gold start entity among a turn's linked entities (OpenDialKG csv).
    Linking {
        #[arg(long)]
        store: PathBuf,
        /// OpenDialKG dialogs csv.
        #[arg(long)]
        dialogs: PathBuf,
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

fn read_dialog(path: &PathBuf) -> Result<Vec<Message>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let Some(items) = value.as_array() else { bail!("{}: expected a JSON list of messages", path.display()) };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            serde_json::Value::String(s) => Ok(Message { speaker: String::new(), text: s.clone() }),
            other => serde_json::from_value(other.clone())
                .with_context(|| format!("{}: message {} needs a \"text\" (or \"message\") string", path.display(), i + 1)),
        })
        .collect()
}

pub fn link(args: LinkArgs) -> Result<ExitCode> {
    let store = std::sync::Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening store {}", args.store.display()))?);
    let messages = match (&args.dialog, &args.text) {
        (Some(path), _) => read_dialog(path)?,
        (None, Some(text)) => vec![Message { speaker: String::new(), text: text.clone() }],
        (None, None) => bail!("give a TEXT to link, or --dialog FILE.json"),
    };
    let linker = Linker::new(store.clone(), args.options.config());
    let mentions = linker.link_dialog(&messages)?;
    let turn = linker.turn_entities(&mentions, messages.len());
    if args.json {
        for m in &mentions {
            println!("{}", serde_json::to_string(m)?);
        }
        let set: Vec<serde_json::Value> = turn
            .iter()
            .map(|&(e, w)| serde_json::json!({"id": e.0, "name": store.entity(e).ok().flatten().map(|r| r.name), "weight": w}))
            .collect();
        println!("{}", serde_json::json!({ "turn_entities": set }));
        return Ok(ExitCode::SUCCESS);
    }
    for m in &mentions {
        let names: Vec<String> = m.entities.iter().map(|e| format!("{} (#{}, degree {})", e.name, e.id, e.degree)).collect();
        println!("message {} [{}..{}] {:?} -> {}", m.message, m.start, m.end, m.text, names.join(" | "));
    }
    let set: Vec<String> = turn.iter().map(|&(e, w)| format!("{} ({w:.2})", store.entity(e).ok().flatten().map_or(String::new(), |r| r.name))).collect();
    println!("entities for the next turn: {}", set.join(", "));
    Ok(ExitCode::SUCCESS)
}

pub fn eval(cmd: EvalCommand) -> Result<ExitCode> {
    match cmd {
        EvalCommand::Retrieval { store, dataset, input, retriever, k, json } => {
            let store = std::sync::Arc::new(Store::open_read_only(&store).with_context(|| format!("opening store {}", store.display()))?);
            let dialogs = match dataset {
                Dataset::Opendialkg => opendialkg::read(&input)?,
                Dataset::Metaqa => trellis::eval::metaqa::read(&input)?,
            };
            let r = Retriever::new(store.clone(), retriever.config());
            let report = retrieval::evaluate(&store, &r, &dialogs, &k)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                let pairs = |v: &[(usize, f64)]| v.iter().map(|(k, x)| format!("@{k} {x:.4}")).collect::<Vec<_>>().join("  ");
                println!("retriever {:?} on {} turns ({} gold paths not in the store)", retriever.retriever, report.turns, report.gold_unresolved);
                println!("path       {}", pairs(&report.path_at));
                println!("triple rec {}", pairs(&report.triple_recall_at));
                println!("hits       {}", pairs(&report.hits_at));
                println!("MRR {:.4}  P {:.4}  R {:.4}  F1 {:.4}  mean size {:.1}", report.mrr, report.precision, report.recall, report.f1, report.mean_size);
                println!("latency p50 {:.2} ms, p99 {:.2} ms, {:.0} turns/s", report.latency_ms_p50, report.latency_ms_p99, report.turns_per_s);
            }
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Linking { store, dialogs, no_substring, misses, json, options } => {
            let store = std::sync::Arc::new(Store::open_read_only(&store).with_context(|| format!("opening store {}", store.display()))?);
            let dialogs = opendialkg::read(&dialogs)?;
            let linker = Linker::new(store.clone(), options.config());
            let substring = if no_substring { None } else { Some(linking::SubstringMatcher::new(&store)?) };
            let started = std::time::Instant::now();
            let r = linking::evaluate(&store, &linker, &dialogs, substring.as_ref())?;
            if let Some(path) = misses {
                let lines: Vec<String> = r
                    .misses
                    .iter()
                    .map(|(gold, named, last, linked)| serde_json::json!({"gold": gold, "named": named, "last_message": last, "linked": linked}).to_string())
                    .collect();
                std::fs::write(&path, lines.join("\n") + "\n").with_context(|| format!("writing {}", path.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!("turns with a gold path: {} (start entity named in the history: {})", r.turns, r.turns_named);
            println!("| linker | recall (named) | recall (all) | entities/turn |");
            println!("|---|---|---|---|");
            let row = |name: &str, s: &linking::Scores| {
                println!("| {name} | {:.4} | {:.4} | {:.2} |", s.recall_named, s.recall_all, s.mean_entities_per_turn)
            };
            row(&format!("trellis (window {})", options.window), &r.trellis);
            if substring.is_some() {
                row("case-insensitive substring", &r.substring);
            }
            println!("linked {} messages: p50 {:.0} µs, p99 {:.0} µs per message", r.messages, r.latency_us_p50, r.latency_us_p99);
            eprintln!("evaluated in {:.1} s", started.elapsed().as_secs_f64());
            Ok(ExitCode::SUCCESS)
        }
    }
}
