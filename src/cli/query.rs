//! Read-only commands: `stats`, `entity`, `neighbors` and `validate`.

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use trellis::graph::{neighborhood, Step};
use trellis::limits;
use trellis::store::{EntityMatch, ReaderPin, WELL_KNOWN_PREFIXES};
use trellis::{Direction, EntityId, RelationId, Store};

pub(crate) fn open(store: &Path) -> Result<Store> {
    let opened = Store::open_read_only(store).with_context(|| format!("opening store {}", store.display()))?;
    if let ReaderPin::Unregistered { readers, reason } = opened.reader_pin() {
        eprintln!(
            "warning: cannot register as a reader in {} ({reason}); a load committed meanwhile may remove the generation this command reads",
            readers.display()
        );
    }
    Ok(opened)
}

pub fn stats(store: &Path, as_json: bool) -> Result<ExitCode> {
    let opened = open(store)?;
    let s = opened.stats();
    let tokenizers = opened.tokenizers()?;
    if as_json {
        let mut v = serde_json::to_value(&s)?;
        v["token_indexes"] = serde_json::to_value(&tokenizers)?;
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!("entities        {}", s.entities);
        outln!("relations       {}", s.relations);
        outln!("facts           {}", s.facts);
        outln!("names           {}", s.names);
        outln!("aliases         {}", s.aliases);
        outln!("format version  {}", s.format_version);
        outln!("created by      {}", s.created_by);
        outln!("loads           {}", s.loads);
        outln!("size on disk    {} bytes ({:.1} bytes/fact)", s.size_on_disk_bytes, s.size_on_disk_bytes as f64 / s.facts.max(1) as f64);
        for (cf, bytes) in &s.column_family_bytes {
            outln!("  {cf:<14}{bytes} bytes");
        }
        for t in &tokenizers {
            outln!("token index     {} ({}, vocabulary {})", t.fingerprint, t.name, t.vocab_size);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Entities a user means by `text`: `#ID`, else what `Store::resolve_entity` finds (key,
/// prefixed IRI, local name, name), else a bare number as an id.
/// Each entity comes with how it matched (`None`: as an id).
fn resolve_entities(store: &Store, text: &str) -> Result<Vec<(EntityId, Option<EntityMatch>)>> {
    let by_id = |id| (EntityId(id), None);
    if let Some(id) = text.strip_prefix('#').and_then(|n| n.parse::<u32>().ok()) {
        if u64::from(id) >= store.entity_count() {
            bail!("no entity #{id}: the store has {} entities (ids 0..{})", store.entity_count(), store.entity_count());
        }
        return Ok(vec![by_id(id)]);
    }
    let found = store.resolve_entity(text)?;
    if !found.is_empty() {
        return Ok(found.into_iter().map(|c| (c.id, Some(c.matched))).collect());
    }
    // A bare number that names nothing is an id (`#ID` always is one).
    if let Ok(id) = text.parse::<u32>() {
        if u64::from(id) < store.entity_count() {
            return Ok(vec![by_id(id)]);
        }
    }
    bail!(
        "no entity named {text:?} (looked up as exact key, as prefixed IRI ({}), as local name, as normalized name, and as an id)",
        WELL_KNOWN_PREFIXES.iter().map(|(p, _)| format!("{p}:")).collect::<Vec<_>>().join(" ")
    )
}

fn match_label(m: Option<EntityMatch>) -> &'static str {
    match m {
        None => "id",
        Some(EntityMatch::Key) => "key",
        Some(EntityMatch::Prefixed) => "prefixed IRI",
        Some(EntityMatch::LocalName) => "local name",
        Some(EntityMatch::Name) => "name",
        Some(EntityMatch::Alias) => "alias",
    }
}

fn resolve_relation(store: &Store, text: &str) -> Result<RelationId> {
    let found = store.resolve_relation(text)?;
    match found.as_slice() {
        [] => bail!("no relation named {text:?}"),
        [r] => Ok(*r),
        many => bail!("{} relations are named {text:?}; give the exact key", many.len()),
    }
}

fn entity_name(store: &Store, e: EntityId) -> Result<String> {
    Ok(store.entity(e)?.map_or_else(|| format!("#{}", e.0), |r| r.name))
}

fn relation_name(store: &Store, r: RelationId) -> Result<String> {
    Ok(store.relation(r)?.map_or_else(|| format!("r{}", r.0), |r| r.name))
}

pub fn entity(store_dir: &Path, text: &str, as_json: bool) -> Result<ExitCode> {
    let store = open(store_dir)?;
    let found = resolve_entities(&store, text)?;
    if found.len() > 1 && !as_json {
        outln!("{} entities match {text:?}:", found.len());
    }
    for (id, matched) in found {
        let info = store.entity_info(id)?.with_context(|| format!("entity #{} has no record", id.0))?;
        if as_json {
            outln!("{}", serde_json::to_string(&info)?);
        } else {
            outln!("#{} {}", info.id, info.name);
            outln!("  key        {}", info.key);
            outln!("  kind       {}", serde_json::to_value(info.kind)?.as_str().unwrap_or("?"));
            if !info.aliases.is_empty() {
                outln!("  aliases    {}", info.aliases.join(" | "));
            }
            outln!("  degree     {} out, {} in", info.out_degree, info.in_degree);
            outln!("  matched    by {}", match_label(matched));
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct NeighborsArgs {
    #[arg(long)]
    store: PathBuf,
    /// Exact key or name of the entity, or `#ID`.
    entity: String,
    /// Only facts through this relation (exact key or name) on the first hop.
    #[arg(long)]
    relation: Option<String>,
    /// 1: facts touching the entity; 2: also facts touching its neighbours.
    #[arg(long, default_value_t = 1, value_parser = |s: &str| super::usize_in(&limits::HOPS)(s).map(|h| h as u8), allow_hyphen_values = true)]
    hops: u8,
    /// At most this many facts per matching entity.
    #[arg(long, default_value_t = 100, value_parser = super::usize_in(&limits::LIMIT), allow_hyphen_values = true)]
    limit: usize,
    /// Also say which loads and updates assert each fact (their --source, else `load N` /
    /// `update N`).
    #[arg(long)]
    sources: bool,
    /// JSON lines {"head","relation","tail","reverse","hop"} (and "sources").
    #[arg(long)]
    json: bool,
}

pub fn neighbors(args: NeighborsArgs) -> Result<ExitCode> {
    let store = open(&args.store)?;
    let relation = args.relation.as_deref().map(|r| resolve_relation(&store, r)).transpose()?;
    for start in resolve_entities(&store, &args.entity)?.into_iter().map(|(e, _)| e) {
        let mut steps: Vec<Step> = Vec::new();
        neighborhood(&store, start, relation, args.hops, args.limit, |s| steps.push(s))?;
        if !args.json {
            outln!("{} (#{})", entity_name(&store, start)?, start.0);
        }
        for step in steps {
            let (h, r, t) = step.fact();
            let (head, rel, tail) = (entity_name(&store, h)?, relation_name(&store, r)?, entity_name(&store, t)?);
            let reverse = step.edge.direction == Direction::In;
            let sources: Vec<String> = if args.sources { store.fact_sources(h, r, t)?.into_iter().map(|n| store.source_name(n)).collect() } else { Vec::new() };
            if args.json {
                let mut line = json!({"head": head, "relation": rel, "tail": tail, "reverse": reverse, "hop": step.hop});
                if args.sources {
                    line["sources"] = json!(sources);
                }
                outln!("{line}");
            } else {
                let indent = if step.hop == 1 { "  " } else { "      " };
                let from = entity_name(&store, step.from)?;
                let other = entity_name(&store, step.edge.other)?;
                let said = if args.sources { format!("  [{}]", sources.join(", ")) } else { String::new() };
                if reverse {
                    outln!("{indent}{from} <-{rel}- {other}{said}");
                } else {
                    outln!("{indent}{from} -{rel}-> {other}{said}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn validate(store_dir: &Path, as_json: bool) -> Result<ExitCode> {
    let store = open(store_dir)?;
    let report = store.validate()?;
    // The text index is checked against the store it sits in: a document per live entity.
    let text = match trellis::text::status(&store) {
        Ok(trellis::text::TextIndexStatus::Missing) => Ok("none".to_owned()),
        Ok(trellis::text::TextIndexStatus::Stale { record }) => {
            Ok(format!("stale (built after write {} of the store; run `trellis index-text`)", record.writes))
        }
        Ok(trellis::text::TextIndexStatus::Current { .. }) => match trellis::text::validate(&store) {
            Ok(n) => Ok(format!("{} documents, one per live entity", n.unwrap_or(0))),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    // The vector files (`index-vectors`): each opens and names its model; records whose
    // text changed since are counted, not errors (retrievers recompute them).
    let vectors = trellis::vectors::validate(&store).map_err(|e| e.to_string());
    let ok = report.is_ok() && text.is_ok() && vectors.is_ok();
    if as_json {
        let mut v = serde_json::to_value(&report)?;
        v["text_index"] = match &text {
            Ok(s) => json!({ "ok": true, "status": s }),
            Err(e) => json!({ "ok": false, "problem": e }),
        };
        v["vector_files"] = match &vectors {
            Ok(files) => json!({ "ok": true, "files": files }),
            Err(e) => json!({ "ok": false, "problem": e }),
        };
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if report.is_ok() && !ok {
        let problems: Vec<&String> = [text.as_ref().err(), vectors.as_ref().err()].into_iter().flatten().collect();
        outln!("INVALID: {} problem(s)", problems.len());
        for e in problems {
            outln!("  {e}");
        }
    } else if report.is_ok() {
        outln!(
            "ok: {} entities, {} relations, {} facts (both directions agree), {} names, {} aliases",
            report.entities,
            report.relations,
            report.facts_out,
            report.names,
            report.aliases
        );
        if let Ok(t) = &text {
            outln!("text index: {t}");
        }
        for f in vectors.iter().flatten() {
            outln!(
                "vector file {}: {} entity and {} fact vectors of {} floats, {} match the store's texts now ({} recomputed when asked for)",
                f.path.display(),
                f.header.entities,
                f.header.facts,
                f.header.dims,
                f.matching,
                f.stale
            );
        }
    } else {
        outln!("INVALID: {} problem(s)", report.problems.len() as u64 + report.more_problems);
        for p in &report.problems {
            outln!("  {p}");
        }
        if report.more_problems > 0 {
            outln!("  ... and {} more", report.more_problems);
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_FAILURE) })
}
