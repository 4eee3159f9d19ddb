//! `backfill-faithful` (docs/invariants.md): the start-up tail read and the transcript a client
//! backfills from it are what letta-protocol.md §6.1-6.2 give.
//!
//! - Every message listing the client requests (`client_request GET
//!   /v1/{agents,conversations}/{id}/messages`) carries §6.1's query: `limit=50` (`1` on the
//!   agent's listing when backfill is off and no in-context id is known), `order=desc`, the
//!   eight tail message types in §6.1's order, and `conversation_id=default` exactly on the
//!   agent's listing. The tail read (at start-up, and in the approval-pending recovery, which
//!   reads the resume data again) is the only listing the client makes; the real-client judge
//!   gives this rule the listings `sim serve` logged, so it judges a real client too. Scripted
//!   probes list as they please and are not the client's.
//! - Every backfilled transcript (`client_backfill`) is §6.2 applied to the listing the
//!   client read: deduped by otid or id and type, sorted by date with ties broken by type
//!   rank, cut at the tenth primary message from the end and to the last 40, with leading
//!   orphan tool returns dropped. A wrong order or cut changes only what the user sees, so no
//!   other rule and no turn's outcome shows it.
//!
//! The oracle keeps its own copy of §6.1-6.2's tables and parses dates with the cassettes'
//! ISO-8601 reader, not the client's, so a wrong constant in the client model cannot agree with
//! itself.

use crate::cassette::import::iso_ms;
use crate::harness::invariants::{BACKFILL_FAITHFUL, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// The tail message types the start-up read asks for, in order (letta-protocol.md §6.1).
const TAIL_TYPES: [&str; 8] = [
    "user_message",
    "assistant_message",
    "reasoning_message",
    "event_message",
    "summary_message",
    "approval_request_message",
    "tool_return_message",
    "approval_response_message",
];

/// `BACKFILL_PAGE_LIMIT`, `BACKFILL_PRIMARY_MESSAGE_LIMIT` and
/// `BACKFILL_MAX_RENDERABLE_MESSAGES` (letta-protocol.md §6.1).
const PAGE: &str = "50";
const PRIMARY_LIMIT: usize = 10;
const RENDERABLE_LIMIT: usize = 40;

/// The primary types, counted back to the tenth (letta-protocol.md §6.1).
const PRIMARY: [&str; 5] = [
    "user_message",
    "assistant_message",
    "reasoning_message",
    "event_message",
    "summary_message",
];

/// Message types in §6.2's tie-break order; a type not named ranks after all of them. The
/// ranked types are exactly §6.2's renderable ones.
const RANKED: [&[&str]; 7] = [
    &["user_message"],
    &["reasoning_message"],
    &["tool_call_message", "approval_request_message"],
    &["tool_return_message", "approval_response_message"],
    &["assistant_message"],
    &["event_message"],
    &["summary_message"],
];

/// `backfill-faithful` over a Letta trace.
pub fn backfill_faithful(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ClientRequest { method, path, .. } if method == "GET" => {
                let (route, query) = path.split_once('?').unwrap_or((path, ""));
                if !is_listing(route) {
                    continue;
                }
                if let Err(why) = tail_query_faithful(route, query) {
                    out.push(Violation::at(
                        BACKFILL_FAITHFUL,
                        i,
                        format!("GET {path} is not the tail read: {why} (letta-protocol.md §6.1)"),
                    ));
                }
            }
            Observation::ClientBackfill {
                conversation_id,
                listed,
                shown,
            } => {
                let messages: Vec<Listed<'_>> = listed.iter().map(|l| Listed::parse(l)).collect();
                let expected = backfill(&messages);
                if *shown != expected {
                    out.push(Violation::at(
                        BACKFILL_FAITHFUL,
                        i,
                        format!(
                            "the transcript backfilled on conversation {conversation_id} shows {}, where §6.2 orders the listing it read as {} (letta-protocol.md §6.2)",
                            describe(&messages, shown),
                            describe(&messages, &expected)
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether `route` lists an agent's or a conversation's messages.
pub fn is_listing(route: &str) -> bool {
    matches!(
        route
            .trim_end_matches('/')
            .split('/')
            .collect::<Vec<_>>()
            .as_slice(),
        ["", "v1", "agents" | "conversations", _, "messages"]
    )
}

/// Whether a listing's query is the tail read's, or what differs.
fn tail_query_faithful(path: &str, query: &str) -> Result<(), String> {
    let on_agent = path.starts_with("/v1/agents/");
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    // Keys may come in any order; the repeated type parameter keeps its values' order.
    pairs.sort_by_key(|(k, _)| *k);
    let mut expected: Vec<(&str, &str)> = Vec::new();
    if on_agent {
        expected.push(("conversation_id", "default"));
    }
    // A read of the agent's listing for its newest message alone asks for one (§6.3).
    let one = on_agent && pairs.contains(&("limit", "1"));
    expected.push(("limit", if one { "1" } else { PAGE }));
    expected.push(("order", "desc"));
    expected.extend(TAIL_TYPES.map(|t| ("include_return_message_types", t)));
    let canonical = expected
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    expected.sort_by_key(|(k, _)| *k);
    if pairs == expected {
        return Ok(());
    }
    Err(format!(
        "its query is {query:?}, the tail read's is {canonical:?} (parameters of different names in any order)"
    ))
}

/// One listed message as `client_backfill` reports it.
struct Listed<'a> {
    id: Option<&'a str>,
    message_type: &'a str,
    /// Epoch ms; `None` sorts first (§6.2's unparseable dates).
    date: Option<i64>,
    otid: Option<&'a str>,
}

impl<'a> Listed<'a> {
    fn parse(line: &'a str) -> Listed<'a> {
        let mut fields = line.splitn(4, ' ').map(|f| (f != "-").then_some(f));
        let mut next = || fields.next().flatten();
        let id = next();
        let message_type = next().unwrap_or("");
        let date = next().and_then(iso_ms);
        let otid = next();
        Listed {
            id,
            message_type,
            date,
            otid,
        }
    }

    fn rank(&self) -> usize {
        RANKED
            .iter()
            .position(|types| types.contains(&self.message_type))
            .unwrap_or(RANKED.len())
    }

    fn renderable(&self) -> bool {
        self.rank() < RANKED.len()
    }
}

/// §6.2 over a listing: the positions in it of the messages a faithful backfill shows.
fn backfill(listed: &[Listed<'_>]) -> Vec<u32> {
    // Dedupe: the first message of each key; messages without an id are skipped.
    let mut keys: Vec<String> = Vec::new();
    let mut kept: Vec<usize> = Vec::new();
    for (i, m) in listed.iter().enumerate() {
        let Some(id) = m.id else { continue };
        let key = match m.otid {
            Some(otid) => format!("otid:{otid}"),
            None => format!("id:{id}:{}", m.message_type),
        };
        if !keys.contains(&key) {
            keys.push(key);
            kept.push(i);
        }
    }
    // Date ascending, unparseable first, ties by type rank, full ties in listing order.
    kept.sort_by(|&a, &b| {
        let (a, b) = (&listed[a], &listed[b]);
        a.date.cmp(&b.date).then(a.rank().cmp(&b.rank()))
    });
    let renderable: Vec<usize> = kept
        .into_iter()
        .filter(|&i| listed[i].renderable())
        .collect();
    let start = renderable
        .iter()
        .enumerate()
        .rev()
        .filter(|&(_, &i)| PRIMARY.contains(&listed[i].message_type))
        .nth(PRIMARY_LIMIT - 1)
        .map_or(0, |(at, _)| at);
    let window = &renderable[start..];
    let window = &window[window.len().saturating_sub(RENDERABLE_LIMIT)..];
    let orphans = window
        .iter()
        .take_while(|&&i| listed[i].message_type == "tool_return_message")
        .count();
    window[orphans..].iter().map(|&i| i as u32).collect()
}

/// Positions in a listing as `[<type> <id>, …]`.
fn describe(listed: &[Listed<'_>], shown: &[u32]) -> String {
    let names: Vec<String> = shown
        .iter()
        .map(|&i| match listed.get(i as usize) {
            Some(m) => format!("{} {}", m.message_type, m.id.unwrap_or("-")),
            None => format!("#{i} (not in the listing)"),
        })
        .collect();
    format!("[{}]", names.join(", "))
}

#[cfg(test)]
mod tests;
