//! One progress bar for every kind of long work: it draws the library's `Progress` reports
//! on a terminal and is silent otherwise.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use trellis::progress::Unit;
use trellis::{Monitor, Progress};

/// The bar and the stage it shows (a new stage restyles it and starts its count again).
struct Drawn {
    bar: ProgressBar,
    stage: Option<(usize, String)>,
}

/// A progress bar fed by a [`Monitor`]: `bar.monitor()` goes to the work, `bar.finish()`
/// clears the bar when the work returns.
#[derive(Clone)]
pub struct Bar {
    drawn: Arc<Mutex<Drawn>>,
}

impl Bar {
    pub fn new() -> Bar {
        let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Bar { drawn: Arc::new(Mutex::new(Drawn { bar: ProgressBar::with_draw_target(None, target), stage: None })) }
    }

    /// A monitor whose reports move this bar.
    pub fn monitor(&self) -> Monitor {
        let bar = self.clone();
        Monitor::with_callback(move |p| bar.update(p))
    }

    fn update(&self, p: &Progress) {
        // A poisoned lock only means an earlier update panicked; drawing goes on.
        let mut d = self.drawn.lock().unwrap_or_else(|e| e.into_inner());
        let stage = (p.step, p.stage.clone());
        if d.stage.as_ref() != Some(&stage) {
            let template = match (p.unit, p.total) {
                (Unit::Bytes, Some(_)) => "{prefix} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec}, ETA {eta}) {msg}".to_owned(),
                (Unit::Bytes, None) => "{prefix} {spinner} {bytes} ({bytes_per_sec}) {msg}".to_owned(),
                (unit, Some(_)) => format!("{{prefix}} {{bar:30}} {{human_pos}}/{{human_len}} {} ({{per_sec}}, ETA {{eta}}) {{msg}}", unit.name()),
                (unit, None) => format!("{{prefix}} {{spinner}} {{human_pos}} {} {{msg}}", unit.name()),
            };
            d.bar.set_style(ProgressStyle::with_template(&template).expect("valid template"));
            d.bar.set_prefix(if p.steps > 1 { format!("[{}/{}] {}", p.step, p.steps, p.stage) } else { p.stage.clone() });
            d.bar.set_length(p.total.unwrap_or(0));
            d.bar.reset();
            d.stage = Some(stage);
        }
        d.bar.set_position(p.done);
        if let Some(facts) = p.facts {
            d.bar.set_message(format!("{} facts", indicatif::HumanCount(facts)));
        }
    }

    pub fn finish(&self) {
        self.drawn.lock().unwrap_or_else(|e| e.into_inner()).bar.finish_and_clear();
    }
}
