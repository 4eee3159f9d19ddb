//! Scenario files (TOML, docs/scenario.md): what system runs, with which provider responses,
//! which user turns and permission rules, under which faults.
//!
//! This file holds what every system's scenario has (`[scenario]`, `[network]`, `[provider]`,
//! `[[faults]]`, `[limits]`; `[planted]` in [`planted`]) and the checks they get; each
//! system's own sections and checks are in its folder ([`super::letta::scenario`],
//! [`super::kimi::scenario`]), reached through `harness::system`, which also holds
//! [`Scenario::load`] and [`Scenario::parse`]: loading a scenario means asking which system it
//! runs.
//!
//! Parsing is strict: unknown keys and bad values are errors that name the file, line and
//! column and say what was expected. Paths inside a scenario are relative to the file. A
//! scenario is written back (shrunk reproductions) by serde, through [`Scenario::to_toml`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::kimi::scenario::AgentLoopSection;

pub use super::faults::Fault;
pub use super::input::InputError;
use super::input::Origin;
pub use super::letta::scenario::{
    Agent, ClientSection, ExpectedFailure, Permissions, ProbeRequest, ServerSection, Tool,
};
use super::world_start::WorldStart;

mod planted;
pub use planted::Planted;

/// A parsed scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub scenario: Meta,
    #[serde(default)]
    pub network: Network,
    pub provider: Provider,
    /// `letta`: required (an agent-loop scenario has none).
    #[serde(default)]
    pub agent: Agent,
    /// `letta`: required (an agent-loop scenario has none).
    #[serde(default)]
    pub client: ClientSection,
    /// `letta`: the permission rules and the simulated human.
    #[serde(default)]
    pub permissions: Permissions,
    /// `agent-loop`: the agent host (required there).
    #[serde(default)]
    pub agent_loop: Option<AgentLoopSection>,
    #[serde(default)]
    pub faults: Vec<Spanned<Fault>>,
    #[serde(default)]
    pub limits: Limits,
    /// Deliberate defects, for tests that prove an invariant can fail.
    #[serde(default)]
    pub planted: Planted,
    /// `letta`: the server's profile and variants.
    #[serde(default)]
    pub server: ServerSection,
    /// `letta`: scripted raw requests from a `probe` host: a second client, a duplicate send,
    /// a replay, a cancel.
    #[serde(default)]
    pub requests: Vec<Spanned<ProbeRequest>>,
    /// `letta`: invariants a profile is known to violate (docs/findings.md).
    #[serde(default)]
    pub expect: Vec<Spanned<ExpectedFailure>>,
    /// The file it was read from (set by [`Scenario::load`]).
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    pub source: String,
    /// Cassettes to use instead of the files `[provider] responses` names, by position (the
    /// shrinker edits cassettes in memory).
    #[serde(skip)]
    pub cassette_overrides: BTreeMap<usize, crate::cassette::Cassette>,
    /// Extra flags the reproduce command needs (e.g. ` --swarm`).
    #[serde(skip)]
    pub repro_flags: String,
    /// The scenario as the file wrote it, serialised, to tell a run of it from one with a plan
    /// added, its faults shrunk, or its profile, mode or switches changed in memory
    /// ([`Scenario::runs_as_written`]).
    #[serde(skip)]
    as_written: String,
    /// The faults as the file wrote them, serialised ([`Scenario::keeps_its_faults`]).
    #[serde(skip)]
    faults_as_written: String,
    /// The client profile a command line put in place of the file's
    /// ([`Scenario::with_client_profile`]): a sweep's worker processes, which load the file
    /// again, are given it.
    #[serde(skip)]
    pub profile_override: Option<&'static str>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The system under test: `letta` (the approval loop) or `agent-loop` (the turn loop).
    pub system: Spanned<String>,
    /// Client behaviour profile (`letta`): `reference` or `letta-code`.
    #[serde(
        default = "default_profile",
        skip_serializing_if = "is_default_profile"
    )]
    pub client_profile: Spanned<String>,
    /// How each turn ends when the scenario runs as written (its own `[[faults]]`, no plan
    /// added), on every seed: `ends-as-declared` holds such a run to it (docs/scenario.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<Spanned<String>>,
    /// How the server's history resolves each tool call, in the order it records them, when the
    /// scenario runs as written (`letta`): `ends-as-declared` holds such a run to it too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolutions: Vec<Spanned<String>>,
    /// How each compaction goes when the scenario runs as written (`letta`), held as `outcomes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compactions: Vec<Spanned<String>>,
}

fn default_profile() -> Spanned<String> {
    Spanned::new(0..0, "reference".to_string())
}
fn is_default_profile(p: &Spanned<String>) -> bool {
    p.get_ref() == default_profile().get_ref()
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// turmoil's tick: the resolution of simulated time.
    #[serde(default = "default_tick")]
    pub tick_ms: u64,
    /// Per-message latency range `[min, max]` in ms.
    #[serde(
        default = "default_latency",
        deserialize_with = "crate::harness::input::min_max_pair"
    )]
    pub latency_ms: [u64; 2],
    /// Whether the step loop skips idle simulated time (harness/warp.rs). Not a scenario key:
    /// on unless `--no-warp` turned it off ([`crate::harness::warp::set_warp_by_default`]);
    /// the trace is the same either way.
    #[serde(skip, default = "default_warp")]
    pub warp: bool,
    /// Simulated time zero on the world's wall clock (`start`, an RFC 3339 UTC instant).
    #[serde(default, skip_serializing_if = "WorldStart::is_default")]
    pub start: WorldStart,
}

fn default_tick() -> u64 {
    1
}
fn default_warp() -> bool {
    crate::harness::warp::warp_by_default()
}
fn default_latency() -> [u64; 2] {
    [1, 5]
}

impl Default for Network {
    fn default() -> Self {
        Network {
            tick_ms: default_tick(),
            latency_ms: default_latency(),
            warp: default_warp(),
            start: WorldStart::default(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// `anthropic` or `openai_chat`.
    pub api: Spanned<String>,
    /// Provider-layer cassettes, one per model call, in call order.
    #[serde(default)]
    pub responses: Vec<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Simulated-time budget for the whole run; exceeding it is a liveness failure.
    #[serde(default = "default_sim_time")]
    pub sim_time_ms: u64,
    /// Upper bound on requests per user turn.
    #[serde(default = "default_requests")]
    pub requests_per_turn: u32,
    /// When every fault stops and the world is repaired (partitions healed, crashed hosts
    /// restarted). Safety is checked throughout; liveness is judged after this.
    #[serde(default = "default_heal")]
    pub heal_at_ms: u64,
    /// After healing, every turn must end within this much simulated time (`turn-terminates`).
    #[serde(default = "default_liveness")]
    pub liveness_ms: u64,
}

fn default_sim_time() -> u64 {
    600_000
}
fn default_requests() -> u32 {
    32
}
fn default_heal() -> u64 {
    120_000
}
fn default_liveness() -> u64 {
    300_000
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sim_time_ms: default_sim_time(),
            requests_per_turn: default_requests(),
            heal_at_ms: default_heal(),
            liveness_ms: default_liveness(),
        }
    }
}

/// A `[provider] responses` entry split into its file and, for `FILE#N`, the exchange: `N`
/// (1-based) of a version 2 recording, so a recorded session of several model calls answers
/// them one entry each. A `#` not followed by digits only is part of the file name.
pub fn split_ref(entry: &str) -> (&str, Option<&str>) {
    match entry.rsplit_once('#') {
        Some((file, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (file, Some(n))
        }
        _ => (entry, None),
    }
}

/// The network settings a command line may override for every scenario it loads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retune {
    /// turmoil's tick instead of `[network] tick_ms` (`--tick-ms`).
    pub tick_ms: Option<u64>,
    /// `[network] latency_ms` multiplied by this (`--latency-scale`).
    pub latency_scale: Option<u64>,
    /// The Letta client profile instead of `[scenario] client_profile` (`--client-profile`).
    pub client_profile: Option<&'static str>,
    /// The world's start instead of `[network] start` (`--start`).
    pub start: Option<WorldStart>,
}

impl Scenario {
    /// The scenario stepped through every tick, idle or not, when `no_warp`. The trace is the
    /// same either way, so the reproduce command does not carry it.
    pub fn with_no_warp(mut self, no_warp: bool) -> Scenario {
        if no_warp {
            self.network.warp = false;
        }
        self
    }

    /// The scenario at another turmoil tick (`--tick-ms`): timers keep their exact values,
    /// hops between hosts take at least one tick (docs/performance.md). The reproduce command
    /// carries the flag.
    pub fn with_tick(mut self, tick_ms: Option<u64>) -> Scenario {
        if let Some(t) = tick_ms {
            self.network.tick_ms = t.max(1);
            self.repro_flags
                .push_str(&format!(" --tick-ms {}", self.network.tick_ms));
        }
        self
    }

    /// The scenario with the command line's network settings ([`Retune`]); the reproduce
    /// command carries each one given.
    pub fn retuned(self, r: &Retune) -> Scenario {
        self.with_tick(r.tick_ms)
            .with_latency_scale(r.latency_scale)
            .with_client_profile(r.client_profile)
            .with_start(r.start)
    }

    /// The scenario with its world started at `start` (`--start`), whatever its
    /// `[network] start` says: how a guided run whose seed moved the start is reproduced. The
    /// reproduce command carries the flag.
    pub fn with_start(mut self, start: Option<WorldStart>) -> Scenario {
        if let Some(start) = start {
            self.network.start = start;
            self.repro_flags.push_str(&format!(" --start {start}"));
        }
        self
    }

    /// A Letta scenario run with another client profile (`--client-profile`): the same
    /// scenario against the published client's model, say. Its `[scenario] outcomes` were
    /// declared for the profile it names, so they do not apply (the scenario no longer runs as
    /// written); its `[[expect]]` entries for that profile do. An agent-loop scenario has one
    /// client and is left as it is. The reproduce command carries the flag.
    pub fn with_client_profile(mut self, profile: Option<&'static str>) -> Scenario {
        if let Some(p) = profile
            && self.scenario.system.get_ref() == "letta"
        {
            let span = self.scenario.client_profile.span();
            self.scenario.client_profile = Spanned::new(span, p.to_string());
            self.repro_flags.push_str(&format!(" --client-profile {p}"));
            self.profile_override = Some(p);
        }
        self
    }

    /// The scenario on a network `k` times slower (`--latency-scale`): every hop's latency
    /// range `[network] latency_ms` multiplied by `k`; the timers, the faults' own times and
    /// latencies stay as written. The reproduce command carries the flag.
    pub fn with_latency_scale(mut self, k: Option<u64>) -> Scenario {
        if let Some(k) = k {
            let k = k.max(1);
            self.network.latency_ms = self.network.latency_ms.map(|ms| ms.saturating_mul(k));
            self.repro_flags.push_str(&format!(" --latency-scale {k}"));
        }
        self
    }

    /// Reads a scenario file and checks what every scenario gets (its system's own checks are
    /// [`Scenario::load`]'s, in `system.rs`).
    pub(crate) fn read_core(path: &Path) -> Result<Scenario, InputError> {
        let name = path.display().to_string();
        let source = std::fs::read_to_string(path).map_err(|e| InputError {
            file: name.clone(),
            line: None,
            column: None,
            message: format!("cannot read scenario: {e}"),
        })?;
        Self::parse_core(&source, path)
    }

    /// Parses scenario text and checks what every scenario gets; `path` names it in errors and
    /// anchors relative paths.
    pub(crate) fn parse_core(source: &str, path: &Path) -> Result<Scenario, InputError> {
        let name = path.display().to_string();
        let mut s: Scenario = toml::from_str(source).map_err(|e| {
            InputError::at(
                &name,
                source,
                e.span().map(|r| r.start),
                e.message().trim().to_string(),
            )
        })?;
        s.path = path.to_path_buf();
        s.source = source.to_string();
        s.as_written = s.fingerprint();
        s.faults_as_written = s.faults_fingerprint();
        s.check_core()?;
        Ok(s)
    }

    /// Everything a run reads from the scenario's sections, as one text.
    fn fingerprint(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// The scenario runs as its file wrote it: no plan added to its faults or taken from them,
    /// no section changed in memory (a test's other profile or mode, a `--latency-scale`), no
    /// cassette edited. Its `[scenario] outcomes` apply to such a run only.
    pub fn runs_as_written(&self) -> bool {
        self.cassette_overrides.is_empty() && self.fingerprint() == self.as_written
    }

    /// The scenario's faults are the ones its file wrote: no plan added, none shrunk away (its
    /// profile, mode or network may have changed). An `[[expect]]` that does not happen is a
    /// failure only on such a run: a plan may keep the finding from showing.
    pub fn keeps_its_faults(&self) -> bool {
        self.faults_fingerprint() == self.faults_as_written
    }

    fn faults_fingerprint(&self) -> String {
        serde_json::to_string(&self.faults).unwrap_or_default()
    }

    /// The text the scenario was read from, for errors that point into it.
    pub fn origin(&self) -> Origin<'_> {
        Origin::new(self.path.display().to_string(), &self.source)
    }

    pub fn error_at(&self, span: std::ops::Range<usize>, msg: impl Into<String>) -> InputError {
        self.origin().at(span, msg)
    }

    /// The checks every scenario gets (the system name is checked first, in `system.rs`).
    fn check_core(&self) -> Result<(), InputError> {
        let at = self.origin();
        self.provider_api()?;
        for r in &self.provider.responses {
            let (file, exchange) = split_ref(r.get_ref());
            let p = self.resolve(file);
            if !p.is_file() {
                let what = if p.is_dir() {
                    "is a directory, not a cassette file"
                } else if p.exists() {
                    "is not a regular file"
                } else {
                    "not found"
                };
                return Err(at.at(
                    r.span(),
                    format!(
                        "cassette {:?} {what} (looked at {}); paths are relative to the scenario file",
                        r.get_ref(),
                        p.display()
                    ),
                ));
            }
            // `FILE#N` names an exchange of a recording: one it holds.
            if let Some(n) = exchange {
                let held = crate::cassette::Recording::load(&p).map(|rec| rec.exchanges().len());
                let n: usize = n.parse().unwrap_or(0);
                if let Ok(held) = held
                    && !(1..=held).contains(&n)
                {
                    return Err(at.at(
                        r.span(),
                        format!(
                            "cassette {:?}: exchange {n} of a recording of {held} (exchanges count from 1)",
                            r.get_ref()
                        ),
                    ));
                }
            }
        }
        if self.network.latency_ms[0] > self.network.latency_ms[1] {
            return Err(at.at_key(
                &["network", "latency_ms"],
                "[network] latency_ms must be [min, max] with min <= max",
            ));
        }
        if self.network.tick_ms == 0 {
            return Err(at.at_key(
                &["network", "tick_ms"],
                "[network] tick_ms must be at least 1",
            ));
        }
        self.planted_for_this_system()?;
        for f in &self.faults {
            if let Some(problem) = f.get_ref().problem() {
                return Err(at.at(f.span(), problem));
            }
            if let Fault::Latency { max_ms, .. } = f.get_ref()
                && *max_ms < self.network.latency_ms[0]
            {
                return Err(at.at(
                    f.span(),
                    format!(
                        "latency max_ms={max_ms} is below [network] latency_ms minimum {}",
                        self.network.latency_ms[0]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A path in the scenario, resolved against the scenario file's directory.
    pub fn resolve(&self, rel: &str) -> PathBuf {
        match self.path.parent() {
            Some(dir) => dir.join(rel),
            None => PathBuf::from(rel),
        }
    }

    pub fn provider_api(&self) -> Result<crate::wire::provider::ProviderFormat, InputError> {
        let name = self.provider.api.get_ref();
        crate::wire::provider::ProviderFormat::from_name(name).ok_or_else(|| {
            self.error_at(
                self.provider.api.span(),
                format!(
                    "unknown provider api {name:?}: expected one of {}",
                    crate::wire::provider::ProviderFormat::names()
                ),
            )
        })
    }

    /// The parts a `letta` world reads.
    pub fn letta_sections(&self) -> super::letta::scenario::Sections<'_> {
        super::letta::scenario::Sections {
            client_profile: &self.scenario.client_profile,
            agent: &self.agent,
            client: &self.client,
            permissions: &self.permissions,
            server: &self.server,
            requests: &self.requests,
            expect: &self.expect,
            responses: &self.provider.responses,
            faults: &self.faults,
            requests_per_turn: self.limits.requests_per_turn,
        }
    }

    /// The parts an agent-loop world reads (`[provider] api` must be valid).
    pub fn agent_loop_sections(&self) -> Result<super::kimi::scenario::Sections<'_>, InputError> {
        Ok(super::kimi::scenario::Sections {
            client_profile: &self.scenario.client_profile,
            agent_loop: self.agent_loop.as_ref(),
            api: self.provider_api()?,
            responses: &self.provider.responses,
            faults: &self.faults,
        })
    }

    // The `letta` world reads its sections through these (checked when the scenario loaded).

    pub fn server_profile(&self) -> Result<crate::model::letta::server::Profile, InputError> {
        self.server.server_profile(&self.origin())
    }

    pub fn approval_conflict(
        &self,
    ) -> Result<crate::model::letta::server::ApprovalConflict, InputError> {
        self.server.approval_conflict(&self.origin())
    }

    pub fn permission_default(
        &self,
    ) -> Result<crate::model::letta::client::approvals::Permission, InputError> {
        self.permissions.default_permission(&self.origin())
    }

    pub fn human_answers(
        &self,
    ) -> Result<Vec<crate::model::letta::client::approvals::HumanAnswer>, InputError> {
        self.permissions.human_answers(&self.origin())
    }

    /// The scenario as a standalone TOML file whose cassettes are `cassette_paths` (one per
    /// provider response, relative to where the file will be written), with `header` as
    /// comment lines at the top. Loading it gives this scenario back.
    pub fn to_toml(&self, cassette_paths: &[String], header: &str) -> String {
        let mut s = self.clone();
        // The declared outcomes and probe statuses are those of the file's own faults and
        // cassettes.
        if !self.runs_as_written() {
            s.scenario.outcomes.clear();
            s.scenario.resolutions.clear();
            s.scenario.compactions.clear();
            for r in &mut s.requests {
                r.get_mut().status = None;
            }
        }
        s.provider.responses = cassette_paths
            .iter()
            .map(|p| Spanned::new(0..0, p.clone()))
            .collect();
        let mut text: String = header.lines().map(|l| format!("# {l}\n")).collect();
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&toml::to_string(&s).expect("a scenario serialises"));
        text
    }
}

/// The sections every scenario has, then its system's own, faults last (the order people
/// write them in). Absent optional parts are left out.
#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of `original` is in `written` with the same value (`written` may add the
    /// defaults `original` left out). `client_profile = "reference"` is the default and is
    /// left out when written.
    fn contains(written: &toml::Value, original: &toml::Value, at: &str) {
        match (written, original) {
            (toml::Value::Table(w), toml::Value::Table(o)) => {
                for (k, v) in o {
                    let here = format!("{at}.{k}");
                    if here == ".scenario.client_profile" && v.as_str() == Some("reference") {
                        continue;
                    }
                    let w = w.get(k).unwrap_or_else(|| panic!("{here} not written"));
                    contains(w, v, &here);
                }
            }
            (toml::Value::Array(w), toml::Value::Array(o)) => {
                assert_eq!(w.len(), o.len(), "{at}");
                for (i, (w, o)) in w.iter().zip(o).enumerate() {
                    contains(w, o, &format!("{at}[{i}]"));
                }
            }
            _ => assert_eq!(written, original, "{at}"),
        }
    }

    /// A written scenario loads back to the same scenario: it keeps every key of the file it
    /// came from, and writing it again gives the same text.
    #[test]
    fn every_bundled_scenario_round_trips_through_to_toml() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut files = Vec::new();
        for dir in ["letta", "kimi", "planted"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                files.push(e.unwrap().path());
            }
        }
        files.sort();
        assert!(files.len() > 50);
        for path in files {
            let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
            let cassettes: Vec<String> = s
                .provider
                .responses
                .iter()
                .map(|r| r.get_ref().clone())
                .collect();
            let text = s.to_toml(&cassettes, "a header\nof two lines");
            assert!(text.starts_with("# a header\n# of two lines\n\n"), "{text}");
            let back = Scenario::parse(&text, &path)
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
            assert_eq!(back.to_toml(&cassettes, "a header\nof two lines"), text);
            let original: toml::Value = toml::from_str(&s.source).unwrap();
            let written: toml::Value = toml::from_str(&text).unwrap();
            contains(&written, &original, "");
        }
    }

    /// A scenario written with other faults than its file's (a shrunk plan) leaves out the
    /// declarations of its file's run, which it would not keep; one as written keeps them.
    #[test]
    fn a_scenario_written_with_other_faults_drops_its_declarations() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/letta/server_attach_by_otid.toml");
        let s = Scenario::load(&path).unwrap();
        let cassettes: Vec<String> = s
            .provider
            .responses
            .iter()
            .map(|r| r.get_ref().clone())
            .collect();
        assert!(s.runs_as_written());
        assert!(s.to_toml(&cassettes, "").contains("status = 404"));
        let mut planned = s.clone();
        planned
            .faults
            .push(Spanned::new(0..0, Fault::BusyOnSend { send: 1 }));
        assert!(!planned.runs_as_written());
        let text = planned.to_toml(&cassettes, "");
        assert!(!text.contains("status ="), "{text}");
        let approval = Scenario::load(&path.with_file_name("approval_turn.toml")).unwrap();
        let mut planned = approval.clone();
        planned.client.mode = Spanned::new(0..0, "headless".into());
        assert!(!planned.runs_as_written());
        assert!(!planned.to_toml(&cassettes, "").contains("outcomes"));
    }
}
