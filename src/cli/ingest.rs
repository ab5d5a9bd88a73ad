//! `trellis ingest`.

use super::progress::Bar;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

use trellis::ingest::{BulkLoader, Compression, Format, InputSpec, OnError};
use trellis::limits;

#[derive(Args)]
pub struct IngestArgs {
    /// Store directory (created when missing; a second load adds to it).
    #[arg(long)]
    store: PathBuf,
    /// Input format, for every file (default: from each file's name).
    #[arg(long, value_parser = super::named::<Format>(Format::NAMES))]
    format: Option<Format>,
    /// Input compression (default: from the name, then the magic bytes).
    #[arg(long, value_parser = super::named::<Compression>(Compression::NAMES))]
    compression: Option<Compression>,
    /// Memory budget of the load in MB (sort buffers and dictionaries).
    #[arg(long, default_value_t = 1024, value_parser = super::usize_in(&limits::MEMORY_MB), allow_hyphen_values = true)]
    memory_mb: usize,
    /// Spill a sorted run every N fact lines whatever the memory budget (for tests and
    /// measurements of the run merge).
    #[arg(long, hide = true, value_parser = super::usize_in(&limits::SORT_RUN_TRIPLES), allow_hyphen_values = true)]
    sort_run_triples: Option<usize>,
    /// Parser threads (default, or 0: all cores).
    #[arg(long, value_parser = super::usize_in(&limits::THREADS), allow_hyphen_values = true)]
    threads: Option<usize>,
    /// `stop`: the first malformed line aborts the load and nothing is stored.
    /// `skip`: load the rest, count rejects per kind, write rejected lines to a file.
    #[arg(long, value_parser = super::named::<OnError>(OnError::NAMES), default_value_t = OnError::Stop)]
    on_error: OnError,
    /// Where `--on-error skip` writes rejected lines (default: STORE/rejected-gen-N.tsv).
    #[arg(long)]
    rejects: Option<PathBuf>,
    /// Relations starting with this prefix are reverses: `~r(a, b)` is stored as `r(b, a)`.
    /// Empty to disable.
    #[arg(long, default_value = "~")]
    reverse_prefix: String,
    /// Keep RDF labels in this language (and labels without one); empty keeps all.
    #[arg(long, default_value = "en")]
    lang: String,
    /// Name the source of this load's facts (provenance: `update --retract-source NAME`
    /// removes what it asserted and nothing else asserts).
    #[arg(long)]
    source: Option<String>,
    /// Print the load report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Triple files; `-` reads standard input (needs --format).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(args: IngestArgs) -> Result<ExitCode> {
    let inputs: Vec<InputSpec> = args.files.iter().map(|p| InputSpec { path: p.clone(), format: args.format, compression: args.compression }).collect();
    let bar = Bar::new();
    let mut loader = BulkLoader::new(&args.store)
        .with_memory_mb(args.memory_mb)
        .on_error(args.on_error)
        .with_reverse_prefix(args.reverse_prefix)
        .with_lang(args.lang)
        .with_monitor(bar.monitor());
    if let Some(n) = args.sort_run_triples {
        loader = loader.with_sort_run_triples(n);
    }
    if let Some(t) = args.threads.filter(|&t| t > 0) {
        loader = loader.with_threads(t);
    }
    if let Some(r) = args.rejects {
        loader = loader.with_rejects_file(r);
    }
    if let Some(s) = args.source {
        loader = loader.with_source(s);
    }
    let result = loader.load(&inputs);
    bar.finish();
    // The library says what is missing; the command line says which flag gives it.
    let report = match result {
        Err(e @ trellis::IngestError::UnknownFormat { .. }) => return Err(anyhow::Error::new(e).context("use --format tsv|pipe|ntriples")),
        other => other?,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let secs = report.elapsed.as_secs_f64();
    outln!(
        "read {} fact lines from {} file(s) in {:.2} s ({:.0} lines/s)",
        report.facts_read,
        report.inputs.len(),
        secs,
        report.facts_read as f64 / secs.max(1e-9)
    );
    outln!("new: {} facts, {} entities, {} relations, {} aliases", report.new_facts, report.new_entities, report.new_relations, report.new_aliases);
    outln!("store: {} facts, {} entities, {} relations", report.facts, report.entities, report.relations);
    if report.text_index == trellis::text::TextUpkeep::Stale {
        outln!("text index: stale after this load (a load does not update it): run index-text again");
    }
    if report.rejected_total() > 0 {
        outln!("rejected {} lines:", report.rejected_total());
        for (kind, n) in &report.rejected {
            outln!("  {kind}: {n}");
        }
        if let Some(f) = &report.rejects_file {
            outln!("rejected lines written to {}", f.display());
        }
    }
    if report.unused_labels > 0 {
        outln!("{} labels or aliases name no entity of any fact (not stored)", report.unused_labels);
    }
    Ok(ExitCode::SUCCESS)
}
