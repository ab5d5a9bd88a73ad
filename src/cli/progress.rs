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
