//! Invariants checked on a replayed world, on top of the comparison with the recording.
//!
//! `stream-stays-in-conversation`: a stream that answers a send on conversation A never
//! carries a run of conversation B. Letta 0.16.8 breaks it: its request-token dedupe is global,
//! so an otid reused on another conversation re-attaches the send to the other conversation's
//! run and streams it (captures/letta_e2e PROVENANCE d3x; docs/findings.md
//! #dedupe-crosses-conversations). The runs' conversations come from the server's
//! `run_started` events.

use std::collections::BTreeMap;

use super::normalize::ids_in;
use super::server::{ReplayRequest, WorldOutput};
use crate::model::port::observe::Observation;

/// The invariant's id (docs/invariants.md).
pub use crate::harness::invariants::STREAM_STAYS_IN_CONVERSATION;

/// The conversation a send names: `/v1/conversations/{id}/messages`.
fn send_conversation<'a>(method: &str, path: &'a str) -> Option<&'a str> {
    let rest = path.strip_prefix("/v1/conversations/")?;
    let (conv, tail) = rest.split_once('/')?;
    (method == "POST" && tail == "messages").then_some(conv)
}

/// Every send whose stream carried a run of another conversation: (request name, message).
pub fn stream_stays_in_conversation(
    requests: &[ReplayRequest],
    out: &WorldOutput,
) -> Vec<(String, String)> {
    let runs: BTreeMap<&str, &str> = out
        .trace
        .iter()
        .filter_map(|e| match &e.obs {
            Observation::RunStarted {
                run_id,
                conversation_id,
                ..
            } => Some((run_id.as_str(), conversation_id.as_str())),
            _ => None,
        })
        .collect();
    let mut found = Vec::new();
    for (r, a) in requests.iter().zip(&out.answers) {
        let Some(a) = a else { continue };
        let Some(conv) = send_conversation(&r.method, &a.path) else {
            continue;
        };
        if !a.content_type.starts_with("text/event-stream") {
            continue;
        }
        for run in ids_in(&String::from_utf8_lossy(&a.body), "run-") {
            if let Some(other) = runs.get(run.as_str()).filter(|c| **c != conv) {
                found.push((
                    r.name.clone(),
                    format!(
                        "{}: the stream answering a send on conversation {conv} carries run {run} of conversation {other}",
                        r.name
                    ),
                ));
            }
        }
    }
    found
}
