//! Argument parsing and dispatch.

/// Writes a line to standard output (every command's results go through it, not
/// `println!`): a reader that went away (`trellis stats --json | head -c 10`) ends the
/// command quietly, as a Unix tool ends on SIGPIPE, rather than with a panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod batch;
mod check;
mod dialogs;
mod doctor;
mod eval;
mod eval_pipeline;
mod eval_queries;
mod eval_responses;
mod hints;
mod ingest;
mod link;
mod migrate;
mod progress;
mod query;
mod respond;
mod retrieve;
mod settings;
mod targets;
mod text;
mod tokens;
mod update;
mod vectors;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A bad line of an input file read by the command line (`retrieve`'s requests, `link`'s
/// dialog): a data error like a bad triple line.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {what}")]
pub struct BadInputLine {
    pub file: String,
    pub line: u64,
    pub what: String,
}

/// A command line that cannot work (flags that do not go together): exit 2, as clap's own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// clap value parsers over `trellis::limits`: a value outside the range (a negative one,
/// one past u64, NaN, inf included) is a usage error (exit 2) naming the range.
pub fn usize_in(range: &'static trellis::limits::IntRange) -> impl Fn(&str) -> Result<usize, trellis::limits::OutOfRange> + Clone + Send + Sync + 'static {
    move |text| range.parse(text).and_then(|v| usize::try_from(v).map_err(|_| range.refuse(v)))
}

/// A clap value parser for a library setting chosen by name (`NAMES`, `FromStr`): the
/// names are the possible values `--help` lists and an unknown one is refused with them.
pub fn named<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = trellis::limits::UnknownName> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).try_map(|s| s.parse::<T>())
}

/// Exit status when standard output is closed under a command: what a shell reports for a
/// process ended by SIGPIPE (128 + 13).
pub const EXIT_CLOSED_PIPE: i32 = 141;

/// What [`outln!`] calls. A closed pipe ends the process with
/// [`EXIT_CLOSED_PIPE`] and no message (its reader has what it wanted); any other write error
/// ends it with a message and exit 1. Outputs written to files (`--output`) are complete or
/// resumable before anything is printed, so ending here loses nothing.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_CLOSED_PIPE);
        }
        eprintln!("error: writing to standard output: {e}");
        std::process::exit(i32::from(EXIT_FAILURE));
    }
}

/// The error and its causes on one line, each sentence once: a cause whose text its parent
/// already wrote (a message that embeds its source) is not written again.
pub fn error_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Exit codes, the same for every command: usage errors are 2 (clap's own), malformed
/// input data 65 (a bad line of any input file, an unknown format, a truncated file),
/// everything else 1 (a store that cannot be opened or read, IO, `validate` finding damage).
pub const EXIT_DATA_ERROR: u8 = 65;
/// See [`EXIT_DATA_ERROR`].
pub const EXIT_FAILURE: u8 = 1;

#[derive(Parser)]
#[command(name = "trellis", version, about = "Embedded knowledge-graph store and retrieval engine for KG-grounded dialog")]
struct Cli {
    /// Log what happens (-v info, -vv debug, -vvv trace) to stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bulk-load triple files (TSV, pipe, N-Triples; .gz/.bz2/.zst; `-` for stdin) into a store.
    Ingest(ingest::IngestArgs),
    /// Change a store while it serves: add and retract facts, delete, rename and alias
    /// entities, in one atomic commit whose cost follows the change.
    Update(update::UpdateArgs),
    /// Counts, format version and size on disk of a store.
    Stats {
        #[arg(long)]
        store: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Show an entity by exact key, name (normalized), or id (`#123`, or `123` when no
    /// entity is named so).
    Entity {
        #[arg(long)]
        store: PathBuf,
        /// Exact key or name of the entity, or `#ID`.
        entity: String,
        #[arg(long)]
        json: bool,
    },
    /// Facts around an entity, both directions, as text or JSON lines.
    Neighbors(query::NeighborsArgs),
    /// Check that every index of a store agrees with the others; exit 1 on any problem.
    Validate {
        #[arg(long)]
        store: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Bring a store written by an older Trellis to this build's format.
    Migrate {
        #[arg(long)]
        store: PathBuf,
        /// Print the report (versions and steps) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Encode every entity and relation name with a tokenizer and store the token trie.
    IndexTokens(tokens::IndexTokensArgs),
    /// Build the text index: one document per entity (name, aliases, facts), for `search`,
    /// the query producer and `--retriever search`.
    IndexText(text::IndexTextArgs),
    /// Find entities by text: a name (misspelt or partial), a description, a fact.
    Search(text::SearchArgs),
    /// Embed every fact and entity name with a bi-encoder once and keep the vectors in the
    /// store, for `--dense-paths facts` and PCST's dense prizes.
    IndexVectors(vectors::IndexVectorsArgs),
    /// Link the entities a text or a dialog mentions.
    Link(link::LinkArgs),
    /// Check replies against the store: each claim supported, refuted or not enough information.
    Check(check::CheckArgs),
    /// Retrieve paths for every dialog of a JSON-lines file, in parallel, in input order.
    Retrieve(retrieve::RetrieveArgs),
    /// Reply to one dialog: link its entities, retrieve knowledge, generate the reply.
    Respond(respond::RespondArgs),
    /// Reply to every dialog of a JSON-lines file (link, retrieve, generate), in input order.
    Run(respond::RunArgs),
    /// Training data from OpenDialKG dialogs, made by the code that runs the model: for a
    /// retriever per turn the encoder input, the gold path as decoder tokens and the
    /// constraint's allowed set at each step; for a generator the encoder input and the reply.
    Targets(targets::TargetsArgs),
    /// Evaluations on the shared data sets.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Check the ONNX Runtime library and, with --model, a model directory's files and
    /// graphs; each problem is one sentence (exit 65), an unusable runtime exits 1.
    Doctor(doctor::DoctorArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let result = match cli.command {
        Command::Ingest(args) => ingest::run(args),
        Command::Update(args) => update::run(args),
        Command::Stats { store, json } => query::stats(&store, json),
        Command::Entity { store, entity, json } => query::entity(&store, &entity, json),
        Command::Neighbors(args) => query::neighbors(args),
        Command::Validate { store, json } => query::validate(&store, json),
        Command::Migrate { store, json } => migrate::run(&store, json),
        Command::IndexTokens(args) => tokens::run(args),
        Command::IndexText(args) => text::index(args),
        Command::Search(args) => text::search(args),
        Command::IndexVectors(args) => vectors::run(args),
        Command::Link(args) => link::link(args),
        Command::Check(args) => check::check(args),
        Command::Retrieve(args) => retrieve::run(args),
        Command::Respond(args) => respond::respond(args),
        Command::Run(args) => respond::run(args),
        Command::Targets(args) => targets::run(args),
        Command::Eval(cmd) => eval::run(cmd),
        Command::Doctor(args) => doctor::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            let mut line = error_line(&err);
            // The library says what a store lacks; the command that provides it is ours.
            if let Some(hint) = hints::command_hint(&err) {
                line.push_str("; ");
                line.push_str(&hint);
            }
            eprintln!("error: {line}");
            // A setting out of range or too big for memory, whether the command line or the
            // library found it, is the command line's fault.
            if err.chain().any(|e| {
                e.downcast_ref::<Usage>().is_some()
                    || e.downcast_ref::<trellis::settings::SettingError>().is_some()
                    || e.downcast_ref::<trellis::limits::OutOfRange>().is_some()
                    || e.downcast_ref::<trellis::limits::TooMuchMemory>().is_some()
            }) {
                return ExitCode::from(2);
            }
            let data_error = err.chain().any(|e| {
                e.downcast_ref::<BadInputLine>().is_some()
                    || matches!(e.downcast_ref::<trellis::dataset::DatasetError>(), Some(trellis::dataset::DatasetError::Bad { .. }))
                    || matches!(
                        e.downcast_ref::<trellis::IngestError>(),
                        Some(
                            trellis::IngestError::BadLine { .. }
                                | trellis::IngestError::UnknownFormat { .. }
                                | trellis::IngestError::Truncated { .. }
                                | trellis::IngestError::UpdateRefused { .. }
                                | trellis::IngestError::ChangeFile { .. }
                        )
                    )
            });
            ExitCode::from(if data_error { EXIT_DATA_ERROR } else { EXIT_FAILURE })
        }
    }
}

fn init_tracing(verbose: u8) {
    if verbose == 0 {
        return;
    }
    let level = match verbose {
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("trellis={level}")));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
