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
mod pressure;
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
use super::compact::is_context_overflow;
use super::compaction::{OVERFLOW_COMPACTIONS_PER_TURN, Trigger};
use super::{Profile, ServerConfig, SharedStore};
use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::Observation;
use crate::model::provider::request_path;
use crate::wire::provider::ProviderFormat;

/// The provider SDK's automatic retries of an error status before any output: 2 retries
/// (3 calls: captures/letta_server g_fail500, "3 (Letta retried twice)"), after 0.5 s and 1 s
/// (the OpenAI SDK's `min(0.5 s · 2^n, 8 s)`, without its jitter; the capture's 1.6 s total fits).
pub const PROVIDER_RETRY_DELAYS_MS: [u64; 2] = [500, 1000];

/// Runs one model step for `job` and ends the run: the preflight compaction check, the model
/// call (compacting and retrying on a context overflow in the local profile, at most
/// [`OVERFLOW_COMPACTIONS_PER_TURN`] times, §7.7), the translation of its answer.
pub async fn execute<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    mut job: RunJob,
) {
    let oss = config.profile.oss();
    // Step streaming: 0.16.8 calls the model without streaming (PROVENANCE.md "The fake
    // model": "With stream_tokens:false (a3, b2) it made non-streaming chat completion calls").
    let step_mode = oss && !job.stream_tokens && config.provider_api == ProviderFormat::OpenAiChat;
    if !pressure::preflight(&env, &config, &store, &mut job).await {
        return;
    }
    let mut overflow_compactions = 0;
    let resp = loop {
        let mut body = provider_body(config.provider_api, &job);
        if step_mode && let Some(o) = body.as_object_mut() {
            o.insert("stream".into(), json!(false));
            o.remove("stream_options");
        }
        let body = body.to_string();
        let compact_on_overflow = config.profile == Profile::Local
            && overflow_compactions < OVERFLOW_COMPACTIONS_PER_TURN;
        match call_provider(&env, &config, &store, &job, &body, compact_on_overflow).await {
            Call::Answered(resp) => break resp,
            Call::Ended => return,
            Call::Overflow => {
                overflow_compactions += 1;
                let trigger = Trigger::ContextWindowOverflow;
                if !pressure::compact_in_run(&env, &config, &store, &mut job, trigger).await {
                    return;
                }
            }
        }
    };
    if step_mode {
        return step_stream::step_call(env, config, store, job, resp).await;
    }
    token_stream::translate(env, config, store, job, resp).await;
}

/// How a provider call came back.
enum Call {
    Answered(hyper::Response<Incoming>),
    /// The run ended meanwhile, or the call failed and the run has been failed.
    Ended,
    /// The provider refused the request as too long, and the caller compacts (§7.7).
    Overflow,
}

/// The provider call with the SDK's retries of an error status before any output
/// ([`PROVIDER_RETRY_DELAYS_MS`]). With `compact_on_overflow`, an error whose body carries a
/// context-overflow marker is handed back instead of failing the run.
async fn call_provider<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    job: &RunJob,
    body: &str,
    compact_on_overflow: bool,
) -> Call {
    let oss = config.profile.oss();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if is_finished(store, &job.run_id) {
            return Call::Ended;
        }
        env.observe(Observation::ProviderCall {
            run_id: job.run_id.clone(),
            attempt,
        });
        let req = Request::post(request_path(config.provider_api, &job.model))
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
                return Call::Ended;
            }
        };
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Call::Answered(resp);
        }
        let text = http::read_body(resp.into_body(), 1 << 20)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if compact_on_overflow && is_context_overflow(&text) {
            env.observe(Observation::ProviderResult {
                run_id: job.run_id.clone(),
                outcome: format!("context overflow: HTTP {status}"),
            });
            return Call::Overflow;
        }
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
        return Call::Ended;
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
            // Single quotes unless the text holds a single quote and no double quote; either
            // way a backslash and the line and tab controls are escaped, as `repr` does.
            let escaped = s
                .replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('\r', "\\r")
                .replace('\t', "\\t");
            if s.contains('\'') && !s.contains('"') {
                format!("\"{escaped}\"")
            } else {
                format!("'{}'", escaped.replace('\'', "\\'"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's `repr` of a parsed error body, as Letta 0.16.8 prints it in a run's error
    /// detail (captures g_fail500: `{'error': {'message': 'fake upstream exploded (FAIL500)', …}}`).
    #[test]
    fn py_repr_quotes_and_escapes_as_python_does() {
        let body = json!({"error": {"message": "fake upstream exploded (FAIL500)"}});
        assert_eq!(
            py_repr(&body),
            "{'error': {'message': 'fake upstream exploded (FAIL500)'}}"
        );
        assert_eq!(
            py_repr(&json!([1, true, false, null])),
            "[1, True, False, None]"
        );
        // repr("You've hit the limit"): double quotes, nothing escaped.
        assert_eq!(
            py_repr(&json!("You've hit the limit")),
            r#""You've hit the limit""#
        );
        // repr('it\'s "x"'): both quotes, so single quotes and the single one escaped.
        assert_eq!(py_repr(&json!(r#"it's "x""#)), r#"'it\'s "x"'"#);
        // repr('a\\b\nc') and repr("it's\t\\"): backslashes and controls escaped either way.
        assert_eq!(py_repr(&json!("a\\b\nc")), r"'a\\b\nc'");
        assert_eq!(py_repr(&json!("it's\t\\")), r#""it's\t\\""#);
    }
}
