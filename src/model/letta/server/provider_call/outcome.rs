//! How a provider call ends its run: a model turn that ended well is stored and its client
//! tool calls left pending ([`finish_turn`]); a provider error fails the run
//! ([`provider_failed`]). A run that ended meanwhile (a cancel) is left alone.

use super::pressure::{Deferred, post_turn_over};
use super::request::RunJob;
use crate::model::letta::server::store::{Message, MessageBody};
use crate::model::letta::server::{
    Profile, ServerConfig, SharedStore, Store, StoredToolCall, fail_run, finish_run, ids, record,
};
use crate::model::port::env::Env;
use crate::model::port::observe::{HistoryEntry, Observation};
use crate::wire::letta::{LettaChunk, StopReason, StopReasonChunk, UsageStatistics};
use crate::wire::provider::{ProviderFormat, ProviderStop};
use serde_json::json;

/// The name Letta's error details give a provider (captures g_fail500: "OpenAI API error";
/// letta-protocol.md §3.5 lists "Google Vertex API error", the Gemini clients' word).
pub(super) fn vendor(api: ProviderFormat) -> &'static str {
    match api {
        ProviderFormat::Anthropic => "Anthropic",
        ProviderFormat::OpenAiChat | ProviderFormat::OpenAiResponses => "OpenAI",
        ProviderFormat::Gemini => "Google Vertex",
    }
}

/// The run ended meanwhile (a cancel), or is unknown.
pub(super) fn is_finished(store: &SharedStore, run_id: &str) -> bool {
    store
        .lock()
        .unwrap()
        .runs
        .get(run_id)
        .is_none_or(|r| r.finished)
}

/// A model turn that ended well: what it said and called, how it stopped, what it cost.
pub(super) struct Turn {
    pub message_id: String,
    pub step_id: String,
    pub text: String,
    pub calls: Vec<StoredToolCall>,
    pub provider_stop: Option<ProviderStop>,
    pub usage: UsageStatistics,
}

/// Stores the assistant message, leaves its client tool calls pending, and ends the run:
/// `stop_reason` (`requires_approval` with calls, else `end_turn`), `usage_statistics`,
/// `[DONE]` (captures a, b; local: usage then stop_reason, §1.6). With `post_turn`, a context
/// above the threshold holds back those last two chunks, which the post-turn compaction's chunks
/// go before, and returns them for the caller to finish the run with.
pub(super) fn finish_turn<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    job: &RunJob,
    turn: Turn,
    post_turn: bool,
) -> Option<Deferred> {
    let local = config.profile == Profile::Local;
    let Turn {
        message_id,
        step_id,
        text,
        calls: stored_calls,
        provider_stop,
        mut usage,
    } = turn;
    // An empty model answer (no text, no tool calls, not cut by max tokens) fails the run as
    // `llm_api_error` whose detail carries "empty content in": the shape letta-code's
    // empty-response retry recognises (letta-protocol.md §3.7, §3.10 step 6; the legacy error
    // type `llm_empty_response`, §1.4). Not captured from 0.16.8 (so not in `letta-oss-0.16`);
    // see docs/client.md.
    if config.profile == Profile::Cloud
        && text.is_empty()
        && stored_calls.is_empty()
        && provider_stop != Some(ProviderStop::MaxTokens)
    {
        fail_run(
            env,
            config,
            st,
            &job.run_id,
            StopReason::LlmApiError,
            "llm_empty_response",
            "LLM provider returned empty content in response",
            "LLM provider returned empty content in response (no text and no tool calls)",
        );
        return None;
    }
    let now = env.now_ms();
    let message_id_for_usage = message_id.clone();
    st.push_message(
        &job.conversation_id,
        Message {
            id: message_id.clone(),
            otid: Some(if stored_calls.is_empty() {
                ids::assistant_otid(&message_id, 0)
            } else {
                message_id.clone()
            }),
            run_id: Some(job.run_id.clone()),
            step_id: Some(step_id.clone()),
            at_ms: now,
            body: MessageBody::Assistant {
                text: text.clone(),
                tool_calls: stored_calls.clone(),
            },
        },
    );
    env.observe(Observation::History {
        conversation_id: job.conversation_id.clone(),
        entry: HistoryEntry::Assistant {
            chars: text.chars().count(),
        },
    });
    for c in &stored_calls {
        env.observe(Observation::History {
            conversation_id: job.conversation_id.clone(),
            entry: HistoryEntry::ToolCall {
                tool_call_id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        });
    }
    // letta-protocol.md §7.6: tool calls → requires_approval; `length` → max_tokens_exceeded.
    let stop = if stored_calls.is_empty() {
        if provider_stop == Some(ProviderStop::MaxTokens) {
            StopReason::MaxTokensExceeded
        } else {
            StopReason::EndTurn
        }
    } else {
        let conv = st
            .conversations
            .get_mut(&job.conversation_id)
            .expect("run of a known conversation");
        conv.pending = stored_calls;
        conv.pending_message_id = Some(message_id);
        StopReason::RequiresApproval
    };
    if stop == StopReason::RequiresApproval && config.response_state {
        let response_id = format!("resp-{}", job.run_id);
        let chunk = json!({
            "id": message_id_for_usage,
            "message_type": "response_state",
            "response_id": response_id,
            "cache_scope": "approval_boundary",
        });
        let chunk = LettaChunk::from_json(&chunk.to_string())
            .expect("a response_state chunk with an id is a LettaChunk");
        record(env, config, st, &job.run_id, chunk, None);
        env.observe(Observation::ServerResponseState {
            run_id: job.run_id.clone(),
            response_id,
        });
    }
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    usage.context_tokens = Some(usage.total_tokens);
    let stop_chunk = LettaChunk::StopReason(StopReasonChunk::new(stop.clone()));
    // The anchor of later context estimates (§8.4).
    let usage_tokens = (usage.total_tokens > 0).then_some(usage.total_tokens);
    let usage_chunk = LettaChunk::UsageStatistics(usage);
    // Cloud: stop_reason, usage (captures); local: usage, then stop_reason last (§1.6).
    if let Some(u) = usage_tokens {
        st.usage.insert(message_id_for_usage.clone(), u);
    }
    let (first, second) = if local {
        (usage_chunk, stop_chunk)
    } else {
        (stop_chunk, usage_chunk)
    };
    // The post-turn pair: locally after usage_statistics, before stop_reason (§1.6, and the
    // published CLI's local backend streams usage, event, summary, stop in that order:
    // tests/interop/compaction.rs); in the cloud profiles, which no capture shows compacting,
    // before both.
    if post_turn && post_turn_over(st, job, usage_tokens) {
        let rest = if local {
            record(env, config, st, &job.run_id, first, None);
            vec![second]
        } else {
            vec![first, second]
        };
        return Some(Deferred { stop, rest });
    }
    record(env, config, st, &job.run_id, first, None);
    record(env, config, st, &job.run_id, second, None);
    finish_run(env, config, st, &job.run_id, stop, true);
    None
}

/// The provider call failed: the run ends `llm_api_error` with `error_type`, `message` and
/// `detail`, unless it already ended.
pub(super) fn provider_failed<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    job: &RunJob,
    error_type: &str,
    message: &str,
    detail: &str,
) {
    env.observe(Observation::ProviderResult {
        run_id: job.run_id.clone(),
        outcome: format!("error: {detail}"),
    });
    let mut st = store.lock().unwrap();
    if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
        return;
    }
    fail_run(
        env,
        config,
        &mut st,
        &job.run_id,
        StopReason::LlmApiError,
        error_type,
        message,
        detail,
    );
}
