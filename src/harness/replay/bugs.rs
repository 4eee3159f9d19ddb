//! Bug cassettes (`cassettes/bugs/*.toml`): a recording of a real failure and the verdicts its
//! replays must give, checked by `cargo test` (tests/letta/replay.rs). Format: docs/cassette.md
//! "Bug cassettes".

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ReplayOptions, ReplayReport, Side, replay_file};
use crate::harness::scenario::InputError;

/// One bug cassette's sidecar.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BugCassette {
    /// The recording, relative to the sidecar.
    pub cassette: String,
    /// What the recording shows, for humans.
    pub description: String,
    /// docs/findings.md anchors this recording is evidence of.
    #[serde(default)]
    pub findings: Vec<String>,
    #[serde(rename = "replay")]
    pub replays: Vec<ExpectedReplay>,
}

/// One replay and its expected verdict.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedReplay {
    /// `server` or `client`.
    pub side: String,
    #[serde(default = "default_server_profile")]
    pub server_profile: String,
    #[serde(default = "default_client_profile")]
    pub client_profile: String,
    /// `match` (every compared exchange equal) or `diverge`.
    pub verdict: String,
    /// With `diverge`: the exchange (server side) or step (client side) it diverges at.
    pub diverges_at: Option<usize>,
    /// The invariants the replayed world must break, and no others.
    #[serde(default)]
    pub violations: Vec<String>,
    /// Text one of the turn outcomes must contain (client side).
    pub turn_outcome_contains: Option<String>,
}

fn default_server_profile() -> String {
    "letta-oss-0.16".into()
}

fn default_client_profile() -> String {
    "letta-code".into()
}

/// Reads a sidecar; errors name the file (and line, for TOML errors).
pub fn load(path: &Path) -> Result<BugCassette, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot read: {e}"),
    })?;
    toml::from_str(&text).map_err(|e| {
        InputError::at(
            &path.display().to_string(),
            &text,
            e.span().map(|r| r.start),
            e.message().trim().to_string(),
        )
    })
}

/// The recording a sidecar names.
pub fn cassette_path(sidecar: &Path, bug: &BugCassette) -> PathBuf {
    sidecar
        .parent()
        .unwrap_or(Path::new("."))
        .join(&bug.cassette)
}

/// Replays every expected replay of a sidecar; returns each report with what differs from its
/// expectation (empty when it holds).
pub fn check(sidecar: &Path) -> Result<Vec<(ReplayReport, Vec<String>)>, InputError> {
    let bug = load(sidecar)?;
    let path = cassette_path(sidecar, &bug);
    let documented = crate::harness::letta::findings::documented();
    let undocumented: Vec<&String> = bug
        .findings
        .iter()
        .filter(|f| !documented.contains(&f.as_str()))
        .collect();
    if !undocumented.is_empty() {
        return Err(InputError {
            file: sidecar.display().to_string(),
            line: None,
            column: None,
            message: format!("key `findings`: {undocumented:?} not in docs/findings.md"),
        });
    }
    let mut out = Vec::new();
    for e in &bug.replays {
        let side = match e.side.as_str() {
            "server" => Side::Server,
            "client" => Side::Client,
            other => {
                return Err(InputError {
                    file: sidecar.display().to_string(),
                    line: None,
                    column: None,
                    message: format!(
                        "key `replay.side`: unknown side {other:?} (expected \"server\" or \"client\")"
                    ),
                });
            }
        };
        let opts = ReplayOptions::from_names(side, &e.server_profile, &e.client_profile, false)?;
        let report = replay_file(&path, &opts)?;
        let mut wrong = Vec::new();
        let at = report.divergence.as_ref().map(|d| d.exchange);
        match (e.verdict.as_str(), at) {
            ("match", None) => {}
            ("match", Some(n)) => wrong.push(format!("expected a match, diverges at {n}")),
            ("diverge", None) => wrong.push("expected a divergence, matches".into()),
            ("diverge", Some(n)) => {
                if e.diverges_at.is_some_and(|want| want != n) {
                    wrong.push(format!(
                        "expected the divergence at {:?}, it is at {n}",
                        e.diverges_at
                    ));
                }
            }
            (other, _) => wrong.push(format!(
                "unknown verdict {other:?} (expected \"match\" or \"diverge\")"
            )),
        }
        let mut broken: Vec<String> = report.violations.iter().map(|(i, _)| i.clone()).collect();
        broken.dedup();
        if broken != e.violations {
            wrong.push(format!(
                "expected violations {:?}, got {broken:?}",
                e.violations
            ));
        }
        if let Some(text) = &e.turn_outcome_contains
            && !report
                .turn_outcomes
                .iter()
                .any(|o| o.contains(text.as_str()))
        {
            wrong.push(format!(
                "no turn outcome contains {text:?}: {:?}",
                report.turn_outcomes
            ));
        }
        out.push((report, wrong));
    }
    Ok(out)
}
