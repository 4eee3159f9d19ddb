//! Shrinking: minimise a failing (scenario, seed) to the smallest scenario that still fails the
//! same invariant, and write it as a standalone scenario directory `sim run` reproduces.
//!
//! Greedy passes, repeated until none makes progress (each candidate is one run):
//! 1. drop fault plan entries, one at a time;
//! 2. drop user turns (keeping at least one); for an agent-loop scenario also its scripted
//!    model calls (keeping at least one answer);
//! 3. make fault times and indices smaller (halve, then step down by one);
//! 4. drop cassette frames (from the end first, then any);
//! 5. narrow the network latency range to its minimum;
//! 6. move the world's start back to the default (a swarm seed's drawn start, or the
//!    scenario's own, is kept only when the failure needs it).
//!
//! A candidate is kept only if the same invariant still fails. The run count is bounded.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::cassettes::load_response;
use super::faults::Fault;
use super::input::InputError;
use super::invariants::DETERMINISTIC;
use super::run::run_scenario;
use super::scenario::Scenario;
use super::world_start::WorldStart;
use crate::cassette::Cassette;

/// The outcome of a shrink.
#[derive(Debug)]
pub struct Shrunk {
    pub scenario: Scenario,
    pub seed: u64,
    pub invariant: String,
    /// Candidate runs tried.
    pub attempts: u32,
    /// What each accepted step removed or reduced.
    pub steps: Vec<String>,
}

struct Shrinker<'a> {
    seed: u64,
    invariant: &'a str,
    attempts: u32,
    max_attempts: u32,
    steps: Vec<String>,
}

impl Shrinker<'_> {
    /// Does `s` still fail the invariant? Counts against the budget.
    fn fails(&mut self, s: &Scenario) -> Result<bool, InputError> {
        if self.attempts >= self.max_attempts {
            return Ok(false);
        }
        self.attempts += 1;
        let runs = if self.invariant == DETERMINISTIC {
            2
        } else {
            1
        };
        let report = run_scenario(s, self.seed, runs)?;
        Ok(report
            .invariants
            .iter()
            .any(|(id, v)| *id == self.invariant && !v.is_empty())
            || (self.invariant == "crash"
                && matches!(report.verdict, super::report::Verdict::Crash(_))))
    }

    fn try_accept(
        &mut self,
        best: &mut Scenario,
        candidate: Scenario,
        step: String,
    ) -> Result<bool, InputError> {
        if self.fails(&candidate)? {
            *best = candidate;
            self.steps.push(step);
            Ok(true)
        } else {
            Ok(false)
        }
    }
}

/// Shrinks `scenario` (whose `faults` hold the explicit plan the failure ran with) for `seed`
/// and `invariant`, in at most `max_attempts` runs.
pub fn shrink(
    scenario: &Scenario,
    seed: u64,
    invariant: &str,
    max_attempts: u32,
) -> Result<Shrunk, InputError> {
    let mut sh = Shrinker {
        seed,
        invariant,
        attempts: 0,
        max_attempts,
        steps: Vec::new(),
    };
    let mut best = scenario.clone();
    if !sh.fails(&best)? {
        return Err(InputError {
            file: scenario.path.display().to_string(),
            line: None,
            column: None,
            message: format!("seed {seed} does not fail {invariant}: nothing to shrink"),
        });
    }
    // Load every cassette into memory so frames can be dropped.
    for (i, r) in scenario.provider.responses.iter().enumerate() {
        if let std::collections::btree_map::Entry::Vacant(slot) = best.cassette_overrides.entry(i) {
            let c = load_response(scenario, r.get_ref()).map_err(|e| InputError {
                file: e.origin.clone(),
                line: e.line,
                column: None,
                message: e.message,
            })?;
            slot.insert(c);
        }
    }

    loop {
        let before = sh.steps.len();

        // 1. fault plan entries
        let mut i = 0;
        while i < best.faults.len() {
            let mut c = best.clone();
            let removed = c.faults.remove(i);
            if !sh.try_accept(&mut best, c, format!("removed fault {}", removed.get_ref()))? {
                i += 1;
            }
        }
        // 2. turns
        let mut i = 0;
        while best.client.turns.len() > 1 && i < best.client.turns.len() {
            let mut c = best.clone();
            let t = c.client.turns.remove(i);
            if !sh.try_accept(&mut best, c, format!("removed turn {:?}", t))? {
                i += 1;
            }
        }
        // 2b. agent-loop turns and scripted model calls (keeping at least one of each)
        if let Some(section) = &best.agent_loop {
            let (turns, steps) = (section.turns.len(), section.script.len());
            for i in (0..turns).rev() {
                let mut c = best.clone();
                let Some(l) = c.agent_loop.as_mut().filter(|l| l.turns.len() > 1) else {
                    break;
                };
                let t = l.turns.remove(i);
                sh.try_accept(&mut best, c, format!("removed turn {t:?}"))?;
            }
            for i in (0..steps).rev() {
                let mut c = best.clone();
                let cassettes = c.provider.responses.len();
                let Some(l) = c
                    .agent_loop
                    .as_mut()
                    .filter(|l| l.script.len() + cassettes > 1 && i < l.script.len())
                else {
                    continue;
                };
                l.script.remove(i);
                sh.try_accept(&mut best, c, format!("removed script step {}", i + 1))?;
            }
        }
        // 3. fault timings and indices
        for i in 0..best.faults.len() {
            for reduce in [|v: u64| v / 2, |v: u64| v.saturating_sub(1)] {
                while let Some(smaller) = best.faults[i].get_ref().shrunk(reduce) {
                    let mut c = best.clone();
                    c.faults[i] = Spanned::new(0..0, smaller.clone());
                    if !sh.try_accept(&mut best, c, format!("reduced a fault to {smaller}"))? {
                        break;
                    }
                }
            }
        }
        // 4. cassette frames
        let keys: Vec<usize> = best.cassette_overrides.keys().copied().collect();
        for k in keys {
            let mut j = best.cassette_overrides[&k].frames().len();
            while j > 0 {
                j -= 1;
                let c = &best.cassette_overrides[&k];
                let mut frames = c.frames().to_vec();
                if j >= frames.len() {
                    continue;
                }
                frames.remove(j);
                let Ok(smaller) = Cassette::new(c.header().clone(), frames, c.end(), c.origin())
                else {
                    continue;
                };
                let mut cand = best.clone();
                cand.cassette_overrides.insert(k, smaller);
                sh.try_accept(
                    &mut best,
                    cand,
                    format!("removed frame {} of response {}", j + 1, k + 1),
                )?;
            }
        }
        // 5. latency
        if best.network.latency_ms[1] > best.network.latency_ms[0] {
            let mut c = best.clone();
            c.network.latency_ms[1] = c.network.latency_ms[0];
            let l = c.network.latency_ms;
            sh.try_accept(&mut best, c, format!("latency_ms = [{}, {}]", l[0], l[1]))?;
        }
        // 6. start
        if !best.network.start.is_default() {
            let mut c = best.clone();
            c.network.start = WorldStart::default();
            let step = format!("start = {} (the default)", c.network.start);
            sh.try_accept(&mut best, c, step)?;
        }

        if sh.steps.len() == before || sh.attempts >= sh.max_attempts {
            break;
        }
    }
    Ok(Shrunk {
        scenario: best,
        seed,
        invariant: invariant.to_string(),
        attempts: sh.attempts,
        steps: sh.steps,
    })
}

impl Shrunk {
    /// Writes `dir/scenario.toml` and its cassettes (`dir/cassettes/responseN.jsonl`), and
    /// returns the path of the scenario file.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, InputError> {
        let io = |e: std::io::Error, p: &Path| InputError {
            file: p.display().to_string(),
            line: None,
            column: None,
            message: format!("cannot write: {e}"),
        };
        let cdir = dir.join("cassettes");
        std::fs::create_dir_all(&cdir).map_err(|e| io(e, &cdir))?;
        let mut paths = Vec::new();
        for i in 0..self.scenario.provider.responses.len() {
            let name = format!("cassettes/response{}.jsonl", i + 1);
            let target = dir.join(&name);
            let c = match self.scenario.cassette_overrides.get(&i) {
                Some(c) => c.clone(),
                None => load_response(
                    &self.scenario,
                    self.scenario.provider.responses[i].get_ref(),
                )
                .map_err(|e| InputError {
                    file: e.origin.clone(),
                    line: e.line,
                    column: None,
                    message: e.message,
                })?,
            };
            std::fs::write(&target, c.to_jsonl()).map_err(|e| io(e, &target))?;
            paths.push(name);
        }
        let header = format!(
            "Shrunk from {} seed {}: fails `{}`.\nReproduce: {}\nSteps ({} runs):\n{}",
            self.scenario.path.display(),
            self.seed,
            self.invariant,
            super::report::reproduce_command(
                &dir.join("scenario.toml").display().to_string(),
                self.seed,
                ""
            ),
            self.attempts,
            self.steps
                .iter()
                .map(|s| format!("  - {s}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let file = dir.join("scenario.toml");
        std::fs::write(&file, self.scenario.to_toml(&paths, &header)).map_err(|e| io(e, &file))?;
        Ok(file)
    }
}

/// The explicit plan as scenario faults.
pub fn with_plan(scenario: &Scenario, plan: Vec<Fault>) -> Scenario {
    let mut s = scenario.clone();
    s.faults = plan.into_iter().map(|f| Spanned::new(0..0, f)).collect();
    s
}
