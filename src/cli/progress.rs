//! Progress bars for long work: drawn on a terminal, silent otherwise.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use trellis::ingest::Progress;

pub struct LoadProgress {
    bar: ProgressBar,
    phase: String,
}

impl LoadProgress {
    pub fn new() -> LoadProgress {
        let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target);
        LoadProgress { bar, phase: String::new() }
    }

    pub fn update(&mut self, p: &Progress) {
        match p {
            Progress::Reading { index, count, file, bytes, total_bytes, facts } => {
                let phase = format!("read {file}");
                if self.phase != phase {
                    self.phase = phase;
                    let style =
                        ProgressStyle::with_template("{prefix} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec}, ETA {eta}) {msg}").expect("valid template");
                    self.bar.set_style(style);
                    self.bar.set_prefix(format!("[{}/{}] {file}", index + 1, count));
                    self.bar.set_length(total_bytes.unwrap_or(0));
                    self.bar.reset();
                }
                self.bar.set_position(*bytes);
                self.bar.set_message(format!("{} facts", indicatif::HumanCount(*facts)));
            }
            Progress::Writing { step, steps, what, done, total } => {
                let phase = format!("write {what}");
                if self.phase != phase {
                    self.phase = phase;
                    let style = ProgressStyle::with_template("{prefix} {bar:30} {human_pos}/{human_len} facts (ETA {eta})").expect("valid template");
                    self.bar.set_style(style);
                    self.bar.set_prefix(format!("write {step}/{steps}: {what}"));
                    self.bar.set_length(*total);
                    self.bar.reset();
                }
                self.bar.set_position(*done);
            }
            Progress::Committing => {
                self.bar.set_style(ProgressStyle::with_template("{prefix} {spinner}").expect("valid template"));
                self.bar.set_prefix("committing");
                self.bar.tick();
            }
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The lines of a JSON-lines input file, numbered from 1, read a round at a time with a
/// byte progress bar. Lines are bytes: invalid UTF-8 is a fault of its line (bad input), not
/// a read error.
pub struct NumberedLines {
    lines: std::iter::Enumerate<std::io::Split<std::io::BufReader<std::fs::File>>>,
    pub bar: ProgressBar,
    /// The file's name as errors show it.
    pub file: String,
}

impl NumberedLines {
    pub fn open(path: &std::path::Path) -> anyhow::Result<NumberedLines> {
        use anyhow::Context;
        use std::io::BufRead;
        let input = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} ({per_sec}, ETA {eta}) {msg}")?);
        Ok(NumberedLines { lines: std::io::BufReader::new(input).split(b'\n').enumerate(), bar, file: path.display().to_string() })
    }

    /// The next up to `n` lines (blank ones read but left out), with their numbers and
    /// without their line end; empty at the end of the file.
    pub fn round(&mut self, n: usize) -> anyhow::Result<Vec<(usize, Vec<u8>)>> {
        use anyhow::Context;
        let mut out = Vec::with_capacity(n);
        for (i, line) in self.lines.by_ref().take(n) {
            let mut line = line.with_context(|| format!("reading {} at line {}", self.file, i + 1))?;
            self.bar.inc(line.len() as u64 + 1);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.trim_ascii().is_empty() {
                out.push((i + 1, line));
            }
        }
        Ok(out)
    }
}
