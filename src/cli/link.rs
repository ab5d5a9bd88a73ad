//! `trellis link`, and the linking options every command that links shares.

use anyhow::{Context, Result};
use clap::Args;
use serde::de::{Deserializer, SeqAccess, Visitor};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use trellis::link::{LinkConfig, Linker, Message};
use trellis::Store;

/// The linker's settings: the flags of `trellis::settings::LINK`, checked by the library.
#[derive(Args, Clone)]
pub struct LinkOptions {
    #[command(flatten)]
    pub flags: super::settings::LinkFlags,
}

impl LinkOptions {
    pub fn config(&self) -> Result<LinkConfig> {
        Ok(trellis::settings::link(&self.flags.0)?)
    }
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["text", "input"])))]
pub struct LinkArgs {
    #[arg(long)]
    store: PathBuf,
    /// A JSON dialog: a list of messages, each a string or {"speaker"|"sender", "text"|"message"}.
    #[arg(long, alias = "dialog", conflicts_with = "text")]
    input: Option<PathBuf>,
    /// Text to link.
    text: Option<String>,
    /// JSON lines: one per mention, then {"turn_entities": [...]} for the next turn.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    options: LinkOptions,
}

/// Reads a `--input` dialog. Malformed contents are bad input naming the file and the
/// line (exit 65); a file that cannot be read is not.
fn read_dialog(path: &Path) -> Result<Vec<Message>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = path.display().to_string();
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        super::BadInputLine { file: file.clone(), line, what: "invalid UTF-8".into() }
    })?;
    // A byte-order mark says nothing about the dialog (as `ingest` and `retrieve` drop it).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let items = (&mut de).deserialize_seq(DialogVisitor).and_then(|items| de.end().map(|()| items)).map_err(|e| json_error(&file, &e))?;
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        messages.push(Message::from_json(&item).map_err(|problem| super::BadInputLine {
            file: file.clone(),
            line: element_line(text, i),
            what: format!("message {} {problem}", i + 1),
        })?);
    }
    Ok(messages)
}

/// serde_json's error as `FILE:LINE: what (column C)`.
fn json_error(file: &str, e: &serde_json::Error) -> super::BadInputLine {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let what = text.strip_suffix(&suffix).unwrap_or(&text);
    super::BadInputLine { file: file.to_owned(), line: e.line() as u64, what: format!("{what} (column {})", e.column()) }
}

/// The line on which element `index` of the top-level JSON list in `text` starts (text
/// that serde_json has already accepted): serde_json's values carry no positions.
fn element_line(text: &str, index: usize) -> u64 {
    let (mut depth, mut in_string, mut escaped, mut line, mut seen, mut expecting) = (0u32, false, false, 1u64, 0usize, false);
    for c in text.chars() {
        if c == '\n' {
            line += 1;
        }
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        if depth == 1 && expecting && !c.is_whitespace() && c != ']' {
            if seen == index {
                return line;
            }
            seen += 1;
            expecting = false;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                expecting = depth == 1;
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            ',' if depth == 1 => expecting = true,
            _ => {}
        }
    }
    line
}

/// A JSON list (of messages, checked one by one afterwards).
struct DialogVisitor;

impl<'de> Visitor<'de> for DialogVisitor {
    type Value = Vec<serde_json::Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON list of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element()? {
            out.push(item);
        }
        Ok(out)
    }
}

pub fn link(args: LinkArgs) -> Result<ExitCode> {
    let store = std::sync::Arc::new(Store::open_read_only(&args.store).with_context(|| format!("opening store {}", args.store.display()))?);
    // clap requires one of the two (a usage error otherwise).
    let messages = match (&args.input, &args.text) {
        (Some(path), _) => read_dialog(path)?,
        (None, text) => vec![Message { speaker: String::new(), text: text.clone().unwrap_or_default() }],
    };
    let linker = Linker::new(store.clone(), args.options.config()?)?;
    let mentions = linker.link_dialog(&messages)?;
    let turn = linker.turn_entities(&mentions, messages.len());
    if args.json {
        for m in &mentions {
            outln!("{}", serde_json::to_string(m)?);
        }
        // A read that fails is the store's error, not a missing name.
        let set: Vec<serde_json::Value> = turn
            .iter()
            .map(|&(e, w)| Ok(serde_json::json!({"id": e.0, "name": store.entity(e)?.map(|r| r.name), "weight": w})))
            .collect::<Result<_, trellis::ReadError>>()?;
        outln!("{}", serde_json::json!({ "turn_entities": set }));
        return Ok(ExitCode::SUCCESS);
    }
    for m in &mentions {
        let names: Vec<String> = m.entities.iter().map(|e| format!("{} (#{}, degree {})", e.name, e.id, e.degree)).collect();
        outln!("message {} [{}..{}] {:?} -> {}", m.message, m.start, m.end, m.text, names.join(" | "));
        if let Some(r) = &m.resolution {
            let facts: Vec<String> = r.agreed.iter().map(|[s, p, o]| format!("{s} {p} {o}")).collect();
            let why = if facts.is_empty() { "no gender fact".to_owned() } else { facts.join("; ") };
            outln!("  resolved ({:?}, {} message(s) back): {why}", r.agreement, r.messages_back);
        }
    }
    for (i, message) in messages.iter().enumerate() {
        if mentions.iter().any(|m| m.message == i && m.resolution.is_some()) {
            outln!("rewritten message {i}: {}", trellis::link::rewrite::rewritten_text(&message.text, i, &mentions));
        }
    }
    let set: Vec<String> =
        turn.iter().map(|&(e, w)| Ok(format!("{} ({w:.2})", store.entity(e)?.map_or(String::new(), |r| r.name)))).collect::<Result<_, trellis::ReadError>>()?;
    outln!("entities for the next turn: {}", set.join(", "));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn element_lines() {
        let text = "[\"a\",\n {\"t\": \"[x, \\\"y]\"}, \n\n  [1,\n2], \"z\"\n]";
        assert_eq!((0..4).map(|i| super::element_line(text, i)).collect::<Vec<_>>(), vec![1, 2, 4, 5]);
    }
}
