//! The rejects file of `--on-error skip`: one row per rejected line, with its file, line
//! number, kind and detail.

use super::build::Loading;
use super::error::{IngestError, LineError};
use std::io::Write;

impl Loading<'_> {
    pub(super) fn reject(&mut self, file: &str, e: &LineError) -> Result<(), IngestError> {
        *self.report.rejected.entry(e.kind).or_default() += 1;
        if self.rejects.is_none() {
            let f = std::fs::File::create(&self.rejects_path).map_err(|err| IngestError::io(self.rejects_path.display(), err))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "file\tline\tkind\tdetail\ttext").map_err(|err| IngestError::io(self.rejects_path.display(), err))?;
            self.rejects = Some(w);
        }
        let w = self.rejects.as_mut().expect("opened above");
        let detail = e.detail.replace(['\t', '\n'], " ");
        (|| -> std::io::Result<()> {
            write!(w, "{file}\t{}\t{}\t{detail}\t", e.line, e.kind)?;
            w.write_all(&e.text)?;
            w.write_all(b"\n")
        })()
        .map_err(|err| IngestError::io(self.rejects_path.display(), err))
    }
}
