//! `sim bench`: the library's bench, timed here. The command line is outside every simulation,
//! so it is where the wall clock and the process's memory (/proc/self/status) are read; the
//! library only sees them through [`Meter`].

use std::cell::RefCell;
use std::time::{Duration, Instant};

use loopsim::harness::bench::{BenchOptions, Memory, Meter, bench};

use super::CmdResult;
use crate::args::BenchArgs;
use crate::progress::Bar;

pub fn run(a: BenchArgs) -> CmdResult {
    let options = BenchOptions {
        seeds: a.seeds,
        swarm: a.swarm,
        compare_bare: a.compare_bare,
        ticks: a.ticks,
        compare_warp: a.compare_warp,
        floor: a.floor,
    };
    let meter = WallMeter {
        origin: Instant::now(),
        bar: RefCell::new(None),
    };
    let report = bench(&a.scenario, &options, &meter)?;
    print!("{}", report.render());
    Ok(report.exit_code())
}

/// The wall clock since the command started, /proc for memory, a progress bar per pass.
struct WallMeter {
    origin: Instant,
    bar: RefCell<Option<Bar>>,
}

impl Meter for WallMeter {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn memory(&self) -> Option<Memory> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let kib = |field: &str| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        };
        Some(Memory {
            resident_kib: kib("VmRSS:")?,
            anonymous_kib: kib("RssAnon:")?,
        })
    }

    fn pass_started(&self, label: &str) {
        *self.bar.borrow_mut() = Some(Bar::new(label));
    }

    fn progress(&self, done: u64, total: u64) {
        if let Some(bar) = &*self.bar.borrow() {
            bar.update(done, total);
        }
    }

    fn pass_finished(&self) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            bar.finish();
        }
    }
}
