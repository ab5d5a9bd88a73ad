//! `trellis update`: live changes to a store, committed atomically as one generation.

use super::progress::Bar;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

use trellis::ingest::{read_change_file, Change, Format, InputSpec, OnError, Updater};

#[derive(Args)]
pub struct UpdateArgs {
    /// Store directory (it must exist).
    #[arg(long)]
    store: PathBuf,
    /// JSON-lines change file, applied first, in its order: `{"op": "add" | "retract",
    /// "subject", "relation", "object"}`, `{"op": "add_file" | "retract_file", "path"}`,
    /// `{"op": "delete_entity", "entity"}`, `{"op": "rename", "entity", "name"}`,
    /// `{"op": "alias" | "unalias", "entity", "alias"}` (docs/cli.md).
    #[arg(long)]
    changes: Option<PathBuf>,
    /// Add the facts (labels, aliases) of a file in any ingest format (repeatable).
    #[arg(long, value_name = "FILE")]
    add: Vec<PathBuf>,
    /// Retract the facts of a file in any ingest format (repeatable).
    #[arg(long, value_name = "FILE")]
    retract: Vec<PathBuf>,
    /// Format of the --add and --retract files (default: from each file's name).
    #[arg(long, value_parser = super::named::<Format>(Format::NAMES))]
    format: Option<Format>,
    /// Delete an entity, by key or by its one name: its facts, names and aliases (repeatable).
    #[arg(long, value_name = "NAME|KEY")]
    delete_entity: Vec<String>,
    /// Rename the entity with key KEY (repeatable).
    #[arg(long, num_args = 2, value_names = ["KEY", "NAME"])]
    rename: Vec<String>,
    /// Add an alias to the entity with key KEY (repeatable).
    #[arg(long, num_args = 2, value_names = ["KEY", "NAME"])]
    alias: Vec<String>,
    /// Remove an alias of the entity with key KEY (repeatable).
    #[arg(long, num_args = 2, value_names = ["KEY", "NAME"])]
    unalias: Vec<String>,
    /// Remove what the loads and updates of this source asserted, except facts another
    /// load or update also asserts (repeatable).
    #[arg(long, value_name = "NAME")]
    retract_source: Vec<String>,
    /// Name the source of the facts this update adds (provenance).
    #[arg(long)]
    source: Option<String>,
    /// `stop`: any change that cannot be applied fails the update, every such change listed,
    /// nothing committed. `skip`: commit the rest and list the refused changes.
    #[arg(long, value_parser = super::named::<OnError>(OnError::NAMES), default_value_t = OnError::Stop)]
    on_error: OnError,
    /// Keep RDF labels of added files in this language (and labels without one).
    #[arg(long, default_value = "en")]
    lang: String,
    /// Print the update report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: UpdateArgs) -> Result<ExitCode> {
    // The change file first, then the flags in the order of this list.
    let mut changes = match &args.changes {
        Some(path) => read_change_file(path)?,
        None => Vec::new(),
    };
    let file = |p: &PathBuf| InputSpec { path: p.clone(), format: args.format, compression: None };
    changes.extend(args.add.iter().map(|p| (None, Change::AddFile(file(p)))));
    changes.extend(args.retract.iter().map(|p| (None, Change::RetractFile(file(p)))));
    changes.extend(args.delete_entity.iter().map(|e| (None, Change::DeleteEntity(e.clone()))));
    changes.extend(args.rename.chunks(2).map(|kv| (None, Change::Rename { key: kv[0].clone(), name: kv[1].clone() })));
    changes.extend(args.alias.chunks(2).map(|kv| (None, Change::Alias { key: kv[0].clone(), alias: kv[1].clone() })));
    changes.extend(args.unalias.chunks(2).map(|kv| (None, Change::Unalias { key: kv[0].clone(), alias: kv[1].clone() })));
    changes.extend(args.retract_source.iter().map(|s| (None, Change::RetractSource(s.clone()))));
    if changes.is_empty() {
        return Err(super::Usage(
            "nothing to change: give --changes, --add, --retract, --delete-entity, --rename, --alias, --unalias or --retract-source".into(),
        )
        .into());
    }
    let bar = Bar::new();
    let mut updater = Updater::new(&args.store).on_error(args.on_error).with_lang(args.lang).with_monitor(bar.monitor());
    if let Some(s) = args.source {
        updater = updater.with_source(s);
    }
    let result = updater.apply(changes);
    bar.finish();
    let report = result?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let c = &report.counts;
    match report.generation {
        Some(g) => outln!("committed generation {g} in {:.3} s ({} change(s) applied)", report.elapsed.as_secs_f64(), c.applied),
        None => outln!("nothing changed; nothing committed ({} change(s) applied)", c.applied),
    }
    outln!(
        "facts: +{} -{}; entities: +{} deleted {}; relations: +{}; renamed {}; aliases: +{} -{}",
        c.facts_added,
        c.facts_retracted,
        c.entities_added,
        c.entities_deleted,
        c.relations_added,
        c.renamed,
        c.aliases_added,
        c.aliases_removed
    );
    outln!("store: {} facts, {} entities, {} relations", report.facts, report.entities, report.relations);
    for index in &report.token_indexes.updated {
        outln!("token index {index}: {} name(s) encoded", report.token_indexes.names_encoded);
    }
    for index in &report.token_indexes.stale {
        outln!("token index {index}: not updated (built before this format, or stale already): run index-tokens again");
    }
    match &report.text_index {
        trellis::text::TextUpkeep::Updated { written, deleted } => outln!("text index: {written} document(s) written, {deleted} deleted"),
        trellis::text::TextUpkeep::Stale => outln!("text index: not updated (stale already): run index-text again"),
        _ => {}
    }
    if !report.skipped.is_empty() {
        outln!("skipped {} change(s):", report.skipped.len());
        for p in &report.skipped {
            outln!("  {p}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
