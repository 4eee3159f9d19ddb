//! What a run reports: the verdict, the exit codes of `sim` (docs/exit-codes.md) and the one
//! command that reproduces a seed. Each is defined here and nowhere else.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::invariants::{DETERMINISTIC, Violation};

/// Exit codes of `sim` (docs/exit-codes.md).
pub mod exit {
    pub const PASS: i32 = 0;
    /// Bad command line or bad input file.
    pub const USAGE: i32 = 2;
    /// A panic in the harness or a model, caught.
    pub const CRASH: i32 = 127;
    /// Something did not finish within its simulated-time budget.
    pub const LIVENESS: i32 = 128;
    /// An invariant was violated.
    pub const CORRECTNESS: i32 = 129;
}

/// The overall result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Correctness,
    Liveness(String),
    Crash(String),
}

impl Verdict {
    pub fn exit_code(&self) -> i32 {
        match self {
            Verdict::Pass => exit::PASS,
            Verdict::Correctness => exit::CORRECTNESS,
            Verdict::Liveness(_) => exit::LIVENESS,
            Verdict::Crash(_) => exit::CRASH,
        }
    }

    /// The failure kind of a verdict that is not a pass.
    pub fn failure_kind(&self) -> Option<FailureKind> {
        match self {
            Verdict::Pass => None,
            Verdict::Correctness => Some(FailureKind::Correctness),
            Verdict::Liveness(_) => Some(FailureKind::Liveness),
            Verdict::Crash(_) => Some(FailureKind::Crash),
        }
    }
}

/// What `sim run` reports.
#[derive(Debug)]
pub struct RunReport {
    pub scenario_name: String,
    pub scenario_path: String,
    /// Flags the reproduce command needs besides the seed (e.g. ` --swarm`).
    pub repro_flags: String,
    pub seed: u64,
    /// The world's start, when it is not the default (a scenario's `[network] start`, or the
    /// one a swarm seed drew).
    pub start: Option<crate::harness::world_start::WorldStart>,
    pub faults: Vec<String>,
    pub turn_outcomes: Vec<String>,
    pub trace_text: String,
    pub trace_hash: String,
    pub events: usize,
    pub end_ms: u64,
    pub runs: u32,
    /// (invariant id, violations); an empty list is a pass.
    pub invariants: Vec<(&'static str, Vec<Violation>)>,
    pub pending: Vec<(String, String)>,
    /// Invariants the scenario expects this profile to violate, with the finding that explains
    /// it: (invariant, finding, whether it did fail).
    pub expected: Vec<(&'static str, String, bool)>,
    /// The client's requests (the conformance log), for a system that keeps one.
    pub requests: Vec<crate::model::letta::client::backend::RequestRecord>,
    /// Coverage goals this run reached (`harness::coverage`).
    pub goals: Vec<&'static str>,
    /// What a guided sweep reads off the run, when it asked (`harness::guided`).
    pub guidance: Option<crate::harness::guidance::Guidance>,
    pub verdict: Verdict,
}

/// What a scenario's expectations made of one run's invariants.
#[derive(Debug, Default)]
pub struct Expectations {
    /// (invariant, finding, whether it did fail), as in [`RunReport::expected`].
    pub expected: Vec<(&'static str, String, bool)>,
    /// An invariant expected to fail held: the finding no longer reproduces.
    pub unexpected_pass: bool,
}

/// The one spelling of the command that reproduces a seed: `path` is the scenario file, `flags`
/// the options the run needs besides the seed (e.g. ` --swarm --tick-ms 10`).
pub fn reproduce_command(path: &str, seed: u64, flags: &str) -> String {
    format!("cargo run --release -p sim -- run {path} --seed {seed}{flags}")
}

/// How a failing run failed; the exit code of a set of failures follows from their kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Correctness,
    Liveness,
    Crash,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Correctness => "correctness",
            FailureKind::Liveness => "liveness",
            FailureKind::Crash => "crash",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The exit code of a command that ran many seeds: pass when nothing failed, crash when any
/// seed crashed, liveness when every failure was one, correctness otherwise.
pub fn exit_code_of(kinds: impl IntoIterator<Item = FailureKind>) -> i32 {
    let mut any = false;
    let mut crash = false;
    let mut only_liveness = true;
    for k in kinds {
        any = true;
        crash |= k == FailureKind::Crash;
        only_liveness &= k == FailureKind::Liveness;
    }
    match (any, crash, only_liveness) {
        (false, _, _) => exit::PASS,
        (true, true, _) => exit::CRASH,
        (true, false, true) => exit::LIVENESS,
        (true, false, false) => exit::CORRECTNESS,
    }
}

impl RunReport {
    /// The one command that reproduces this run.
    pub fn repro_command(&self) -> String {
        reproduce_command(&self.scenario_path, self.seed, &self.repro_flags)
    }

    /// The human-readable report `sim run` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "scenario  {} ({})",
            self.scenario_name, self.scenario_path
        );
        let _ = writeln!(s, "seed      {}", self.seed);
        if let Some(start) = self.start {
            let _ = writeln!(s, "start     {start}");
        }
        let _ = writeln!(
            s,
            "faults    {}",
            if self.faults.is_empty() {
                "none".to_string()
            } else {
                self.faults.join("; ")
            }
        );
        for (i, o) in self.turn_outcomes.iter().enumerate() {
            let _ = writeln!(s, "turn {}    {o}", i + 1);
        }
        if !self.pending.is_empty() {
            let list: Vec<String> = self
                .pending
                .iter()
                .map(|(c, id)| format!("{id} ({c})"))
                .collect();
            let _ = writeln!(
                s,
                "pending   tool calls awaiting approval at the end: {}",
                list.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "trace     {} events, {} ms simulated, hash {}",
            self.events, self.end_ms, self.trace_hash
        );
        let _ = writeln!(s, "invariants");
        self.render_invariants(&mut s);
        match &self.verdict {
            Verdict::Pass => {
                let _ = writeln!(s, "verdict   PASS");
            }
            Verdict::Correctness => {
                let _ = writeln!(s, "verdict   FAIL (correctness)");
            }
            Verdict::Liveness(_) => {
                let _ = writeln!(s, "verdict   FAIL (liveness)");
            }
            Verdict::Crash(p) => {
                let _ = writeln!(s, "verdict   CRASH: {p}");
            }
        }
        if self.verdict != Verdict::Pass {
            let _ = writeln!(s, "reproduce {}", self.repro_command());
        }
        s
    }

    /// One line per invariant (pass, FAIL with its violations, XFAIL, XPASS).
    fn render_invariants(&self, s: &mut String) {
        let trace_lines: Vec<&str> = self.trace_text.lines().collect();
        // The verdict column starts after the longest invariant id, so every row aligns.
        let w = self
            .invariants
            .iter()
            .map(|(id, _)| id.len())
            .max()
            .unwrap_or(0)
            .max(22);
        for (id, violations) in &self.invariants {
            if let Some((_, finding, failed)) = self.expected.iter().find(|(x, _, _)| x == id) {
                if *failed {
                    let _ = writeln!(
                        s,
                        "  {id:<w$} XFAIL (expected for this profile: docs/findings.md#{finding})"
                    );
                    if let Some(v) = violations.first() {
                        let _ = writeln!(s, "    {}", v.message);
                    }
                } else {
                    let _ = writeln!(
                        s,
                        "  {id:<w$} XPASS (expected to fail, docs/findings.md#{finding}, but held)"
                    );
                }
                continue;
            }
            if violations.is_empty() {
                let note = if *id == DETERMINISTIC {
                    format!(" ({} runs, identical traces)", self.runs)
                } else {
                    String::new()
                };
                let _ = writeln!(s, "  {id:<w$} pass{note}");
            } else {
                let _ = writeln!(s, "  {id:<w$} FAIL");
                for v in violations {
                    let _ = writeln!(s, "    {}", v.message);
                    if let Some(i) = v.event
                        && *id != DETERMINISTIC
                        && let Some(line) = trace_lines.get(i)
                    {
                        let _ = writeln!(s, "    at event {}: {}", i + 1, line.trim());
                    }
                }
            }
        }
    }
}
