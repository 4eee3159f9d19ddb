//! `otids-fresh` (docs/invariants.md): a send either repeats an earlier send's otids exactly
//! (the same request retried, dedupe-safe) or draws only otids never sent before (a new
//! request), and never carries an empty one. Pure: it reads a finished trace.
//!
//! The otids are the server's request token and its way back to a run (letta-protocol.md §2.4):
//! a retry of the same request keeps them so the server re-attaches instead of starting a
//! second run, and every new request (the approval-pending rebuild, the interrupt resend, a
//! post-stream retry, §3.11) refreshes every one of them. A new request that keeps an old otid
//! can be answered with the old request's run; an empty otid names no request at all. Neither
//! shows in a turn's outcome.

use std::collections::BTreeMap;

use crate::harness::invariants::{OTIDS_FRESH, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// `otids-fresh`: per client, each `client_send`'s otids are not empty, and either equal the
/// otids of an earlier send of the same turn and process (a retry of the same request: §3.3
/// transient, §3.5 busy, §3.6 shutdown, and headless, the send the approval-pending conflict
/// refused, after its denial-only requests, §3.4) or include none sent before. The quota auto-swap's
/// resend is exempt: it keeps the old otids and adds an item without one (§3.10, §10.3 item 2).
pub fn otids_fresh(events: &[TraceEvent]) -> Vec<Violation> {
    // otid → the event of the send that first carried it, per client host.
    let mut sent: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut earlier: BTreeMap<&str, Vec<&[String]>> = BTreeMap::new();
    let mut quota_swap: BTreeMap<&str, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let host = e.host.as_str();
        match &e.obs {
            Observation::ClientStarted { .. } | Observation::TurnStart { .. } => {
                earlier.remove(host);
                quota_swap.remove(host);
            }
            Observation::ClientRetry { kind, .. } if kind == "quota_swap" => {
                quota_swap.insert(host, true);
            }
            Observation::ClientSend { otids, .. } => {
                let exempt = quota_swap.remove(host).unwrap_or(false);
                if otids.iter().any(String::is_empty) {
                    out.push(Violation::at(
                        OTIDS_FRESH,
                        i,
                        format!("the send carries an empty otid: {otids:?}"),
                    ));
                } else if !exempt
                    && !earlier
                        .get(host)
                        .is_some_and(|e| e.contains(&otids.as_slice()))
                {
                    for o in otids {
                        if let Some(first) = sent.get(&(host, o.as_str())) {
                            out.push(Violation::at(
                                OTIDS_FRESH,
                                i,
                                format!(
                                    "a new request reuses otid {o}, first sent at event {} (a retry repeats all of an earlier send's otids, a new request draws fresh ones, letta-protocol.md §2.4)",
                                    first + 1
                                ),
                            ));
                        }
                    }
                }
                for o in otids {
                    sent.entry((host, o.as_str())).or_insert(i);
                }
                earlier.entry(host).or_default().push(otids.as_slice());
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::letta::test_trace::{client, started};

    fn send(t: u64, otids: &[&str]) -> TraceEvent {
        client(
            t,
            Observation::ClientSend {
                turn: 1,
                method: "POST".into(),
                path: "/v1/conversations/default/messages".into(),
                items: "user".into(),
                otids: otids.iter().map(|o| o.to_string()).collect(),
                response_state: false,
            },
        )
    }

    fn turn_start(t: u64) -> TraceEvent {
        client(
            t,
            Observation::TurnStart {
                turn: 1,
                text: "hi".into(),
            },
        )
    }

    fn retry(t: u64, kind: &str) -> TraceEvent {
        client(
            t,
            Observation::ClientRetry {
                kind: kind.into(),
                attempt: 1,
                delay_ms: 0,
                detail: String::new(),
                retry_after_ms: None,
            },
        )
    }

    #[test]
    fn a_retry_repeats_an_earlier_sends_otids_and_a_new_request_draws_fresh_ones() {
        let trace = [
            started("headless"),
            turn_start(0),
            send(1, &["a"]),
            send(2, &["d"]),
            send(3, &["a"]),
            send(4, &["x", "y"]),
        ];
        assert!(otids_fresh(&trace).is_empty());
    }

    #[test]
    fn a_new_request_that_keeps_one_old_otid_breaks_it() {
        let trace = [
            started("interactive"),
            turn_start(0),
            send(1, &["a"]),
            send(2, &["d", "a"]),
        ];
        let v = otids_fresh(&trace);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].event, Some(3));
        assert!(
            v[0].message
                .contains("reuses otid a, first sent at event 3")
        );
    }

    #[test]
    fn an_old_request_repeated_in_a_later_turn_breaks_it() {
        let trace = [
            started("interactive"),
            turn_start(0),
            send(1, &["a"]),
            turn_start(2),
            send(3, &["a"]),
        ];
        assert_eq!(otids_fresh(&trace).len(), 1);
    }

    #[test]
    fn an_empty_otid_breaks_it() {
        let trace = [started("interactive"), turn_start(0), send(1, &["", "b"])];
        let v = otids_fresh(&trace);
        assert_eq!(v.len(), 1);
        assert!(v[0].message.contains("empty otid"));
    }

    #[test]
    fn the_quota_swap_resend_keeps_its_otids_as_documented() {
        let trace = [
            started("interactive"),
            turn_start(0),
            send(1, &["a"]),
            send(2, &["b"]),
            retry(3, "quota_swap"),
            send(4, &["a", "b"]),
            send(5, &["b", "c"]),
        ];
        let v = otids_fresh(&trace);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].event, Some(6));
    }
}
