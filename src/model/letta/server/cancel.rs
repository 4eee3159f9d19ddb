//! Cancelling runs: one run ended `cancelled`, the conversation cancel, and the agent's cancel
//! of listed runs (letta-protocol.md §7.4, §9.3).

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::errors::{conflict, not_found_agent, not_found_conversation};
use super::{
    INTERRUPTED_BY_USER, Profile, ServerConfig, SharedStore, Store, finish_run, record,
    settle_unresolved,
};
use crate::model::port::env::Env;
use crate::model::port::http::{self as mhttp, Body};
use crate::model::port::observe::Observation;
use crate::wire::letta::{LettaChunk, StopReason, StopReasonChunk};

/// Ends a running run `cancelled`: the stop_reason chunk, status `cancelled`, the lock
/// released (letta-protocol.md §7.4, §9.3). The run task sees the run finished and stops.
fn cancel_one<E: Env>(env: &E, config: &ServerConfig, st: &mut Store, run_id: &str) {
    env.observe(Observation::RunCancelled {
        run_id: run_id.to_string(),
    });
    if let Some(r) = st.runs.get_mut(run_id) {
        r.cancel_requested = true;
    }
    record(
        env,
        config,
        st,
        run_id,
        LettaChunk::StopReason(StopReasonChunk::new(StopReason::Cancelled)),
        None,
    );
    finish_run(env, config, st, run_id, StopReason::Cancelled, true);
}

/// `POST /v1/conversations/{id}/cancel`. Cloud: the active run ends `cancelled`, and the
/// conversation's tool calls left without a result are settled "Interrupted by user"; with no
/// active run, 409 "No active runs to cancel…" and nothing changes, so an approval the run left
/// pending stays pending (letta-protocol.md §9.3; open question 3). Local: always settles and
/// answers `{"status":"cancelled"}` (§7.4).
pub(crate) fn cancel_conversation<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    conv_path_id: &str,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    // The client passes the agent id for the default conversation (§2.1).
    let conv_id = conv_path_id.to_string();
    if !st.conversations.contains_key(&conv_id) {
        return not_found_conversation(&conv_id);
    }
    let active = st.conversations[&conv_id]
        .active_run
        .clone()
        .filter(|r| st.runs.get(r).is_some_and(|r| !r.finished));
    match (config.profile, active) {
        (Profile::Cloud | Profile::LettaOss016, None) => conflict(
            config,
            json!({
                "detail": format!("No active runs to cancel for conversation {conv_id}")
            }),
        ),
        (profile, active) => {
            if let Some(run_id) = &active {
                cancel_one(env, config, &mut st, run_id);
            }
            let pending_kept = profile != Profile::Local && active.is_none();
            if !pending_kept {
                settle_unresolved(
                    env,
                    config,
                    &mut st,
                    &conv_id,
                    active.as_deref(),
                    INTERRUPTED_BY_USER,
                );
            }
            let mut out = json!({"status": "cancelled"});
            if let Some(r) = active {
                out[r] = json!("cancelled");
            }
            mhttp::json_response(StatusCode::OK, &out)
        }
    }
}

/// `POST /v1/agents/{agent_id}/messages/cancel` `{run_ids}`: each known, running run of that
/// agent ends `cancelled`; others answer `failed` (letta-protocol.md §7.4 cancelRun).
pub(crate) fn cancel_runs<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    agent_id: &str,
    body: &Value,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    if !st.agents.contains_key(agent_id) {
        return not_found_agent(agent_id);
    }
    let mut ids_: Vec<String> = body["run_ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if ids_.is_empty() {
        // No ids: every running run of the agent.
        ids_ = st
            .runs
            .values()
            .filter(|r| r.agent_id == agent_id && !r.finished)
            .map(|r| r.id.clone())
            .collect();
    }
    let mut out = serde_json::Map::new();
    for run_id in ids_ {
        let ok = st
            .runs
            .get(&run_id)
            .is_some_and(|r| r.agent_id == agent_id && !r.finished);
        if ok {
            let conv = st.runs[&run_id].conversation_id.clone();
            cancel_one(env, config, &mut st, &run_id);
            if config.profile == Profile::Local {
                settle_unresolved(
                    env,
                    config,
                    &mut st,
                    &conv,
                    Some(&run_id),
                    INTERRUPTED_BY_USER,
                );
            }
        }
        out.insert(run_id, json!(if ok { "cancelled" } else { "failed" }));
    }
    mhttp::json_response(StatusCode::OK, &Value::Object(out))
}
