//! The warp skips idle simulated time; nothing observable may depend on it. For every bundled
//! scenario (all but scenarios/interop/, whose runs need a real server) and a range of seeds,
//! plain and with the seed's swarm plan, the trace with warping on equals the trace stepping
//! through every tick, byte for byte.
//!
//! The one exception is the canary built to be nondeterministic (`client_nondeterministic_otids`
//! mixes a process-wide counter into its otids): no two of its runs agree, warped or not.
//!
//! `cargo test` runs seeds 0..2; the standing check over seeds 0..50 is the ignored test
//! (`cargo test --release --test harness -- --ignored warp`: 7,000 runs each way, spread over
//! the cores). Skips are of any whole number of ticks: why that is exact is in
//! `src/harness/warp.rs` (nothing a host runs may depend on its runtime's step count).

use std::path::PathBuf;

use loopsim::harness::explore::{baseline, with_swarm};
use loopsim::harness::scenario::Scenario;
use loopsim::harness::seed::warp_divergence;

use crate::common::repo;

/// Every bundled scenario outside scenarios/interop/, sorted.
fn bundled() -> Vec<PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "interop") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join("scenarios"), &mut out);
    out.sort();
    out
}

/// Every (scenario, seed, plain or swarm) whose warped trace differs, with where, in a stable
/// order. The scenarios are shared among one worker thread per core (each run is its own
/// world on its own thread, as in `sim explore`).
fn divergences(seeds: std::ops::Range<u64>) -> Vec<String> {
    let paths = bundled();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(path) = paths.get(i) else { break };
                    let mut here = scenario_divergences(path, seeds.clone());
                    found.lock().unwrap().append(&mut here);
                }
            });
        }
    });
    let mut found = found.into_inner().unwrap();
    found.sort();
    found
}

fn scenario_divergences(path: &std::path::Path, seeds: std::ops::Range<u64>) -> Vec<String> {
    let mut found = Vec::new();
    let scenario = Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
    if scenario.planted.client_nondeterministic_otids {
        return found;
    }
    let base = baseline(&scenario).unwrap_or_else(|e| panic!("{e}"));
    for seed in seeds {
        let swarmed = with_swarm(&scenario, seed, &base);
        for (mode, s) in [("plain", &scenario), ("swarm", &swarmed)] {
            if let Some(d) = warp_divergence(s, seed).unwrap_or_else(|e| panic!("{e}")) {
                found.push(format!("{} seed {seed} {mode}: {d}", path.display()));
            }
        }
    }
    found
}

#[test]
fn warping_gives_the_same_trace_on_every_scenario() {
    let found = divergences(0..2);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
#[ignore = "seeds 0..50 of every scenario: minutes; run with --release -- --ignored"]
fn warping_gives_the_same_trace_on_every_scenario_seeds_0_to_50() {
    let found = divergences(0..50);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_skip_ends_on_the_last_tick_boundary_before_the_horizon() {
    use loopsim::harness::world::idle_ticks;
    use std::time::Duration;
    let ms = Duration::from_millis;
    // From 5 ms to a deadline at 10 ms on a 1 ms tick: the steps ending at 6..9 are skipped,
    // the one ending at 10 (where the timer fires) runs.
    assert_eq!(idle_ticks(ms(5), ms(10), ms(1)), 4);
    // A deadline inside the next step, or now: nothing to skip.
    assert_eq!(idle_ticks(ms(5), ms(6), ms(1)), 0);
    assert_eq!(idle_ticks(ms(5), ms(5), ms(1)), 0);
    assert_eq!(idle_ticks(ms(5), ms(4), ms(1)), 0);
    // A coarse tick: only whole ticks, so a timer at 25 ms still fires inside the step from
    // 20 to 30 at its own instant.
    assert_eq!(idle_ticks(ms(0), ms(25), ms(10)), 2);
    assert_eq!(idle_ticks(ms(0), ms(30), ms(10)), 2);
    assert_eq!(idle_ticks(ms(0), ms(31), ms(10)), 3);
}

#[test]
fn two_streams_following_one_run_write_in_the_same_order_warped() {
    // The server follows one run on two streams (the send's, which the client dropped, and
    // the resume's) and writes the run's last frames to both. Their order, and so the
    // latencies turmoil draws for the segments, once came from tokio's thread RNG, which
    // tokio reseeds once per step: skipping steps changed it, and the resume's frames reached
    // the client at 300 ms warped, 280 and 328 ms stepped.
    let path = repo().join("scenarios/letta/client_lost_frame.toml");
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let base = baseline(&scenario).unwrap_or_else(|e| panic!("{e}"));
    let swarmed = with_swarm(&scenario, 11, &base);
    assert_eq!(warp_divergence(&swarmed, 11).unwrap(), None);
}
