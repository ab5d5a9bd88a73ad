//! `trellis index-vectors`.

use super::settings::VectorFlags;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct IndexVectorsArgs {
    #[arg(long)]
    store: PathBuf,
    #[command(flatten)]
    settings: VectorFlags,
    /// Print what was written (the file, its header, its size) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: IndexVectorsArgs) -> Result<ExitCode> {
    let opts = trellis::settings::vector_encoder(&args.settings.0)?;
    let bar = super::progress::Bar::new();
    let report = trellis::vectors::index_vectors(&args.store, &opts, &bar.monitor())
        .with_context(|| format!("writing the vectors of {} into {}", opts.model.display(), args.store.display()))?;
    bar.finish();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let h = &report.header;
    outln!("wrote {} entity-name and {} fact vectors of {} floats ({} bytes) to {}", h.entities, h.facts, h.dims, report.bytes, report.path.display());
    Ok(ExitCode::SUCCESS)
}
