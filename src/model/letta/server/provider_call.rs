//! The run task: one provider call (with the provider SDK's retries), its events translated
//! into Letta chunks as they arrive, and the run's ending.
//!
//! Cloud translation follows the real 0.16.8 server in token-streaming mode
//! (captures/letta_server/PROVENANCE.md, "Token streaming"): one `assistant_message` per text
//! delta, all with the same `message-<uuid>` id and the derived otid; an
//! `approval_request_message` per tool-call delta, the first carrying the name and
//! `arguments:null`, later ones `name:null` and an argument fragment, with `otid == id` and
//! `tool_calls` a single object. Then `stop_reason` (`requires_approval` when the model called a
//! client tool, else `end_turn`), `usage_statistics`, `[DONE]`.
//!
//! Local translation follows the provider turn executor (letta-protocol.md §7.6): text deltas
//! as `assistant_message` with a parts array and a segment otid, one complete
//! `approval_request_message` per finished tool call, `usage_statistics` at the provider's
//! stop, `stop_reason` last; errors as an `error_message` chunk then `stop_reason`.
//!
//! A run that is finished while this task runs (a cancel) is left alone: the task stops
//! reading and writes nothing more; the partial step is not kept (letta-protocol.md §7.2).
//!
//! Module map: this file makes the call; [`request`] builds its body, `token_stream` and
//! `step_stream` translate the answer, `outcome` ends the run.

mod outcome;
pub mod request;
mod step_stream;
mod token_stream;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper::body::Incoming;
use serde_json::{Value, json};

use self::outcome::{is_finished, provider_failed, vendor};
use self::request::{RunJob, provider_body};
use super::{ServerConfig, SharedStore};
use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::Observation;
use crate::model::provider::api_path;
use crate::wire::provider::ProviderFormat;

/// The provider SDK's automatic retries of an error status before any output: 2 retries
/// (3 calls: captures/letta_server g_fail500, "3 (Letta retried twice)"), after 0.5 s and 1 s
/// (the OpenAI SDK's `min(0.5 s · 2^n, 8 s)`, without its jitter; the capture's 1.6 s total fits).
pub const PROVIDER_RETRY_DELAYS_MS: [u64; 2] = [500, 1000];

/// Runs one model step for `job` and ends the run.
pub async fn execute<E: Env>(env: E, config: Arc<ServerConfig>, store: SharedStore, job: RunJob) {
    let oss = config.profile.oss();
    // Step streaming: 0.16.8 calls the model without streaming (PROVENANCE.md "The fake
    // model": "With stream_tokens:false (a3, b2) it made non-streaming chat completion calls").
    let step_mode = oss && !job.stream_tokens && config.provider_api == ProviderFormat::OpenAiChat;
    let mut body = provider_body(config.provider_api, &job);
    if step_mode && let Some(o) = body.as_object_mut() {
        o.insert("stream".into(), json!(false));
        o.remove("stream_options");
    }
    let body = body.to_string();
    let Some(resp) = call_provider(&env, &config, &store, &job, &body).await else {
        return;
    };
    if step_mode {
        return step_stream::step_call(env, config, store, job, resp).await;
    }
    token_stream::translate(env, config, store, job, resp).await;
}

/// The provider call with the SDK's retries of an error status before any output
/// ([`PROVIDER_RETRY_DELAYS_MS`]). `None` when the run ended meanwhile or the call failed (the
/// run has then been failed).
async fn call_provider<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    job: &RunJob,
    body: &str,
) -> Option<hyper::Response<Incoming>> {
    let oss = config.profile.oss();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if is_finished(store, &job.run_id) {
            return None;
        }
        env.observe(Observation::ProviderCall {
            run_id: job.run_id.clone(),
            attempt,
        });
        let req = Request::post(api_path(config.provider_api))
            .header("host", config.provider_addr.as_str())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("valid request");
        let resp = match http::send(
            env,
            &config.provider_addr,
            req,
            config.provider_idle_timeout,
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                provider_failed(
                    env,
                    config,
                    store,
                    job,
                    "llm_error",
                    "An error occurred with the LLM request.",
                    &format!(
                        "INTERNAL_SERVER_ERROR: Network error during {} streaming: {}",
                        vendor(config.provider_api),
                        if oss { String::new() } else { e.to_string() }
                    ),
                );
                return None;
            }
        };
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Some(resp);
        }
        let text = http::read_body(resp.into_body(), 1 << 20)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let retryable = matches!(status, 408 | 409 | 429) || status >= 500;
        if retryable && (attempt as usize) <= PROVIDER_RETRY_DELAYS_MS.len() {
            env.clock()
                .sleep(Duration::from_millis(
                    PROVIDER_RETRY_DELAYS_MS[attempt as usize - 1],
                ))
                .await;
            continue;
        }
        let shown = serde_json::from_str::<Value>(&text)
            .map(|v| py_repr(&v))
            .unwrap_or(text);
        provider_failed(
            env,
            config,
            store,
            job,
            error_type_for(status),
            "An error occurred with the LLM request.",
            &format!(
                "INTERNAL_SERVER_ERROR: {} API error: Error code: {status} - {shown}",
                vendor(config.provider_api)
            ),
        );
        return None;
    }
}

/// A JSON value as Python's `repr` prints the parsed object (captures g_fail500: the error body
/// in the detail is `{'error': {'message': …}}`).
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            if s.contains('\'') && !s.contains('"') {
                format!("\"{s}\"")
            } else {
                format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
            }
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", py_repr(&json!(k)), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The run's `error_type` for a provider error status (Letta's LLM error classes; the names
/// are the client's NON_RETRYABLE_RUN_ERROR_TYPES, letta-protocol.md §3.6).
fn error_type_for(status: u16) -> &'static str {
    match status {
        400 => "llm_bad_request",
        401 => "llm_authentication",
        403 => "llm_permission_denied",
        404 => "llm_not_found",
        422 => "llm_unprocessable_entity",
        429 => "llm_rate_limit",
        _ => "llm_error",
    }
}
