//! `sim replay`: a recorded session reproduced in simulation, compared exchange by exchange,
//! the first divergence shown (docs/record-replay.md "Replay").
//!
//! - `normalize`: ids, uuids and dates as placeholders numbered by first appearance;
//! - `server`: recorded requests sent to the server model in one simulated world;
//! - `derive`: what a `letta` recording implies for that world (agents, the model's answers,
//!   runs older than the recording);
//! - `compare`: one recorded response against ours, the report and its rendering;
//! - `checks`: invariants of the replayed world (`stream-stays-in-conversation`);
//! - `client`: the client side, the scenario a recording implies.

pub mod bugs;
pub mod checks;
pub mod client;
pub mod compare;
pub mod derive;
pub mod normalize;
pub mod server;

use std::time::Duration;

pub use compare::{
    Difference, Divergence, Expected, ReplayReport, Scope, compare_answer, unified_diff,
};
pub use normalize::Normalizer;

use crate::cassette::{Layer, Recording};
use crate::harness::scenario::InputError;
use crate::model::letta::client::Profile as ClientProfile;
use crate::model::letta::server::{ApprovalConflict, Profile, ServerBugs};
use crate::wire::provider::ProviderFormat;

/// Unix ms of simulated time zero in a replay: 2026-11-30T00:00:00Z, the day the letta_e2e
/// captures were made (dates are normalised away; this only keeps them plausible).
pub const REPLAY_EPOCH_UNIX_MS: u64 = 1_796_083_200_000 - 86_400_000;

/// How a server-side replay runs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub profile: Profile,
    /// Planted server defects (the canaries of server invariants).
    pub bugs: ServerBugs,
    pub scope: Scope,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            profile: Profile::LettaOss016,
            bugs: ServerBugs::default(),
            scope: Scope::default(),
        }
    }
}

/// The recording a replay reads, checked to be a `letta` session.
pub fn load_letta(path: &std::path::Path) -> Result<Recording, InputError> {
    let rec = Recording::load(path).map_err(|e| InputError {
        file: e.origin.clone(),
        line: e.line,
        column: None,
        message: e.message.clone(),
    })?;
    if rec.header().layer != Layer::Letta {
        return Err(InputError {
            file: path.display().to_string(),
            line: Some(1),
            column: None,
            message: format!(
                "key `layer`: a {} recording; `sim replay` replays \"letta\" recordings",
                rec.header().layer.as_str()
            ),
        });
    }
    Ok(rec)
}

/// Replays the recorded requests into the server model and compares every response.
pub fn replay_server(rec: &Recording, opts: &ServerOptions) -> ReplayReport {
    let d = derive::derive(rec);
    let setup = server::ServerSetup {
        seed: 7,
        agents: d.agents.clone(),
        profile: opts.profile,
        approval_conflict: ApprovalConflict::default(),
        keepalive: crate::model::letta::server::KEEPALIVE_INTERVAL,
        bugs: opts.bugs.clone(),
        provider_api: ProviderFormat::OpenAiChat,
        model: server::ModelSource::Recorded(d.answers.clone()),
        epoch_unix_ms: REPLAY_EPOCH_UNIX_MS,
        mapped_kinds: vec!["run-", "conv-", "agent-", "message-"],
        budget: Duration::from_secs(4 * 3600),
    };
    let out = server::run_world(&d.requests, &setup);
    let mut report = compare::report_server(rec, &d, &out, opts.profile, opts.scope);
    report.violations.extend(
        checks::stream_stays_in_conversation(&d.requests, &out)
            .into_iter()
            .map(|(_, m)| (checks::STREAM_STAYS_IN_CONVERSATION.to_string(), m)),
    );
    report
}

/// Which side loopsim's models play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// What `sim replay` was asked.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub side: Side,
    pub server: ServerOptions,
    /// The client model's profile (client side).
    pub client_profile: ClientProfile,
}

impl ReplayOptions {
    /// Options from the command line's names; an unknown profile is an input error naming the
    /// flag.
    pub fn from_names(
        side: Side,
        server_profile: &str,
        client_profile: &str,
        strict: bool,
    ) -> Result<ReplayOptions, InputError> {
        let flag = |name: &str, message: String| InputError {
            file: name.to_string(),
            line: None,
            column: None,
            message,
        };
        let profile = Profile::from_name(server_profile).ok_or_else(|| {
            flag(
                "--server-profile",
                format!(
                    "unknown server profile {server_profile:?} (expected {})",
                    Profile::NAMES.join(", ")
                ),
            )
        })?;
        let client_profile = ClientProfile::from_name(client_profile).ok_or_else(|| {
            flag(
                "--client-profile",
                format!(
                    "unknown client profile {client_profile:?} (expected reference, letta-code)"
                ),
            )
        })?;
        Ok(ReplayOptions {
            side,
            server: ServerOptions {
                profile,
                scope: if strict {
                    Scope::Strict
                } else {
                    Scope::Protocol
                },
                ..ServerOptions::default()
            },
            client_profile,
        })
    }
}

/// Loads a `letta` cassette and replays it as `opts` say.
pub fn replay_file(
    path: &std::path::Path,
    opts: &ReplayOptions,
) -> Result<ReplayReport, InputError> {
    let rec = load_letta(path)?;
    match opts.side {
        Side::Server => Ok(replay_server(&rec, &opts.server)),
        Side::Client => replay_client(&rec, opts),
    }
}

/// Runs the scenario the recording implies and compares the client's requests with the
/// recorded client's.
pub fn replay_client(rec: &Recording, opts: &ReplayOptions) -> Result<ReplayReport, InputError> {
    let scenario = client::scenario_of(
        rec,
        opts.client_profile.as_str(),
        opts.server.profile.as_str(),
    )?;
    let c = client::compare_client(&scenario, client::recorded_steps(rec))?;
    Ok(compare::report_client(rec, &c, opts))
}
