//! A progress bar on stderr for long sweeps: redrawn in place on a terminal, a line every 10 %
//! otherwise (CI logs). It reads the wall clock for the rate, which is fine here: the command
//! line is outside every simulation.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

pub struct Bar {
    label: String,
    started: Instant,
    tty: bool,
    /// Last percentage drawn.
    last: Mutex<Option<u64>>,
}

impl Bar {
    pub fn new(label: impl Into<String>) -> Self {
        Bar {
            label: label.into(),
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last: Mutex::new(None),
        }
    }

    pub fn update(&self, done: u64, total: u64) {
        if total == 0 {
            return;
        }
        let pct = done * 100 / total;
        let step = if self.tty { pct } else { pct / 10 * 10 };
        let mut last = self.last.lock().unwrap();
        if *last == Some(step) {
            return;
        }
        *last = Some(step);
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = done as f64 / secs;
        let width = 30;
        let filled = (pct as usize * width / 100).min(width);
        let line = format!(
            "{} [{}{}] {done}/{total} seeds {pct:>3}% {rate:.0} seeds/s",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled)
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    pub fn finish(&self) {
        if self.tty && self.last.lock().unwrap().is_some() {
            let _ = writeln!(std::io::stderr());
        }
    }
}
