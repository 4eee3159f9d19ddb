//! Helpers shared by the client tests (tests/client_*.rs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use loopsim::harness::report::RunReport;
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::{Fault, Scenario};
use toml::Spanned;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn scenario_path(name: &str) -> PathBuf {
    repo().join("scenarios/letta").join(name)
}

pub fn load(path: &Path) -> Scenario {
    Scenario::load(path).unwrap_or_else(|e| panic!("{e}"))
}

/// Every `scenarios/client_*.toml`, sorted.
pub fn client_scenarios() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("scenarios/letta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "toml")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("client_"))
        })
        .collect();
    files.sort();
    files
}

pub fn with_profile(mut s: Scenario, profile: &str) -> Scenario {
    s.scenario.client_profile = Spanned::new(0..0, profile.to_string());
    s
}

pub fn with_mode(mut s: Scenario, mode: &str) -> Scenario {
    s.client.mode = Spanned::new(0..0, mode.to_string());
    s
}

pub fn with_faults(mut s: Scenario, faults: Vec<Fault>) -> Scenario {
    s.faults = faults.into_iter().map(|f| Spanned::new(0..0, f)).collect();
    s
}

pub fn run(s: &Scenario, seed: u64, runs: u32) -> RunReport {
    run_scenario(s, seed, runs).unwrap_or_else(|e| panic!("{e}"))
}

pub fn outcomes(r: &RunReport) -> Vec<&str> {
    r.turn_outcomes.iter().map(String::as_str).collect()
}

/// The violations of one invariant in a report.
pub fn violations<'a>(
    report: &'a RunReport,
    id: &str,
) -> &'a [loopsim::harness::invariants::Violation] {
    report
        .invariants
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, v)| v.as_slice())
        .unwrap_or_else(|| panic!("invariant {id} was not checked"))
}

/// Trace lines containing `needle`.
pub fn lines_with<'a>(r: &'a RunReport, needle: &str) -> Vec<&'a str> {
    r.trace_text
        .lines()
        .filter(|l| l.contains(needle))
        .collect()
}
