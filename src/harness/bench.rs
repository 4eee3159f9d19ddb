//! `sim bench`: how fast simulations run. Seeds 0..N of one scenario run once each (with each
//! seed's swarm plan when asked); optionally the same seeds again at other turmoil ticks, and a
//! fault-free pass against the bare turmoil + hyper world of [`super::letta::bare`], which
//! replays the bytes of a loopsim run without any models.
//!
//! The library reads neither the wall clock nor the process's memory: the caller hands in a
//! [`Meter`] that does (the command line reads `Instant` and /proc). Everything here stays as
//! deterministic as the runs it times, and a test can drive it with a fake meter.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::explore::{baseline, with_swarm};
use super::letta::{bare, world};
use super::report::exit;
use super::run::run_scenario;
use super::scenario::{InputError, Scenario};
use super::system::Baseline;
use super::world::{StepStats, step_stats};
use crate::model::letta::server::ExchangeLog;

/// What to measure.
#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    /// Run seeds `0..seeds` (at least one).
    pub seeds: u64,
    /// Add each seed's swarm fault plan.
    pub swarm: bool,
    /// Also time the bare turmoil + hyper world on the same seeds, without faults.
    pub compare_bare: bool,
    /// Run the seeds once more per tick (ms), overriding the scenario's `[network] tick_ms`.
    pub ticks: Vec<u64>,
    /// Run the seeds once more stepping through every tick (no warp), and compare the traces.
    pub compare_warp: bool,
    /// Also step idle worlds (the same host counts, the same number of steps) to measure what
    /// turmoil's steps cost before any host runs.
    pub floor: bool,
}

/// What the bench asks of its caller: the wall clock, the process's memory, and where progress
/// goes.
pub trait Meter {
    /// Wall time since a fixed point of the caller's choosing.
    fn now(&self) -> Duration;
    /// The process's memory now, when the platform tells.
    fn memory(&self) -> Option<Memory>;
    /// A timed pass over the seeds begins; `label` names it (`bench`, `tick 10 ms`).
    fn pass_started(&self, _label: &str) {}
    /// `done` of `total` seeds of the current pass have run.
    fn progress(&self, _done: u64, _total: u64) {}
    /// The current pass is over.
    fn pass_finished(&self) {}
}

/// A reading of the process's memory, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// All resident pages (`VmRSS`), the binary's own code among them: those are read in from
    /// the executable as code first runs, so this grows over the first seeds of a pass.
    pub resident_kib: u64,
    /// Resident pages that belong to no file (`RssAnon`): the heap, the stacks. What a leak
    /// would grow.
    pub anonymous_kib: u64,
}

/// One timed pass over the seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    pub wall: Duration,
    pub simulated_ms: u64,
    pub events: usize,
    /// Seeds whose run did not pass.
    pub failures: u64,
    /// Each seed's trace hash (its 64 bits), in seed order, when the pass is compared with
    /// another (`--compare-warp`); empty otherwise, so a long pass's memory stays flat.
    pub hashes: Vec<u64>,
    /// The turmoil steps the pass took and the ticks it skipped, by reason.
    pub steps: StepStats,
    /// The process's memory once the first seed has run.
    pub memory_after_first: Option<Memory>,
}

/// The fault-free comparison with the bare world.
#[derive(Debug, Clone, PartialEq)]
pub struct BareComparison {
    pub loopsim_wall: Duration,
    pub loopsim_simulated_ms: u64,
    pub bare_wall: Duration,
    pub bare_simulated_ms: u64,
}

/// What turmoil's steps cost on their own: the main pass's steps again, each on a world of as
/// many hosts whose software never wakes.
#[derive(Debug, Clone, PartialEq)]
pub struct Floor {
    /// Wall time of the idle steps.
    pub wall: Duration,
    /// How many idle steps were taken (the main pass's).
    pub steps: u64,
}

/// What `sim bench` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReport {
    pub scenario: PathBuf,
    pub seeds: u64,
    pub swarm: bool,
    /// The scenario's own tick, the one the main pass ran at.
    pub tick_ms: u64,
    pub pass: Pass,
    /// The process's memory before and after the main pass (and, in the pass, after its
    /// first seed).
    pub memory: Option<(Memory, Memory)>,
    /// (tick ms, pass, the pass without warp when comparing) per requested tick.
    pub ticks: Vec<(u64, Pass, Option<Pass>)>,
    pub bare: Option<BareComparison>,
    /// The main pass's steps on idle hosts (`--floor`).
    pub floor: Option<Floor>,
    /// The same seeds stepping through every tick, idle or not (`--compare-warp`).
    pub no_warp: Option<Pass>,
}

/// Runs the bench on the scenario at `path`.
pub fn bench(
    path: &Path,
    options: &BenchOptions,
    meter: &dyn Meter,
) -> Result<BenchReport, InputError> {
    let scenario = Scenario::load(path)?;
    let base = if options.swarm {
        Some(baseline(&scenario)?)
    } else {
        None
    };
    let mut scenario = scenario;
    if options.compare_warp {
        scenario.network.warp = true;
    }
    let seeds = options.seeds.max(1);
    let memory_start = meter.memory();
    let keep = options.compare_warp;
    let pass = measure(&scenario, seeds, base.as_ref(), "bench", keep, meter)?;
    let memory_end = meter.memory();
    let mut ticks = Vec::new();
    for &t in &options.ticks {
        let mut s = scenario.clone();
        s.network.tick_ms = t.max(1);
        let p = measure(
            &s,
            seeds,
            base.as_ref(),
            &format!("tick {t} ms"),
            keep,
            meter,
        )?;
        let stepped = if options.compare_warp {
            let s = s.clone().with_no_warp(true);
            let label = format!("tick {t} ms, no warp");
            Some(measure(&s, seeds, base.as_ref(), &label, keep, meter)?)
        } else {
            None
        };
        ticks.push((s.network.tick_ms, p, stepped));
    }
    let no_warp = if options.compare_warp {
        let s = scenario.clone().with_no_warp(true);
        Some(measure(&s, seeds, base.as_ref(), "no warp", keep, meter)?)
    } else {
        None
    };
    let bare = if options.compare_bare {
        Some(compare_bare(path, &scenario, seeds, meter)?)
    } else {
        None
    };
    let floor = options
        .floor
        .then(|| idle_floor(&scenario, &pass.steps, meter));
    Ok(BenchReport {
        scenario: path.to_path_buf(),
        seeds,
        swarm: options.swarm,
        tick_ms: scenario.network.tick_ms,
        pass,
        memory: memory_start.zip(memory_end),
        ticks,
        bare,
        floor,
        no_warp,
    })
}

/// Steps idle worlds as the pass stepped its own: for each host count, a world of that many
/// hosts at the scenario's tick whose software waits forever, stepped as many times as the
/// pass took steps with that many hosts. turmoil enters every host's runtime on every step
/// whether or not it has anything to do, so this is what the pass's steps cost before any
/// host ran: the part of a run no model or harness change can remove.
fn idle_floor(scenario: &Scenario, steps: &StepStats, meter: &dyn Meter) -> Floor {
    let mut floor = Floor {
        wall: Duration::ZERO,
        steps: 0,
    };
    meter.pass_started("floor");
    let total = steps.steps.max(1);
    for (hosts, &n) in steps.by_hosts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let mut sim = super::world::simulation(scenario, 0);
        for h in 0..hosts {
            sim.host(format!("idle{h}"), || async {
                std::future::pending::<()>().await;
                Ok(())
            });
        }
        let started = meter.now();
        for _ in 0..n {
            // Idle software neither finishes nor fails, and the world has no time limit.
            let _ = sim.step();
        }
        floor.wall += meter.now().saturating_sub(started);
        floor.steps += n;
        meter.progress(floor.steps, total);
    }
    meter.pass_finished();
    floor
}

fn measure(
    scenario: &Scenario,
    seeds: u64,
    base: Option<&Baseline>,
    label: &str,
    keep_hashes: bool,
    meter: &dyn Meter,
) -> Result<Pass, InputError> {
    let started = meter.now();
    let mut pass = Pass {
        wall: Duration::ZERO,
        simulated_ms: 0,
        events: 0,
        failures: 0,
        hashes: Vec::new(),
        steps: StepStats::default(),
        memory_after_first: None,
    };
    let steps_before = step_stats();
    meter.pass_started(label);
    for seed in 0..seeds {
        let s = match base {
            Some(b) => with_swarm(scenario, seed, b),
            None => scenario.clone(),
        };
        let r = run_scenario(&s, seed, 1)?;
        pass.simulated_ms += r.end_ms;
        pass.events += r.events;
        if keep_hashes {
            pass.hashes.push(hash_bits(&r.trace_hash));
        }
        if r.verdict.exit_code() != exit::PASS {
            pass.failures += 1;
        }
        if seed == 0 {
            pass.memory_after_first = meter.memory();
        }
        meter.progress(seed + 1, seeds);
    }
    meter.pass_finished();
    pass.wall = meter.now().saturating_sub(started);
    pass.steps = step_stats().since(&steps_before);
    Ok(pass)
}

/// loopsim without faults, one run per seed, against the bare world replaying the bytes of
/// seed 0's run on the same seeds, the two alternating seed by seed.
fn compare_bare(
    path: &Path,
    scenario: &Scenario,
    seeds: u64,
    meter: &dyn Meter,
) -> Result<BareComparison, InputError> {
    let mut clean = scenario.clone();
    clean.faults.clear();
    let log = ExchangeLog::default();
    let out = world::run_once_logging(&clean, 0, Some(log.clone()))?;
    let exchanges = std::mem::take(&mut *log.lock().unwrap());
    let script = bare::BareScript::from_run(&clean, &out, exchanges)?;
    // Seed by seed, loopsim then bare, each timed on its own: both see the same machine, so
    // the ratio holds while the machine's speed drifts (two blocks one after the other do not).
    let mut loopsim_wall = Duration::ZERO;
    let mut loopsim_simulated_ms = 0;
    let mut bare_wall = Duration::ZERO;
    let mut bare_simulated_ms = 0;
    for seed in 0..seeds {
        let t = meter.now();
        loopsim_simulated_ms += run_scenario(&clean, seed, 1)?.end_ms;
        let between = meter.now();
        bare_simulated_ms += bare::run_bare(&clean, seed, &script).map_err(|m| InputError {
            file: path.display().to_string(),
            line: None,
            column: None,
            message: format!("bare run failed: {m}"),
        })?;
        let end = meter.now();
        loopsim_wall += between.saturating_sub(t);
        bare_wall += end.saturating_sub(between);
    }
    Ok(BareComparison {
        loopsim_wall,
        loopsim_simulated_ms,
        bare_wall,
        bare_simulated_ms,
    })
}

/// Where a pass's turmoil steps went: the steps, then each reason a step was followed by
/// another (see [`super::world::Why`]), then the ticks skipped.
fn render_steps(st: &StepStats) -> String {
    let [no_warp, busy, in_flight, quiet_wait, due, skipped] = st.by_why;
    if no_warp > 0 && busy + in_flight + quiet_wait + due + skipped == 0 {
        return format!("{} (every tick)", st.steps);
    }
    format!(
        "{} stepped (busy {busy}, in flight {in_flight}, quiet wait {quiet_wait}, due {due}, \
         before a skip {skipped}), {} ticks skipped",
        st.steps, st.skipped_ticks
    )
}

/// A trace hash (16 hex digits, [`super::trace::hash_text`]) as its 64 bits: 8 bytes a seed
/// where the text costs a heap allocation.
fn hash_bits(hash: &str) -> u64 {
    u64::from_str_radix(hash, 16).expect("trace hashes are 16 hex digits")
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

impl BenchReport {
    /// The table `sim bench` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let seeds = self.seeds as f64;
        let wall = self.pass.wall.as_secs_f64();
        let _ = writeln!(s, "scenario        {}", self.scenario.display());
        let _ = writeln!(
            s,
            "seeds           {} (one run each{}), {} not passing",
            self.seeds,
            if self.swarm { ", swarm faults" } else { "" },
            self.pass.failures
        );
        let _ = writeln!(s, "tick            {} ms", self.tick_ms);
        let _ = writeln!(s, "wall            {wall:.3} s");
        let _ = writeln!(s, "runs/s          {:.1}", seeds / wall);
        let _ = writeln!(s, "events/s        {:.0}", self.pass.events as f64 / wall);
        let _ = writeln!(s, "simulated       {:.3} s", secs(self.pass.simulated_ms));
        let _ = writeln!(
            s,
            "simulated/wall  {:.1}x",
            secs(self.pass.simulated_ms) / wall
        );
        let _ = writeln!(s, "steps           {}", render_steps(&self.pass.steps));
        if let Some((before, after)) = self.memory {
            let first = self.pass.memory_after_first.unwrap_or(before);
            let _ = writeln!(
                s,
                "memory          KiB before, after seed 0, after the last seed"
            );
            let _ = writeln!(
                s,
                "  resident      {}, {}, {}",
                before.resident_kib, first.resident_kib, after.resident_kib
            );
            let _ = writeln!(
                s,
                "  anonymous     {}, {}, {} (heap and stacks; the rest is the binary's code)",
                before.anonymous_kib, first.anonymous_kib, after.anonymous_kib
            );
        }
        if !self.ticks.is_empty() {
            let _ = writeln!(s, "ticks           same seeds, one run each per tick");
            let _ = writeln!(
                s,
                "  {:>8}  {:>10}  {:>12}  {:>14}  {:>11}",
                "tick ms", "runs/s", "simulated s", "simulated/wall", "not passing"
            );
            for (tick, p, stepped) in &self.ticks {
                for (p, how) in
                    std::iter::once((p, "")).chain(stepped.iter().map(|q| (q, " no warp")))
                {
                    let wall = p.wall.as_secs_f64();
                    let _ = writeln!(
                        s,
                        "  {:>8}  {:>10.1}  {:>12.3}  {:>13.0}x  {:>11}{how}",
                        tick,
                        seeds / wall,
                        secs(p.simulated_ms),
                        secs(p.simulated_ms) / wall,
                        p.failures
                    );
                }
                if let Some(q) = stepped {
                    let same = q
                        .hashes
                        .iter()
                        .zip(&p.hashes)
                        .filter(|(a, b)| a == b)
                        .count();
                    let _ = writeln!(
                        s,
                        "  {:>8}  speed-up {:.2}x, traces {same} of {} identical",
                        tick,
                        q.wall.as_secs_f64() / p.wall.as_secs_f64(),
                        p.hashes.len()
                    );
                }
            }
        }
        if let Some(p) = &self.no_warp {
            let nw = p.wall.as_secs_f64();
            let same = p
                .hashes
                .iter()
                .zip(&self.pass.hashes)
                .filter(|(a, b)| a == b)
                .count();
            let _ = writeln!(s, "compare-warp    same seeds, stepping through every tick");
            let _ = writeln!(
                s,
                "  warp          {:.1} runs/s, {:.0}x simulated/wall",
                seeds / wall,
                secs(self.pass.simulated_ms) / wall
            );
            let _ = writeln!(
                s,
                "  no warp       {:.1} runs/s, {:.0}x simulated/wall",
                seeds / nw,
                secs(p.simulated_ms) / nw
            );
            let _ = writeln!(s, "  steps         {}", render_steps(&p.steps));
            let _ = writeln!(s, "  speed-up      {:.2}x", nw / wall);
            let _ = writeln!(
                s,
                "  traces        {same} of {} identical",
                self.pass.hashes.len()
            );
        }
        if let Some(f) = &self.floor {
            let fw = f.wall.as_secs_f64();
            let per_step = fw / f.steps.max(1) as f64;
            let busy = self.pass.steps.by_why[1];
            let idle = f.steps.saturating_sub(busy);
            let best = (wall - per_step * idle as f64).max(0.0);
            let hosts: Vec<String> = self
                .pass
                .steps
                .by_hosts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(h, n)| format!("{n} with {h} hosts"))
                .collect();
            let _ = writeln!(
                s,
                "floor           the pass's {} steps on idle hosts ({}): {fw:.3} s, {:.0} % of its \
                 wall, {:.2} us a step",
                f.steps,
                hosts.join(", "),
                100.0 * fw / wall,
                per_step * 1e6
            );
            let _ = writeln!(
                s,
                "  best warp     {:.1} runs/s if every step in which no host ran cost nothing \
                 ({busy} steps with a host running are left)",
                seeds / best
            );
        }
        if let Some(b) = &self.bare {
            let (lw, bw) = (b.loopsim_wall.as_secs_f64(), b.bare_wall.as_secs_f64());
            let _ = writeln!(s, "compare-bare    same seeds, no faults, one run each");
            let _ = writeln!(
                s,
                "  loopsim       {:.1} runs/s ({lw:.3} s wall, {:.1} s simulated)",
                seeds / lw,
                secs(b.loopsim_simulated_ms)
            );
            let _ = writeln!(
                s,
                "  bare          {:.1} runs/s ({bw:.3} s wall, {:.1} s simulated)",
                seeds / bw,
                secs(b.bare_simulated_ms)
            );
            let _ = writeln!(s, "  ratio         {:.2}x the bare cost", lw / bw);
        }
        s
    }

    /// The exit code of `sim bench`: a measurement passes whatever the runs found.
    pub fn exit_code(&self) -> i32 {
        exit::PASS
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A clock that advances one second per reading, and no memory figure.
    struct FakeMeter(Cell<u64>);

    impl Meter for FakeMeter {
        fn now(&self) -> Duration {
            self.0.set(self.0.get() + 1);
            Duration::from_secs(self.0.get())
        }
        fn memory(&self) -> Option<Memory> {
            None
        }
    }

    #[test]
    fn a_fake_clock_gives_the_same_table_every_time() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/letta/approval_turn.toml");
        let options = BenchOptions {
            seeds: 2,
            ticks: vec![10],
            ..BenchOptions::default()
        };
        let a = bench(&path, &options, &FakeMeter(Cell::new(0))).unwrap();
        let b = bench(&path, &options, &FakeMeter(Cell::new(0))).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.pass.wall, Duration::from_secs(1));
        assert_eq!(a.ticks[0].0, 10);
        let table = a.render();
        assert!(table.contains("wall            1.000 s"), "{table}");
        assert!(table.contains("runs/s          2.0"), "{table}");
        assert!(!table.contains("memory"), "{table}");
    }

    #[test]
    fn the_floor_steps_idle_worlds_as_often_as_the_pass_stepped_its_own() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/letta/approval_turn.toml");
        let options = BenchOptions {
            seeds: 2,
            floor: true,
            ..BenchOptions::default()
        };
        let report = bench(&path, &options, &FakeMeter(Cell::new(0))).unwrap();
        let floor = report.floor.as_ref().expect("asked for");
        assert!(report.pass.steps.steps > 0);
        assert_eq!(floor.steps, report.pass.steps.steps);
        // A Letta world is the client, the server and the provider.
        assert_eq!(
            report.pass.steps.by_hosts[3], report.pass.steps.steps,
            "{:?}",
            report.pass.steps.by_hosts
        );
        // One fake second per host count stepped.
        assert_eq!(floor.wall, Duration::from_secs(1));
        let table = report.render();
        assert!(
            table.contains(&format!(
                "floor           the pass's {0} steps on idle hosts ({0} with 3 hosts): 1.000 s",
                floor.steps
            )),
            "{table}"
        );
        assert!(table.contains("  best warp     "), "{table}");
    }
}
