//! Step streaming (`letta-oss-0.16` with `stream_tokens:false`): the model is called without
//! streaming and each message of its answer is sent whole (PROVENANCE.md "Step streaming").

use std::sync::Arc;

use serde_json::Value;

use super::outcome::{Turn, finish_turn, provider_failed, vendor};
use super::request::RunJob;
use crate::model::letta::server::store::IdKind;
use crate::model::letta::server::{ServerConfig, SharedStore, StoredToolCall, ids, record};
use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::Observation;
use crate::wire::letta::{
    AssistantMessage, Content, Envelope, LettaChunk, ToolCallDelta, ToolCallMessage, ToolCalls,
    UsageStatistics,
};
use crate::wire::provider::ProviderStop;

/// Step streaming (`letta-oss-0.16`, `stream_tokens:false`): one non-streaming chat
/// completion, then each message whole: an `assistant_message` with all the text, an
/// `approval_request_message` with every call and `tool_calls` a list (capture a3), and usage
/// with the cache and reasoning counts `0` rather than null (PROVENANCE.md "Observations").
pub(super) async fn step_call<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    job: RunJob,
    resp: hyper::Response<hyper::body::Incoming>,
) {
    let read = env
        .clock()
        .timeout(
            config.provider_idle_timeout,
            http::read_body(resp.into_body(), 64 << 20),
        )
        .await;
    let parsed: Result<Value, String> = match read {
        Err(_) => Err("INTERNAL_SERVER_ERROR: Provider response timed out".into()),
        Ok(Err(_)) => Err(format!(
            "INTERNAL_SERVER_ERROR: Network error during {} request: ",
            vendor(config.provider_api)
        )),
        Ok(Ok(bytes)) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("INTERNAL_SERVER_ERROR: Invalid provider response: {e}")),
    };
    let completion = match parsed {
        Ok(v) => v,
        Err(detail) => {
            return provider_failed(
                &env,
                &config,
                &store,
                &job,
                "internal_error",
                "An error occurred during agent execution.",
                &detail,
            );
        }
    };
    env.observe(Observation::ProviderResult {
        run_id: job.run_id.clone(),
        outcome: "complete".into(),
    });
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let text = message["content"].as_str().unwrap_or("").to_string();
    let calls: Vec<StoredToolCall> = message["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| StoredToolCall {
                    id: c["id"].as_str().unwrap_or("").to_string(),
                    name: c["function"]["name"].as_str().unwrap_or("").to_string(),
                    arguments: c["function"]["arguments"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let provider_stop = match choice["finish_reason"].as_str() {
        Some("length") => Some(ProviderStop::MaxTokens),
        _ => None,
    };
    let count = |k: &str| completion["usage"][k].as_u64().unwrap_or(0);
    let usage = UsageStatistics {
        message_type: "usage_statistics".into(),
        step_count: 1,
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
        cached_input_tokens: Some(0),
        cache_write_tokens: Some(0),
        reasoning_tokens: Some(0),
        ..Default::default()
    };
    let mut st = store.lock().unwrap();
    if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
        return;
    }
    let message_id = st.new_id(config.profile, IdKind::Message);
    let step_id = st.new_id(config.profile, IdKind::Step);
    if config.profile.oss() {
        st.file_input_under_step(&job.conversation_id, &job.run_id, &step_id);
    }
    let date = ids::iso_date(env.epoch_ms() + env.now_ms());
    let envelope = |message_type: &str, otid: String| Envelope {
        id: message_id.clone(),
        date: date.clone(),
        message_type: message_type.into(),
        otid: Some(otid),
        step_id: Some(step_id.clone()),
        ..Default::default()
    };
    if !text.is_empty() {
        let chunk = LettaChunk::AssistantMessage(AssistantMessage {
            env: envelope("assistant_message", ids::assistant_otid(&message_id, 0)),
            content: Content::Text(text.clone()),
        });
        record(&env, &config, &mut st, &job.run_id, chunk, None);
    }
    if !calls.is_empty() {
        let deltas: Vec<ToolCallDelta> = calls
            .iter()
            .map(|c| ToolCallDelta {
                name: Some(c.name.clone()),
                arguments: Some(c.arguments.clone()),
                tool_call_id: Some(c.id.clone()),
            })
            .collect();
        let chunk = LettaChunk::ApprovalRequestMessage(ToolCallMessage {
            env: envelope("approval_request_message", message_id.clone()),
            tool_call: deltas.first().cloned(),
            tool_calls: Some(ToolCalls::Many(deltas)),
        });
        record(&env, &config, &mut st, &job.run_id, chunk, None);
    }
    // Step streaming (0.16.8 with `stream_tokens:false`) makes no post-turn check: the
    // preflight check covers its turns (docs/server.md "Compaction").
    let _no_post_turn = finish_turn(
        &env,
        &config,
        &mut st,
        &job,
        Turn {
            message_id,
            step_id,
            text,
            calls,
            provider_stop,
            usage,
        },
        false,
    );
}
