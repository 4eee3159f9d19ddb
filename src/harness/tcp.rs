//! The same world on real loopback TCP: provider, server and client models unchanged, tokio's
//! real network and clock instead of turmoil's. It proves the models do not depend on the
//! simulation, and it is the base of `sim serve`.

use std::sync::Arc;
use std::time::Duration;

use super::env::{AddressBook, TcpEnv};
use super::faults::NowFn;
use super::letta::world::{RunOutput, world_parts};
use super::scenario::{InputError, Scenario};
use super::trace::Trace;
use crate::model::letta::{client, server};
use crate::model::provider;

/// Runs `scenario` once on real loopback TCP, in real time, on a fresh tokio runtime.
/// The client is bounded by the scenario's time budget (as real time).
pub fn run_once_tcp(scenario: &Scenario, seed: u64) -> Result<RunOutput, InputError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| InputError {
            file: scenario.path.display().to_string(),
            line: None,
            column: None,
            message: format!("cannot start a tokio runtime: {e}"),
        })?;
    runtime.block_on(async {
        let trace = Trace::new();
        // Real time on purpose: this runner is real TCP, never a simulation.
        let start = tokio::time::Instant::now();
        let now: NowFn = Arc::new(move || start.elapsed().as_millis() as u64);
        let parts = world_parts(scenario, seed, &trace, now)?;
        let book = AddressBook::new();
        let env =
            |host: &str| TcpEnv::new(host, trace.clone(), parts.start.unix_ms(), book.clone());

        let provider_task = tokio::spawn(provider::run(
            env("provider"),
            parts.provider.clone(),
            parts.provider_state.clone(),
        ));
        let server_task = tokio::spawn(server::run(
            env("server"),
            parts.server.clone(),
            parts.store.clone(),
        ));
        let mut client = client::over_http(
            env("client"),
            parts.client,
            parts.workspace.clone(),
            parts.progress.clone(),
            parts.requests.clone(),
            None,
        );
        let budget = Duration::from_millis(scenario.limits.sim_time_ms);
        let outcomes = tokio::time::timeout(budget, client.run()).await.ok();
        let stopped = outcomes
            .is_none()
            .then(|| format!("real-time budget of {budget:?} exceeded"));
        provider_task.abort();
        server_task.abort();
        let workspace = parts.workspace.lock().unwrap().clone();
        let requests = parts.requests.lock().unwrap().clone();
        Ok(RunOutput {
            trace: trace.events(),
            outcomes,
            stopped,
            end_ms: start.elapsed().as_millis() as u64,
            workspace,
            requests,
            store: parts.store.clone(),
        })
    })
}
