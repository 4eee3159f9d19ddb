//! The judge of an agent-loop real-client run (docs/real-client.md, "The agent loop"): what can
//! be checked from the provider's side of a coding agent such as the Kimi Code CLI.
//!
//! `loop-envelope` is read off the provider's own records: the tool calls of each answer are
//! decoded from the bytes the provider really sent (so a cut or reset stream shows only what
//! left the socket), and the results from the body of the next model call. `budget-respected`
//! holds the client to the waits it announces on stdout (`turn.step.retrying`), in real time
//! with [`TOLERANCE_MS`], and to the classes of kimi-loop.md §6. `turn-terminates` and
//! `cli-result` are the process's exit.

use serde_json::Value;

use super::judge::{CLI_RESULT, Finding, TOLERANCE_MS};
use super::launch::CliRun;
use crate::harness::faults::Fault;
use crate::harness::invariants::{BUDGET_RESPECTED, LOOP_ENVELOPE, TURN_TERMINATES};
use crate::model::port::inject::StreamFault;
use crate::wire::provider::{ProviderDecoder, ProviderEvent, StreamFormat, ToolCallAccumulator};
use crate::wire::sse::SseDecoder;

/// The invariants an agent-loop real-client run is judged by, in report order.
pub const CHECKED: [&str; 4] = [LOOP_ENVELOPE, BUDGET_RESPECTED, TURN_TERMINATES, CLI_RESULT];

/// The texts the loop's host writes for a call whose own result it no longer has
/// (kimi-loop.md §8.3): a call answered with one of them lost its result.
pub const LOST_RESULT_TEXTS: [&str; 2] = [
    "Tool execution was interrupted before its result was recorded.",
    "Tool result is not available in the current context.",
];

/// The loop's retry budget: attempts per step (kimi-loop.md §6 `DEFAULT_MAX_RETRY_ATTEMPTS`).
pub const MAX_ATTEMPTS: u64 = 10;

/// One model call as the provider saw it.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// 1-based position among all requests (model calls and the rest).
    pub n: u64,
    /// The provider's call number (0-based, as the plan's faults count).
    pub call: Option<u32>,
    /// Real ms since the provider started, when its response head was ready.
    pub t_ms: u64,
    pub path: String,
    pub status: u16,
    pub body: Value,
    /// The response bytes the provider wrote.
    pub served: Vec<u8>,
}

/// A tool call or result as a request carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Call { id: String, name: String },
    Result { id: String, text: String },
}

/// What an answer delivered: its complete tool calls (id, name) in provider order, whether it
/// reached its stop, and the first frame that would not decode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub calls: Vec<(String, String)>,
    pub stopped: bool,
    pub undecodable: Option<String>,
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The tool calls and results a model call's request body carries, in message order.
pub fn items(format: StreamFormat, body: &Value) -> Vec<Item> {
    let mut out = Vec::new();
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match format {
        StreamFormat::Anthropic => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for b in m["content"].as_array().into_iter().flatten() {
                    match b["type"].as_str() {
                        Some("tool_use") => out.push(Item::Call {
                            id: s(&b["id"]),
                            name: s(&b["name"]),
                        }),
                        Some("tool_result") => out.push(Item::Result {
                            id: s(&b["tool_use_id"]),
                            text: text_of(&b["content"]),
                        }),
                        _ => {}
                    }
                }
            }
        }
        StreamFormat::OpenAiResponses => {
            for i in body["input"].as_array().into_iter().flatten() {
                match i["type"].as_str() {
                    Some("function_call") => out.push(Item::Call {
                        id: s(&i["call_id"]),
                        name: s(&i["name"]),
                    }),
                    Some("function_call_output") => out.push(Item::Result {
                        id: s(&i["call_id"]),
                        text: text_of(&i["output"]),
                    }),
                    _ => {}
                }
            }
        }
        _ => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    out.push(Item::Call {
                        id: s(&c["id"]),
                        name: s(&c["function"]["name"]),
                    });
                }
                if m["role"] == "tool" {
                    out.push(Item::Result {
                        id: s(&m["tool_call_id"]),
                        text: text_of(&m["content"]),
                    });
                }
            }
        }
    }
    out
}

/// Decodes the bytes of an answer: the calls it completed (each once, by id), whether it
/// reached its stop reason, and the first frame it could not decode, if one. A frame that does
/// not decode is skipped and decoding goes on, as a tolerant client's would: a duplicated
/// `content_block_start` is refused by the strict decoder, yet the calls around it were served
/// (and a client may well run them, which the next request then shows).
pub fn answer(format: StreamFormat, served: &[u8]) -> Answer {
    let mut sse = SseDecoder::new();
    let mut frames = sse.push(served);
    frames.extend(sse.finish());
    let mut dec = ProviderDecoder::new(format);
    let mut events: Vec<ProviderEvent> = Vec::new();
    let mut undecodable = None;
    for f in &frames {
        match dec.on_frame(f) {
            Ok(evs) => events.extend(evs),
            Err(e) => {
                undecodable.get_or_insert(e.to_string());
            }
        }
    }
    events.extend(dec.finish());
    let mut calls: Vec<(String, String)> = Vec::new();
    for c in ToolCallAccumulator::from_events(&events).complete_calls() {
        if !calls.iter().any(|(id, _)| *id == c.id) {
            calls.push((c.id.clone(), c.name.clone()));
        }
    }
    Answer {
        calls,
        stopped: events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Stop { .. })),
        undecodable,
    }
}

/// The plan's stream fault on provider call `call`, if one.
fn stream_fault_on(plan: &[Fault], call: Option<u32>) -> Option<StreamFault> {
    plan.iter().find_map(|f| match f {
        Fault::ProviderStream {
            call: c, action, ..
        } if Some(*c) == call => Some(*action),
        _ => None,
    })
}

/// The plan's `Retry-After` (ms) on provider call `call`, if its error carries one.
fn retry_after_on(plan: &[Fault], call: Option<u32>) -> Option<u64> {
    plan.iter().find_map(|f| match f {
        Fault::ProviderError {
            call: c,
            retry_after_s: Some(s),
            ..
        } if Some(*c) == call => Some(s * 1000),
        _ => None,
    })
}

fn finding(invariant: &str, message: String, t_ms: Option<u64>) -> Finding {
    Finding {
        invariant: invariant.to_string(),
        message,
        t_ms,
    }
}

fn ids(calls: &[(String, String)]) -> String {
    calls
        .iter()
        .map(|(id, name)| format!("{name} {id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `loop-envelope` from the provider's side. For each answer with complete tool calls, the next
/// model call either takes it as a step — then its request lists exactly those calls, in
/// provider order, and answers each once, in provider order, with a result of its own — or
/// carries none of them, which is a retry, and is right only when the answer was faulted (a
/// planned stream fault, or it never reached its stop). A call of an answer cut, reset or
/// stalled before its end is never run. A client that says its turn succeeded leaves no
/// complete answer's calls unanswered. And no request answers a call twice.
pub fn loop_envelope(
    format: StreamFormat,
    calls: &[ModelCall],
    plan: &[Fault],
    success: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (k, c) in calls.iter().enumerate() {
        let req = items(format, &c.body);
        // None twice, in any request.
        let mut seen: Vec<&str> = Vec::new();
        for i in &req {
            if let Item::Result { id, .. } = i {
                if seen.contains(&id.as_str()) {
                    out.push(finding(
                        LOOP_ENVELOPE,
                        format!("request #{}: tool call {id} is answered twice", c.n),
                        Some(c.t_ms),
                    ));
                }
                seen.push(id);
            }
        }
        if c.status != 200 {
            continue;
        }
        let a = answer(format, &c.served);
        if a.calls.is_empty() {
            continue;
        }
        let fault = stream_fault_on(plan, c.call);
        let faulted = fault.is_some() || !a.stopped || a.undecodable.is_some();
        let unfinished = matches!(
            fault,
            Some(StreamFault::Reset | StreamFault::CutInside | StreamFault::Stall)
        );
        let Some(next) = calls.get(k + 1) else {
            if success && !faulted {
                out.push(finding(
                    LOOP_ENVELOPE,
                    format!(
                        "the client reported success, but the tool calls of answer #{} ({}) were never answered: no request followed",
                        c.n,
                        ids(&a.calls)
                    ),
                    Some(c.t_ms),
                ));
            }
            continue;
        };
        let items = items(format, &next.body);
        let want: Vec<&str> = a.calls.iter().map(|(id, _)| id.as_str()).collect();
        let listed: Vec<&str> = items
            .iter()
            .filter_map(|i| match i {
                Item::Call { id, .. } if want.contains(&id.as_str()) => Some(id.as_str()),
                _ => None,
            })
            .collect();
        let results: Vec<(&str, &str)> = items
            .iter()
            .filter_map(|i| match i {
                Item::Result { id, text } if want.contains(&id.as_str()) => {
                    Some((id.as_str(), text.as_str()))
                }
                _ => None,
            })
            .collect();
        if listed.is_empty() && results.is_empty() {
            if !faulted {
                out.push(finding(
                    LOOP_ENVELOPE,
                    format!(
                        "request #{} answers none of the tool calls of answer #{} ({}), a complete answer with no fault",
                        next.n,
                        c.n,
                        ids(&a.calls)
                    ),
                    Some(next.t_ms),
                ));
            }
            continue;
        }
        if unfinished {
            out.push(finding(
                LOOP_ENVELOPE,
                format!(
                    "request #{} carries tool calls of answer #{}, whose stream was {} before its end: an unfinished answer ran a tool",
                    next.n,
                    c.n,
                    fault.map(StreamFault::as_str).unwrap_or_default()
                ),
                Some(next.t_ms),
            ));
        }
        if listed != want {
            out.push(finding(
                LOOP_ENVELOPE,
                format!(
                    "request #{} lists the calls of answer #{} as [{}], not in provider order [{}]",
                    next.n,
                    c.n,
                    listed.join(", "),
                    want.join(", ")
                ),
                Some(next.t_ms),
            ));
        }
        for (id, name) in &a.calls {
            let mine: Vec<&str> = results
                .iter()
                .filter(|(r, _)| r == id)
                .map(|(_, t)| *t)
                .collect();
            match mine.as_slice() {
                [] => out.push(finding(
                    LOOP_ENVELOPE,
                    format!(
                        "request #{}: {name} call {id} of answer #{} has no result",
                        next.n, c.n
                    ),
                    Some(next.t_ms),
                )),
                [text] => {
                    let body = text
                        .strip_prefix("<system>ERROR: Tool execution failed.</system>\n")
                        .unwrap_or(text);
                    if let Some(lost) = LOST_RESULT_TEXTS.iter().find(|l| body.starts_with(**l)) {
                        out.push(finding(
                            LOOP_ENVELOPE,
                            format!(
                                "request #{}: {name} call {id} of answer #{} lost its result: it is answered with the host's {lost:?}",
                                next.n, c.n
                            ),
                            Some(next.t_ms),
                        ));
                    }
                }
                _ => {}
            }
        }
        let mut order: Vec<&str> = Vec::new();
        for (id, _) in &results {
            if !order.contains(id) {
                order.push(id);
            }
        }
        let expected: Vec<&str> = want
            .iter()
            .copied()
            .filter(|id| order.contains(id))
            .collect();
        if order != expected {
            out.push(finding(
                LOOP_ENVELOPE,
                format!(
                    "request #{} answers the calls of answer #{} in the order [{}], not in provider order [{}]",
                    next.n,
                    c.n,
                    order.join(", "),
                    expected.join(", ")
                ),
                Some(next.t_ms),
            ));
        }
    }
    out
}

/// The nominal base of backoff step `attempt` (1-based): `min(500·2^(attempt-1), 32000)`.
pub fn backoff_base_ms(attempt: u64) -> u64 {
    (500u64 << attempt.saturating_sub(1).min(16)).min(32_000)
}

/// `budget-respected` on the client's announced waits: each `turn.step.retrying` event's delay
/// is the failed answer's `Retry-After` when it carried one, else on the backoff ramp with its
/// 25 % jitter (`base ≤ d ≤ 1.25·base`, kimi-loop.md §6); the next model call comes no sooner
/// than the delay after the announcement (less [`TOLERANCE_MS`]); and no step is tried more
/// than [`MAX_ATTEMPTS`] times.
pub fn budget(calls: &[ModelCall], cli: &CliRun, plan: &[Fault]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (t, e) in cli.events() {
        if e["type"] != "turn.step.retrying" {
            continue;
        }
        let attempt = e["failed_attempt"].as_u64().unwrap_or(0);
        let Some(delay) = e["delay_ms"].as_f64() else {
            out.push(finding(
                BUDGET_RESPECTED,
                format!("a retry announced without a delay: {e}"),
                Some(t),
            ));
            continue;
        };
        if attempt >= MAX_ATTEMPTS {
            out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "attempt {} announced: more than {MAX_ATTEMPTS} attempts",
                    attempt + 1
                ),
                Some(t),
            ));
        }
        // The failed attempt: the last model call answered before the announcement.
        let failed = calls.iter().rev().find(|c| c.t_ms <= t);
        let retry_after = failed.and_then(|c| retry_after_on(plan, c.call));
        match retry_after {
            Some(ra) if (delay - ra as f64).abs() > 1.0 => out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "retry {attempt} waits {delay} ms, but the failed answer said Retry-After {} s",
                    ra / 1000
                ),
                Some(t),
            )),
            Some(_) => {}
            None => {
                let base = backoff_base_ms(attempt) as f64;
                if delay + 1.0 < base || delay > base * 1.25 + 1.0 {
                    out.push(finding(
                        BUDGET_RESPECTED,
                        format!(
                            "retry {attempt} waits {delay} ms, off its backoff step [{base}, {}] ms",
                            base * 1.25
                        ),
                        Some(t),
                    ));
                }
            }
        }
        if let Some(next) = calls.iter().find(|c| c.t_ms > t)
            && (next.t_ms as f64) + (TOLERANCE_MS as f64) < t as f64 + delay
        {
            out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "retry {attempt} announced a {delay} ms wait at {t} ms, but request #{} came at {} ms",
                    next.n, next.t_ms
                ),
                Some(next.t_ms),
            ));
        }
    }
    out
}

/// The client's outcome in the report's terms: `success` (exit 0), `error` (another exit
/// code), `none` (killed, or ended by a signal).
pub fn outcome(cli: &CliRun) -> String {
    match cli.code {
        _ if cli.killed => "none".into(),
        Some(0) => "success".into(),
        Some(_) => "error".into(),
        None => "none".into(),
    }
}

/// `turn-terminates`: the process exited within its budget.
pub fn terminates(cli: &CliRun, budget_ms: u64) -> Vec<Finding> {
    if cli.killed {
        vec![finding(
            TURN_TERMINATES,
            format!("the client had not exited after {budget_ms} ms; its process group was killed"),
            Some(cli.elapsed_ms),
        )]
    } else {
        Vec::new()
    }
}

/// `cli-result`: the client stated an outcome: exit 0, or a non-zero exit that says why on
/// stderr or in a last stdout event. A signal is no outcome.
pub fn cli_result(cli: &CliRun) -> Vec<Finding> {
    match cli.code {
        _ if cli.killed => Vec::new(),
        None => vec![finding(
            CLI_RESULT,
            "the client ended by a signal, stating no outcome".into(),
            Some(cli.elapsed_ms),
        )],
        Some(0) => Vec::new(),
        Some(code) => {
            let said = !cli.stderr.trim().is_empty() || !cli.stdout.is_empty();
            if said {
                Vec::new()
            } else {
                vec![finding(
                    CLI_RESULT,
                    format!("the client exited {code} without a word on stdout or stderr"),
                    Some(cli.elapsed_ms),
                )]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn anthropic_answer(calls: &[(&str, &str)], stop: bool) -> Vec<u8> {
        let mut s = String::from(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n",
        );
        for (i, (id, name)) in calls.iter().enumerate() {
            s += &format!(
                "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"{name}\",\"input\":{{}}}}}}\n\n"
            );
            s += &format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{}}\"}}}}\n\n"
            );
            s += &format!(
                "event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{i}}}\n\n"
            );
        }
        if stop {
            s += "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\n";
            s += "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        }
        s.into_bytes()
    }

    fn request(n: u64, results: &[(&str, &str)], calls: &[&str]) -> ModelCall {
        let uses: Vec<Value> = calls
            .iter()
            .map(|id| json!({"type": "tool_use", "id": id, "name": "Read", "input": {}}))
            .collect();
        let res: Vec<Value> = results
            .iter()
            .map(|(id, t)| json!({"type": "tool_result", "tool_use_id": id, "content": t}))
            .collect();
        ModelCall {
            n,
            call: Some(n as u32 - 1),
            t_ms: n * 100,
            path: "/v1/messages".into(),
            status: 200,
            body: json!({"messages": [
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": uses},
                {"role": "user", "content": res},
            ]}),
            served: Vec::new(),
        }
    }

    fn judge(next: ModelCall, stop: bool, plan: &[Fault]) -> Vec<String> {
        let mut first = request(1, &[], &[]);
        first.body = json!({"messages": [{"role": "user", "content": "go"}]});
        first.served = anthropic_answer(&[("a", "Read"), ("b", "Read")], stop);
        loop_envelope(StreamFormat::Anthropic, &[first, next], plan, true)
            .into_iter()
            .map(|f| f.message)
            .collect()
    }

    #[test]
    fn a_batch_answered_in_order_once_passes() {
        let next = request(2, &[("a", "x"), ("b", "y")], &["a", "b"]);
        assert_eq!(judge(next, true, &[]), Vec::<String>::new());
    }

    #[test]
    fn a_dropped_result_a_second_answer_and_a_reordering_are_caught() {
        let dropped = judge(request(2, &[("a", "x")], &["a", "b"]), true, &[]);
        assert!(
            dropped[0].contains("call b of answer #1 has no result"),
            "{dropped:?}"
        );
        let twice = judge(
            request(2, &[("a", "x"), ("a", "x"), ("b", "y")], &["a", "b"]),
            true,
            &[],
        );
        assert!(twice[0].contains("answered twice"), "{twice:?}");
        let swapped = judge(
            request(2, &[("b", "y"), ("a", "x")], &["b", "a"]),
            true,
            &[],
        );
        assert_eq!(swapped.len(), 2, "{swapped:?}");
        assert!(swapped[0].contains("not in provider order [a, b]"));
        let lost = judge(
            request(
                2,
                &[
                    ("a", "x"),
                    (
                        "b",
                        "Tool execution was interrupted before its result was recorded. Do not assume the tool completed successfully.",
                    ),
                ],
                &["a", "b"],
            ),
            true,
            &[],
        );
        assert!(lost[0].contains("lost its result"), "{lost:?}");
    }

    #[test]
    fn a_duplicated_block_start_still_shows_every_call_it_served() {
        let once = anthropic_answer(&[("a", "Read"), ("b", "Read")], true);
        let text = String::from_utf8(once).unwrap();
        let start_b = text
            .split("\n\n")
            .find(|f| f.contains("content_block_start") && f.contains("\"b\""))
            .unwrap()
            .to_string();
        let twice = text.replacen(&start_b, &format!("{start_b}\n\n{start_b}"), 1);
        let a = answer(StreamFormat::Anthropic, twice.as_bytes());
        assert!(a.undecodable.is_some(), "{a:?}");
        assert_eq!(
            a.calls,
            [
                ("a".to_string(), "Read".to_string()),
                ("b".to_string(), "Read".to_string())
            ]
        );
        let mut first = request(1, &[], &[]);
        first.served = twice.into_bytes();
        let lost = request(
            2,
            &[
                ("a", "x"),
                (
                    "b",
                    "Tool execution was interrupted before its result was recorded.",
                ),
            ],
            &["a", "b"],
        );
        let f = loop_envelope(StreamFormat::Anthropic, &[first, lost], &[], true);
        assert!(
            f[0].message.contains("call b of answer #1 lost its result"),
            "{f:?}"
        );
    }

    #[test]
    fn a_retry_is_right_only_after_a_faulted_answer() {
        let retry = request(2, &[], &[]);
        let clean = judge(retry.clone(), true, &[]);
        assert!(clean[0].contains("answers none"), "{clean:?}");
        assert_eq!(judge(retry.clone(), false, &[]), Vec::<String>::new());
        let cut = Fault::ProviderStream {
            call: 0,
            frame: 9,
            action: StreamFault::CutInside,
        };
        assert_eq!(
            judge(retry, true, std::slice::from_ref(&cut)),
            Vec::<String>::new()
        );
        let ran = judge(
            request(2, &[("a", "x"), ("b", "y")], &["a", "b"]),
            true,
            &[cut],
        );
        assert!(
            ran[0].contains("an unfinished answer ran a tool"),
            "{ran:?}"
        );
    }

    #[test]
    fn openai_chat_requests_read_calls_and_results() {
        let body = json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]});
        assert_eq!(
            items(StreamFormat::OpenAiChat, &body),
            [
                Item::Call {
                    id: "c1".into(),
                    name: "Read".into()
                },
                Item::Result {
                    id: "c1".into(),
                    text: "ok".into()
                }
            ]
        );
    }

    #[test]
    fn the_backoff_ramp_doubles_to_its_cap() {
        assert_eq!(backoff_base_ms(1), 500);
        assert_eq!(backoff_base_ms(2), 1000);
        assert_eq!(backoff_base_ms(7), 32_000);
        assert_eq!(backoff_base_ms(10), 32_000);
    }
}
