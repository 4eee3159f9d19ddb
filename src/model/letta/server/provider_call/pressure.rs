//! Context pressure in a run (letta-protocol.md §8.1, §7.7): the preflight check before the
//! model call, compaction on a provider overflow before retrying the call, and the post-turn
//! check after a successful response, whose compaction chunks come before the run's last
//! chunks.

use super::request::RunJob;
use crate::model::letta::server::compact::{
    Emit, context_window, preflight_tokens, run_compaction, still_over_threshold, transcript,
};
use crate::model::letta::server::compaction::estimate::context_estimate;
use crate::model::letta::server::compaction::{SummariserError, Trigger, over_threshold};
use crate::model::letta::server::store::Store;
use crate::model::letta::server::{
    Profile, ServerConfig, SharedStore, fail_run, finish_run, record,
};
use crate::model::port::env::Env;
use crate::wire::letta::{LettaChunk, StopReason};

/// Whether the run's compaction chunks are streamed: always in the local backend, in the
/// cloud profiles when the request asked (§10.2).
pub(super) fn emits_chunks(config: &ServerConfig, job: &RunJob) -> bool {
    config.profile == Profile::Local || job.include_compaction_messages
}

/// The preflight check, once per turn (§8.1 a): compacts when the provider estimate is above
/// the threshold. `false`: the run has ended (failed or cancelled).
pub(super) async fn preflight<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    job: &mut RunJob,
) -> bool {
    let over = {
        let st = store.lock().unwrap();
        let agent = &st.conversations[&job.conversation_id].agent_id;
        let window = context_window(&st, agent);
        preflight_tokens(&st, &job.conversation_id, &job.client_tools)
            .is_some_and(|t| over_threshold(t, window))
    };
    if !over {
        return true;
    }
    compact_in_run(env, config, store, job, Trigger::ContextWindowLimit).await
}

/// Compacts the run's conversation and reloads the job's history from it. `false`: the run
/// has ended (the compaction failed, left the context above the threshold, or the run was
/// cancelled meanwhile).
pub(super) async fn compact_in_run<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    job: &mut RunJob,
    trigger: Trigger,
) -> bool {
    let emit = Emit {
        run_id: Some(&job.run_id),
        chunks: emits_chunks(config, job),
    };
    let result = run_compaction(env, config, store, &job.conversation_id, trigger, emit).await;
    let mut st = store.lock().unwrap();
    if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
        return false;
    }
    match result {
        Ok(applied) => {
            if let Some(t) = applied.threshold
                && applied.tokens_after > t
                && !config.bugs.compaction_ignores_threshold
            {
                let text = still_over_threshold(applied.tokens_after, t);
                fail_run(
                    env,
                    config,
                    &mut st,
                    &job.run_id,
                    StopReason::Error,
                    "local_backend_error",
                    &text,
                    &text,
                );
                return false;
            }
            job.history = st
                .conversation_messages(&job.conversation_id)
                .into_iter()
                .cloned()
                .collect();
            true
        }
        Err(failed) => {
            // Summariser failures propagate (§8.2), normalised as a local provider error
            // (§7.7): an overflow is not retryable, a transport or 5xx error is.
            let (stop, text) = match failed.error {
                SummariserError::Overflow(e) => (StopReason::Error, e),
                SummariserError::Other(e) => (StopReason::LlmApiError, e),
            };
            fail_run(
                env,
                config,
                &mut st,
                &job.run_id,
                stop,
                "llm_error",
                &format!("Compaction failed: {text}"),
                &text,
            );
            false
        }
    }
}

/// The run's last chunks, held back while a post-turn compaction runs.
pub(super) struct Deferred {
    pub stop: StopReason,
    pub rest: Vec<LettaChunk>,
}

/// The post-turn check (§8.1 b) once the model's answer is stored: usage-derived tokens, else
/// the estimate including the new assistant message.
pub(super) fn post_turn_over(st: &Store, job: &RunJob, usage_tokens: Option<u64>) -> bool {
    let agent = &st.conversations[&job.conversation_id].agent_id;
    let window = context_window(st, agent);
    let tokens = usage_tokens
        .unwrap_or_else(|| context_estimate(&transcript(st, &job.conversation_id)).tokens);
    over_threshold(tokens, window)
}

/// Runs the post-turn compaction, then writes the held-back chunks and ends the run.
pub(super) async fn finish_after_compaction<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    mut job: RunJob,
    deferred: Deferred,
) {
    if !compact_in_run(env, config, store, &mut job, Trigger::ContextWindowLimit).await {
        return;
    }
    let mut st = store.lock().unwrap();
    for c in deferred.rest {
        record(env, config, &mut st, &job.run_id, c, None);
    }
    finish_run(env, config, &mut st, &job.run_id, deferred.stop, true);
}
