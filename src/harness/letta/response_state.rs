//! `response-state-reused` (docs/invariants.md): every `X-Letta-Response-State` header the
//! client sends is what letta-protocol.md §10.1 says it is: `base64url(JSON {"v":1,
//! "cache_scope":"approval_boundary", "previous_response_id":"<id>"})`, unpadded (RFC 4648 §5,
//! Node's `"base64url"`), naming the `response_id` of a `response_state` chunk the server sent
//! before it. A server reads the header to continue the response it cached; a header it cannot
//! decode, or one naming a response it never offered, loses that continuation without any
//! turn's outcome showing it.
//!
//! The oracle checks the base64url alphabet itself, decodes with the cassettes' strict base64
//! reader (not the client's encoder) and reads the JSON as data, so a wrong encoder in the
//! client model cannot agree with itself. It reads the header as the server
//! received it (`server_response_state_header`), so it judges a real client under `sim serve`
//! as well.
//!
//! The other half of §10.1 is when a header comes: on, and only on, the request that follows
//! the offer when that request is the approval-only continuation of a `requires_approval` stop
//! whose approvals were all decided without a human; any other request clears the offer. That
//! half reads the client's own events (`client_chunk`, `client_acted_on`, `client_decision`,
//! `client_send`), which only the client model reports, so a real client is judged on what its
//! headers say, not on when it sends them.

use crate::harness::invariants::{RESPONSE_STATE_REUSED, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// The one cache scope the client reuses (letta-protocol.md §10.1).
const APPROVAL_BOUNDARY: &str = "approval_boundary";

/// `response-state-reused` over a Letta trace.
pub fn response_state_reused(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = headers_say_what_was_offered(events);
    out.extend(headers_come_when_reuse_is_allowed(events));
    out.sort_by_key(|v| v.event);
    out
}

/// Every header the server received names, in §10.1's form, a response it offered before.
fn headers_say_what_was_offered(events: &[TraceEvent]) -> Vec<Violation> {
    let mut offered: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ServerResponseState { response_id, .. } => offered.push(response_id),
            Observation::ServerResponseStateHeader {
                method,
                path,
                header,
            } => {
                let problem = match names(header) {
                    Err(why) => Some(format!(
                        "{why}; §10.1 gives base64url(JSON {{\"v\":1, \"cache_scope\":\"approval_boundary\", \"previous_response_id\":\"<id>\"}}), unpadded"
                    )),
                    Ok(id) if !offered.contains(&id.as_str()) => Some(format!(
                        "it names previous_response_id {id:?}, which no response_state chunk the server sent before it offered{}",
                        match offered.last() {
                            Some(last) => format!(" (the last offered was {last:?})"),
                            None => " (none was sent)".into(),
                        }
                    )),
                    Ok(_) => None,
                };
                if let Some(problem) = problem {
                    out.push(Violation::at(
                        RESPONSE_STATE_REUSED,
                        i,
                        format!(
                            "{method} {path} carried X-Letta-Response-State: {header}, but {problem} (letta-protocol.md §10.1)"
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// The decision origins of the client's own approval step: its permission rules, a headless
/// ask, an incomplete call. A human's decision, and the denials a recovery or an interrupt makes
/// (stale recovery, interrupt, user cancel), are not the auto-handling §10.1 allows reuse for.
const AUTO_HANDLED: [&str; 3] = ["policy", "headless-ask", "incomplete"];

/// What one client process knows of its offer, between its sends.
#[derive(Default)]
struct Reuse {
    /// A `response_state` chunk reached the client since its previous send.
    offered: bool,
    /// Since the last `requires_approval` stop the client acted on in this turn, with no send
    /// since: `None` while every decision so far was auto-handled, else the first other origin.
    continuation: Option<Option<String>>,
    /// The previous send carried the header, and a shutdown retry resends that same request.
    last_header: bool,
    resend: bool,
}

/// The header comes on, and only on, the first send after an offer that is the approval-only
/// continuation of a `requires_approval` stop none of whose approvals a human decided (§10.1:
/// reuse is allowed only with every approval auto-handled; the cached id is consumed by the
/// next request, which any other request clears). A 503 shutdown retry resends its request,
/// header and all (§3.6).
fn headers_come_when_reuse_is_allowed(events: &[TraceEvent]) -> Vec<Violation> {
    let mut clients: std::collections::BTreeMap<&str, Reuse> = Default::default();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let client = clients.entry(e.host.as_str()).or_default();
        match &e.obs {
            // A turn's first send is never a continuation, so what was offered before it
            // cannot be reused: each turn (each headless process) starts afresh.
            Observation::ClientStarted { .. } | Observation::TurnStart { .. } => {
                *client = Reuse::default();
            }
            Observation::TurnEnd { .. } => client.continuation = None,
            Observation::ClientChunk { message_type, .. } if message_type == "response_state" => {
                client.offered = true;
            }
            Observation::ClientActedOn { stop_reason, .. } => {
                client.continuation = (stop_reason == "requires_approval").then_some(None);
            }
            Observation::ClientDecision { origin, .. }
                if !AUTO_HANDLED.contains(&origin.as_str()) =>
            {
                if let Some(other @ None) = &mut client.continuation {
                    *other = Some(origin.clone());
                }
            }
            Observation::ClientRetry { kind, .. } if kind == "shutdown_503" => {
                client.resend = true;
            }
            Observation::ClientSend {
                items,
                response_state,
                ..
            } => {
                let approval_only =
                    !items.is_empty() && items.split('+').all(|item| item.starts_with("approval["));
                let (expected, why): (bool, String) = if std::mem::take(&mut client.resend) {
                    (
                        client.last_header,
                        "it resends the request a 503 shutdown refused".into(),
                    )
                } else if !client.offered {
                    (
                        false,
                        "no response_state chunk reached the client since its previous send".into(),
                    )
                } else if !approval_only {
                    (false, "it is not approval-only".into())
                } else {
                    match &client.continuation {
                        None => (
                            false,
                            "it does not continue a requires_approval stop of this turn".into(),
                        ),
                        Some(Some(origin)) if origin == "human" => {
                            (false, "a human decided one of the approvals it answers".into())
                        }
                        Some(Some(origin)) => (
                            false,
                            format!("one of the approvals it answers was decided by {origin}, not by the client's own approval step"),
                        ),
                        Some(None) => (
                            true,
                            "it is the approval-only continuation after an offer, every approval decided without a human".into(),
                        ),
                    }
                };
                if *response_state != expected {
                    let carried = if *response_state {
                        "carried"
                    } else {
                        "did not carry"
                    };
                    out.push(Violation::at(
                        RESPONSE_STATE_REUSED,
                        i,
                        format!(
                            "the send ({items}) {carried} X-Letta-Response-State, but {why} (letta-protocol.md §10.1)"
                        ),
                    ));
                }
                client.last_header = *response_state;
                client.offered = false;
                client.continuation = None;
            }
            _ => {}
        }
    }
    out
}

/// The `previous_response_id` a header names, or why it names none.
fn names(header: &str) -> Result<String, String> {
    let bytes = base64url_decode(header)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("it decodes to {:?}, which is not JSON ({e})", lossy(&bytes)))?;
    let Some(object) = value.as_object() else {
        return Err(format!("it decodes to {value}, not a JSON object"));
    };
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    if keys != ["cache_scope", "previous_response_id", "v"] {
        return Err(format!(
            "it decodes to {value}, whose keys are not exactly v, cache_scope and previous_response_id"
        ));
    }
    if object["v"] != serde_json::json!(1) || object["cache_scope"] != APPROVAL_BOUNDARY {
        return Err(format!(
            "it decodes to {value}, not version 1 of scope approval_boundary"
        ));
    }
    match object["previous_response_id"].as_str() {
        Some(id) if !id.is_empty() => Ok(id.to_string()),
        _ => Err(format!(
            "it decodes to {value}, whose previous_response_id is not a non-empty string"
        )),
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(80).collect()
}

/// Unpadded base64url (RFC 4648 §5) decoded: every character from `A–Z a–z 0–9 - _`, no `=`,
/// and a length whose last group holds two, three or four characters. The bytes come from the
/// cassettes' strict standard-base64 reader, given the text with the standard alphabet and its
/// padding restored.
fn base64url_decode(text: &str) -> Result<Vec<u8>, String> {
    if let Some((at, c)) = text
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "it is not unpadded base64url: {c:?} at character {at} is not in A-Z a-z 0-9 - _"
        ));
    }
    if text.len() % 4 == 1 {
        return Err(format!(
            "it is not base64url: {} characters leave one over",
            text.len()
        ));
    }
    let mut standard = text.replace('-', "+").replace('_', "/");
    while !standard.len().is_multiple_of(4) {
        standard.push('=');
    }
    crate::cassette::base64_decode(&standard)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(obs: Observation) -> TraceEvent {
        TraceEvent {
            t_ms: 0,
            host: "server".into(),
            obs,
        }
    }

    fn offer(id: &str) -> TraceEvent {
        ev(Observation::ServerResponseState {
            run_id: "run-1".into(),
            response_id: id.into(),
        })
    }

    fn header(value: &str) -> TraceEvent {
        ev(Observation::ServerResponseStateHeader {
            method: "POST".into(),
            path: "/v1/conversations/conv-1/messages".into(),
            header: value.into(),
        })
    }

    fn messages(trace: &[TraceEvent]) -> Vec<String> {
        response_state_reused(trace)
            .into_iter()
            .map(|v| v.message)
            .collect()
    }

    /// `{"v":1,"cache_scope":"approval_boundary","previous_response_id":"resp-1"}`, encoded by
    /// hand (RFC 4648 §5, unpadded).
    const RESP_1: &str = "eyJ2IjoxLCJjYWNoZV9zY29wZSI6ImFwcHJvdmFsX2JvdW5kYXJ5IiwicHJldmlvdXNfcmVzcG9uc2VfaWQiOiJyZXNwLTEifQ";

    #[test]
    fn a_header_naming_an_offered_response_passes() {
        assert_eq!(
            messages(&[offer("resp-1"), header(RESP_1)]),
            Vec::<String>::new()
        );
        assert_eq!(messages(&[offer("resp-0")]), Vec::<String>::new());
    }

    #[test]
    fn each_broken_header_says_what_is_wrong() {
        let padded = format!("{RESP_1}==");
        let found = messages(&[
            offer("resp-1"),
            header(&padded),
            header("eyJ2/joxfQ"),
            header("eyJ2IjoyfQ"),
            header(RESP_1),
        ]);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found[0].contains("'=' at character 98 is not in A-Z a-z 0-9 - _"),
            "{}",
            found[0]
        );
        assert!(found[1].contains("'/' at character 4"), "{}", found[1]);
        assert!(
            found[2].contains("it decodes to {\"v\":2}, whose keys are not exactly"),
            "{}",
            found[2]
        );
        let unoffered = messages(&[offer("resp-9"), header(RESP_1)]);
        assert_eq!(
            unoffered,
            [format!(
                "POST /v1/conversations/conv-1/messages carried X-Letta-Response-State: {RESP_1}, but it names previous_response_id \"resp-1\", which no response_state chunk the server sent before it offered (the last offered was \"resp-9\") (letta-protocol.md §10.1)"
            )]
        );
    }

    /// The oracle's reader agrees with the client model's encoder, byte for byte.
    #[test]
    fn the_reader_reads_what_base64url_writes() {
        use crate::model::letta::client::response_state::{base64url, header_value};
        assert_eq!(header_value("resp-1"), RESP_1);
        for n in 0..40u8 {
            let bytes: Vec<u8> = (0..n).map(|k| k.wrapping_mul(37).wrapping_add(n)).collect();
            assert_eq!(base64url_decode(&base64url(&bytes)).unwrap(), bytes);
        }
    }

    fn client(obs: Observation) -> TraceEvent {
        TraceEvent {
            t_ms: 0,
            host: "client".into(),
            obs,
        }
    }

    fn chunk() -> TraceEvent {
        client(Observation::ClientChunk {
            run_id: Some("run-1".into()),
            seq_id: Some(5),
            message_type: "response_state".into(),
        })
    }

    fn stop() -> TraceEvent {
        client(Observation::ClientActedOn {
            run_id: Some("run-1".into()),
            stop_reason: "requires_approval".into(),
            approvals: vec!["toolu_1".into()],
        })
    }

    fn decided(origin: &str) -> TraceEvent {
        client(Observation::ClientDecision {
            tool_call_id: "toolu_1".into(),
            tool: "get_weather".into(),
            decision: "allow".into(),
            origin: origin.into(),
        })
    }

    fn send(items: &str, response_state: bool) -> TraceEvent {
        client(Observation::ClientSend {
            turn: 1,
            method: "POST".into(),
            path: "/v1/conversations/default/messages".into(),
            items: items.into(),
            otids: vec!["otid-1".into()],
            response_state,
        })
    }

    fn shutdown_retry() -> TraceEvent {
        client(Observation::ClientRetry {
            kind: "shutdown_503".into(),
            attempt: 1,
            delay_ms: 1000,
            detail: String::new(),
            retry_after_ms: None,
        })
    }

    const CONTINUATION: &str = "approval[tool:toolu_1]";

    #[test]
    fn the_auto_approved_continuation_after_an_offer_carries_the_header() {
        let ok = [
            send("user", false),
            chunk(),
            stop(),
            decided("policy"),
            send(CONTINUATION, true),
        ];
        assert_eq!(messages(&ok), Vec::<String>::new());
        let mut never = ok.clone();
        never[4] = send(CONTINUATION, false);
        assert_eq!(
            messages(&never),
            [
                "the send (approval[tool:toolu_1]) did not carry X-Letta-Response-State, but it is the approval-only continuation after an offer, every approval decided without a human (letta-protocol.md §10.1)"
            ]
        );
    }

    #[test]
    fn a_human_a_recovery_a_message_or_no_offer_means_no_header() {
        let human = [chunk(), stop(), decided("human"), send(CONTINUATION, true)];
        assert!(
            messages(&human)[0].contains("but a human decided one of the approvals it answers")
        );
        let message = [
            chunk(),
            stop(),
            decided("policy"),
            send("approval[tool:toolu_1]+user", true),
        ];
        assert!(messages(&message)[0].contains("but it is not approval-only"));
        // The approval-pending recovery denies what its drain stopped on as stale: not the
        // client's approval step, so no reuse.
        let recovered = [
            chunk(),
            stop(),
            decided("stale-recovery"),
            send(CONTINUATION, true),
        ];
        assert!(
            messages(&recovered)[0].contains(
                "one of the approvals it answers was decided by stale-recovery, not by the client's own approval step"
            ),
            "{:?}",
            messages(&recovered)
        );
        assert_eq!(
            messages(&[
                chunk(),
                stop(),
                decided("stale-recovery"),
                send(CONTINUATION, false)
            ]),
            Vec::<String>::new()
        );
        let unoffered = [stop(), decided("policy"), send(CONTINUATION, true)];
        assert!(
            messages(&unoffered)[0]
                .contains("but no response_state chunk reached the client since its previous send")
        );
        // The offer is consumed by the continuation: a busy retry of it goes without.
        let retried = [
            chunk(),
            stop(),
            decided("policy"),
            send(CONTINUATION, true),
            send(CONTINUATION, true),
        ];
        assert_eq!(messages(&retried).len(), 1);
        assert!(messages(&retried)[0].contains("no response_state chunk reached the client"));
    }

    #[test]
    fn a_shutdown_retry_resends_the_request_header_and_all() {
        let resent = [
            chunk(),
            stop(),
            decided("policy"),
            send(CONTINUATION, true),
            shutdown_retry(),
            send(CONTINUATION, true),
        ];
        assert_eq!(messages(&resent), Vec::<String>::new());
        let mut dropped = resent.clone();
        dropped[5] = send(CONTINUATION, false);
        assert!(messages(&dropped)[0].contains("did not carry X-Letta-Response-State, but it resends the request a 503 shutdown refused"));
    }

    #[test]
    fn a_new_turn_or_process_starts_with_nothing_offered() {
        let next_turn = [
            chunk(),
            stop(),
            client(Observation::TurnEnd {
                turn: 1,
                outcome: "paused".into(),
            }),
            client(Observation::TurnStart {
                turn: 2,
                text: "go on".into(),
            }),
            send(CONTINUATION, false),
        ];
        assert_eq!(messages(&next_turn), Vec::<String>::new());
    }
}
