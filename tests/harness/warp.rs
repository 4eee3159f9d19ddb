//! The warp skips idle simulated time; nothing observable may depend on it. For every bundled
//! scenario (the ones `hashes.sh` covers: all but scenarios/interop/, whose runs need a real
//! server) and a range of seeds, plain and with the seed's swarm plan, the trace with warping
//! on equals the trace stepping through every tick, byte for byte.
//!
//! The one exception is the canary built to be nondeterministic (`client_nondeterministic_otids`
//! mixes a process-wide counter into its otids): no two of its runs agree, warped or not.
//!
//! `cargo test` runs seeds 0..2; the standing check over seeds 0..50 is the ignored test
//! (`cargo test --release --test harness -- --ignored warp`, a few minutes).

use std::path::PathBuf;

use loopsim::harness::explore::{baseline, with_swarm};
use loopsim::harness::scenario::Scenario;
use loopsim::harness::warp::warp_divergence;

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

/// Every (scenario, seed, plain or swarm) whose warped trace differs, with where.
fn divergences(seeds: std::ops::Range<u64>) -> Vec<String> {
    let mut found = Vec::new();
    for path in bundled() {
        let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        if scenario.planted.client_nondeterministic_otids {
            continue;
        }
        let base = baseline(&scenario).unwrap_or_else(|e| panic!("{e}"));
        for seed in seeds.clone() {
            let swarmed = with_swarm(&scenario, seed, &base);
            for (mode, s) in [("plain", &scenario), ("swarm", &swarmed)] {
                if let Some(d) = warp_divergence(s, seed).unwrap_or_else(|e| panic!("{e}")) {
                    found.push(format!("{} seed {seed} {mode}: {d}", path.display()));
                }
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
