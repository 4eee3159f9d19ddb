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

use crate::harness::invariants::{RESPONSE_STATE_REUSED, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// The one cache scope the client reuses (letta-protocol.md §10.1).
const APPROVAL_BOUNDARY: &str = "approval_boundary";

/// `response-state-reused` over a Letta trace.
pub fn response_state_reused(events: &[TraceEvent]) -> Vec<Violation> {
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
}
