//! `trellis index-tokens`.

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::model::{NameTokenizer, Side, TokenContext};

#[derive(Args)]
pub struct IndexTokensArgs {
    #[arg(long)]
    store: PathBuf,
    /// The model's tokenizer (Hugging Face tokenizer.json).
    #[arg(long)]
    tokenizer: PathBuf,
    /// A name for this tokenizer in `stats` (default: the file name).
    #[arg(long)]
    name: Option<String>,
    /// Boundary tokens around an entity name in a linearized path.
    #[arg(long, num_args = 2, value_names = ["OPEN", "CLOSE"], default_values_t = [TokenContext::default().entity_open, TokenContext::default().entity_close])]
    entity_context: Vec<String>,
    /// Boundary tokens around a relation name in a linearized path.
    #[arg(long, num_args = 2, value_names = ["OPEN", "CLOSE"], default_values_t = [TokenContext::default().relation_open, TokenContext::default().relation_close])]
    relation_context: Vec<String>,
    /// Keep the case of names (the linearization lowercases them by default).
    #[arg(long)]
    keep_case: bool,
    /// Characters of relation names that the linearization writes as spaces.
    #[arg(long, default_value = "_-")]
    relation_spaces: String,
}

pub fn run(args: IndexTokensArgs) -> Result<ExitCode> {
    let context = TokenContext {
        entity_open: args.entity_context[0].clone(),
        entity_close: args.entity_context[1].clone(),
        relation_open: args.relation_context[0].clone(),
        relation_close: args.relation_context[1].clone(),
        lowercase: !args.keep_case,
        relation_spaces: args.relation_spaces,
    };
    let tokenizer = NameTokenizer::from_file(&args.tokenizer, context)?;
    let name = args.name.unwrap_or_else(|| args.tokenizer.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
    let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(ProgressStyle::with_template("{prefix} {bar:30} {human_pos}/{human_len} (ETA {eta})").expect("valid template"));
    let mut progress = |side: Side, done: u64, total: u64| {
        bar.set_prefix(match side {
            Side::Entity => "entities",
            Side::Relation => "relations",
        });
        bar.set_length(total);
        bar.set_position(done);
    };
    let info = trellis::ingest::tokens::index_tokens(&args.store, &tokenizer, &name, &mut progress)
        .with_context(|| format!("indexing {} with {}", args.store.display(), args.tokenizer.display()))?;
    bar.finish_and_clear();
    println!(
        "indexed {} entity and {} relation names with tokenizer {} ({}, vocabulary {})",
        info.entities, info.relations, info.fingerprint, info.name, info.vocab_size
    );
    Ok(ExitCode::SUCCESS)
}
