//! `trellis check`: the fact check of replies against the store.

use super::batch::NumberedLines;
use super::link::LinkOptions;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use trellis::check::{CheckTotals, CheckerModel, Claim, FactChecker, ReplyCheck};
use trellis::ingest::OnError;
use trellis::link::Message;
use trellis::pipeline::jsonl::{parse_check_line_bytes, render_check};
use trellis::Store;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["reply", "input"])))]
pub struct CheckArgs {
    #[arg(long)]
    store: PathBuf,
    /// The checker: a directory holding checker.json (models/check-opendialkg) or the file.
    /// Without one, a phrase names a relation only by the relation's own words, and nothing
    /// is refuted (no relation is known to be functional).
    #[arg(long)]
    checker: Option<PathBuf>,
    /// JSON lines, one reply each: {"id", "history": [message, ...], "reply": TEXT}
    /// ("response", as `trellis run` writes it, is read as the reply).
    #[arg(long, conflicts_with_all = ["reply", "messages"])]
    input: Option<PathBuf>,
    /// The reply to check; the dialog before it is MESSAGES.
    #[arg(long)]
    reply: Option<String>,
    /// The dialog before the reply, oldest first.
    messages: Vec<String>,
    /// JSON lines: one per reply (with "line", the input line), then {"totals": ...}.
    #[arg(long)]
    json: bool,
    /// `stop`: a malformed input line stops the run. `skip`: it is skipped, counted.
    #[arg(long, value_parser = super::named::<OnError>(OnError::NAMES), default_value_t = OnError::Stop)]
    on_error: OnError,
    #[command(flatten)]
    options: LinkOptions,
}

pub fn check(args: CheckArgs) -> Result<ExitCode> {
    let link = args.options.config()?;
    let model = match &args.checker {
        Some(p) => Some(CheckerModel::from_path(p)?),
        None => None,
    };
    let store = Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening {}", args.store.display()))?);
    let checker = FactChecker::new(store, model.as_ref(), link)?;
    let mut totals = CheckTotals::default();
    let Some(input) = &args.input else {
        let dialog: Vec<Message> = args.messages.iter().map(|t| Message { speaker: String::new(), text: t.clone() }).collect();
        let reply = args.reply.as_deref().unwrap_or_default();
        let refused = trellis::link::check_dialog_size(&dialog).is_err() || reply.len() > trellis::limits::DIALOG_BYTES;
        if refused {
            anyhow::bail!(super::Usage(format!("the dialog and reply hold more than {} bytes", trellis::limits::DIALOG_BYTES)));
        }
        let r = checker.check(&dialog, reply)?;
        if args.json {
            outln!("{}", serde_json::to_string(&render_check(&serde_json::Value::Null, &r))?);
        } else {
            print_reply(None, &r);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let mut lines = NumberedLines::open(input)?;
    let mut skipped = 0u64;
    loop {
        let round = lines.round(256)?;
        if round.is_empty() {
            break;
        }
        for line in round {
            let parsed = match parse_check_line_bytes(&line.bytes) {
                Ok(p) => p,
                Err(e) => {
                    let bad = super::BadInputLine { file: lines.file.clone(), line: line.number as u64, what: e.to_string() };
                    if args.on_error == OnError::Skip {
                        skipped += 1;
                        tracing::warn!("{bad} (skipped)");
                        continue;
                    }
                    lines.bar.finish_and_clear();
                    return Err(bad.into());
                }
            };
            let r = checker.check(&parsed.request.history, &parsed.reply)?;
            totals.add(&r);
            if args.json {
                let mut v = render_check(&parsed.request.id, &r);
                v["line"] = line.number.into();
                outln!("{}", serde_json::to_string(&v)?);
            } else {
                print_reply(Some(line.number), &r);
            }
        }
    }
    lines.bar.finish_and_clear();
    if args.json {
        outln!("{}", serde_json::json!({"totals": totals, "skipped": skipped}));
    } else {
        outln!(
            "{} replies ({} with claims, {} skipped lines): fact score {}, NEIP {}; claims: {} supported, {} refuted, {} not enough information",
            totals.replies,
            totals.replies_with_claims,
            skipped,
            share(totals.fact_score),
            share(totals.neip),
            totals.supported,
            totals.refuted,
            totals.not_enough_info
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn share(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"))
}

fn print_reply(line: Option<usize>, r: &ReplyCheck) {
    let at = line.map(|l| format!("line {l}: ")).unwrap_or_default();
    outln!(
        "{at}fact score {}, NEIP {} ({} supported, {} refuted, {} not enough information)",
        share(r.fact_score),
        share(r.neip),
        r.supported,
        r.refuted,
        r.not_enough_info
    );
    for c in &r.claims {
        outln!("  {}", claim_line(c));
    }
}

fn claim_line(c: &Claim) -> String {
    let side = |e: &trellis::check::ClaimEntity| if e.from_dialog { format!("{} (from the dialog)", e.name) } else { e.name.clone() };
    let names = if c.relations.is_empty() { "no relation named".to_string() } else { c.relations.join(", ") };
    let mut s = format!("{:<16} {} | {} | {}  [{names}]", c.verdict.as_str(), side(&c.subject), c.phrase, side(&c.object));
    for path in &c.evidence {
        let facts: Vec<String> = path.iter().map(|[h, r, t]| format!("{h} -{r}-> {t}")).collect();
        s.push_str(&format!("\n      {} {}", if c.verdict == trellis::check::Verdict::Refuted { "store has" } else { "by" }, facts.join(", ")));
    }
    s
}
