//! `trellis migrate`.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::ExitCode;

pub fn run(store_dir: &Path, as_json: bool) -> Result<ExitCode> {
    let report = trellis::store::migrate(store_dir).with_context(|| format!("migrating {}", store_dir.display()))?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else if report.steps.is_empty() {
        outln!("store is at format version {}: nothing to migrate", report.to_version);
    } else {
        for s in &report.steps {
            outln!("{s}");
        }
        outln!("migrated from format version {} to {}", report.from_version, report.to_version);
    }
    Ok(ExitCode::SUCCESS)
}
