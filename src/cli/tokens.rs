//! `trellis index-tokens`.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::ingest::NameTokenizer;
use trellis::linearize::Linearization;

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
    /// How paths are written: `trellis` (one token per boundary, `[Head]` `[Int1]` ...),
    /// `dialoggsr` (the DialogGSR authors' 18 tokens, `[HEAD]` `[Int1_1][Int1_2]` ...), or a
    /// JSON file of the same shape (see `schema/v4.md`).
    #[arg(long, default_value = "trellis", value_name = "trellis|dialoggsr|FILE.json")]
    linearization: String,
    /// Print the token index's record (what it was built from) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: IndexTokensArgs) -> Result<ExitCode> {
    let linearization = Linearization::from_arg(&args.linearization)?;
    let tokenizer = NameTokenizer::from_file(&args.tokenizer, linearization)?;
    let name = args.name.unwrap_or_else(|| args.tokenizer.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
    let bar = super::progress::Bar::new();
    let info = trellis::Store::index_tokens(&args.store, &tokenizer, &name, &bar.monitor())
        .with_context(|| format!("indexing {} with {}", args.store.display(), args.tokenizer.display()))?;
    bar.finish();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "indexed {} entity and {} relation names with tokenizer {} ({}, vocabulary {}), linearization {} ({})",
        info.entities,
        info.relations,
        info.fingerprint,
        info.name,
        info.vocab_size,
        info.linearization.name,
        info.linearization_fingerprint
    );
    Ok(ExitCode::SUCCESS)
}
