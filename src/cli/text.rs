//! `trellis index-text` and `trellis search`.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::ingest::OnError;
use trellis::text::{DocumentsInput, SearchOptions, TextIndex, Unmatched};

#[derive(Args)]
pub struct IndexTextArgs {
    #[arg(long)]
    store: PathBuf,
    /// Documents to add to the entities' documents: JSON lines of {"title": ..., "text": ...}
    /// (an article dump); each text goes to the entity its title names (its key, else its
    /// primary name), cut to 4096 bytes.
    #[arg(long)]
    documents: Option<PathBuf>,
    /// `stop`: a document whose title names no entity (or one already given a document)
    /// stops the build, the store unchanged. `skip`: leave such documents out, counted.
    #[arg(long, value_parser = super::named::<OnError>(OnError::NAMES), default_value_t = OnError::Stop)]
    on_error: OnError,
    /// Print what was built (the index's record and the documents written) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn index(args: IndexTextArgs) -> Result<ExitCode> {
    let documents = args.documents.map(|path| DocumentsInput {
        path,
        unmatched: match args.on_error {
            OnError::Skip => Unmatched::Skip,
            _ => Unmatched::Stop,
        },
    });
    let bar = super::progress::Bar::new();
    let report = trellis::Store::index_text(&args.store, documents.as_ref(), &bar.monitor())
        .with_context(|| format!("indexing the text of {}", args.store.display()))?;
    bar.finish();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "indexed {} entity documents (name, aliases, up to {} facts each) as generation {}",
        report.documents,
        report.record.facts_per_document,
        report.record.generation
    );
    if let Some(d) = &documents {
        let t = report.texts;
        outln!(
            "documents of {}: {} read, {} added to entity documents, {} skipped (no entity by that title, or one already given a document)",
            d.path.display(),
            t.read,
            t.matched,
            t.skipped
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct SearchArgs {
    #[arg(long)]
    store: PathBuf,
    /// What to look for: a name (misspelt or partial), words of a description, a fact.
    text: String,
    /// How many entities to show.
    #[arg(long, default_value_t = 10, value_parser = super::usize_in(&trellis::limits::TOP), allow_hyphen_values = true)]
    top: usize,
    /// Match words exactly (no matches within an edit or two).
    #[arg(long)]
    exact: bool,
    /// One JSON object: the query and the hits, each with its score and matched facts.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct HitView<'a> {
    rank: usize,
    entity: u32,
    name: &'a str,
    score: f32,
    aliases: &'a [String],
    matched_facts: Vec<[&'a str; 3]>,
    /// The text a documents input gave the entity, when it has one.
    #[serde(skip_serializing_if = "str::is_empty")]
    text: &'a str,
}

pub fn search(args: SearchArgs) -> Result<ExitCode> {
    let store = super::query::open(&args.store)?;
    let index = TextIndex::open(&store)?;
    let hits = index.search(&args.text, args.top, SearchOptions { fuzzy: !args.exact })?;
    let views: Vec<HitView> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| HitView {
            rank: i + 1,
            entity: h.entity.0,
            name: &h.document.name,
            score: h.score,
            aliases: &h.document.aliases,
            matched_facts: h
                .matched
                .iter()
                .map(|&f| {
                    let (s, r, o) = h.document.facts[f].triple(&h.document.name);
                    [s, r, o]
                })
                .collect(),
            text: &h.document.text,
        })
        .collect();
    if args.json {
        outln!("{}", serde_json::to_string(&serde_json::json!({ "query": args.text, "hits": views }))?);
        return Ok(ExitCode::SUCCESS);
    }
    if views.is_empty() {
        outln!("no entity matches {:?}", args.text);
    }
    for v in &views {
        outln!("{:>3}. {}  (score {:.3}, entity {})", v.rank, v.name, v.score, v.entity);
        for [s, r, o] in &v.matched_facts {
            outln!("       {s} | {r} | {o}");
        }
        if !v.text.is_empty() {
            let head: String = v.text.chars().take(160).collect();
            outln!("       {head}{}", if head.len() < v.text.len() { "..." } else { "" });
        }
    }
    Ok(ExitCode::SUCCESS)
}
