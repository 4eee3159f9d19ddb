//! The sequence diagram of a run as plain SVG: one lane per host, one row per trace event in
//! trace order, the simulated time on the left (a dashed rule where time jumps), requests and
//! responses as arrows, model calls as arrows to the provider, runs, turns and tool executions
//! as spans, faults as red bands and a crashed host's downtime as a hatched span.
//!
//! Rows rather than a linear time scale: many events share a millisecond and a swarm plan
//! stalls for 60 s, so a linear scale would stack the interesting part into one pixel. The
//! order is the trace's, which is the order things happened.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape;
use super::parse::Row;

/// Height of one event row.
const ROW: usize = 18;
/// Width of one host lane.
const LANE: usize = 300;
/// Room on the left for the simulated time.
const LEFT: usize = 80;
/// A jump in simulated time at least this long is drawn as a gap rule with its length.
const GAP_MS: u64 = 250;

/// The lanes, in the order a reader expects: clients, server, provider, scripted probes, the
/// harness's own fault events last; hosts the list does not know go after the server.
pub fn lanes(rows: &[Row]) -> Vec<String> {
    let rank = |h: &str| match h {
        h if h.starts_with("client") => 0,
        "server" => 1,
        "provider" => 3,
        "probe" => 4,
        "harness" => 5,
        _ => 2,
    };
    let mut hosts: Vec<(usize, usize, String)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if !hosts.iter().any(|(_, _, h)| *h == r.host) {
            hosts.push((rank(&r.host), i, r.host.clone()));
        }
    }
    hosts.sort();
    hosts.into_iter().map(|(_, _, h)| h).collect()
}

fn lane_x(lanes: &[String], host: &str) -> usize {
    let i = lanes.iter().position(|h| h == host).unwrap_or(0);
    LEFT + i * LANE + LANE / 2
}

fn row_y(i: usize) -> usize {
    i * ROW + ROW / 2 + 4
}

/// An arrow between two rows.
struct Arrow {
    from: usize,
    to: usize,
    class: &'static str,
    label: String,
}

/// A vertical span on one lane.
struct Span {
    host: String,
    from: usize,
    to: usize,
    class: &'static str,
    label: String,
}

fn path_key(row: &Row) -> Option<(String, String)> {
    let method = row.field("method")?;
    let path = row.field("path")?;
    let path = path.split('?').next().unwrap_or("").trim_end_matches('/');
    Some((method, path.to_string()))
}

/// Pairs requests with the rows that answered them, first in first out, the way the trace
/// tells them (a request's row, then the server's row for it, then the client's response).
fn arrows(rows: &[Row]) -> Vec<Arrow> {
    let mut out = Vec::new();
    // (row, method, path) sent by a client or probe, not yet seen at the server.
    let mut sent: Vec<(usize, (String, String))> = Vec::new();
    // Rows of the server's answers not yet received, per receiving host kind.
    let mut answered: Vec<(usize, String)> = Vec::new();
    let mut model_calls: Vec<usize> = Vec::new();
    let mut model_answers: Vec<(usize, String)> = Vec::new();
    for r in rows {
        match r.event.as_str() {
            "client_send" | "client_request" | "probe_request" => {
                if let Some(k) = path_key(r) {
                    sent.push((r.index, k));
                }
            }
            "server_request" => {
                let status = r.field("status").unwrap_or_default();
                if let Some(k) = path_key(r)
                    && let Some(p) = sent.iter().position(|(_, s)| *s == k)
                {
                    let (from, _) = sent.remove(p);
                    out.push(Arrow {
                        from,
                        to: r.index,
                        class: "req",
                        label: format!("{} {}", k.0, k.1),
                    });
                    answered.push((r.index, status));
                }
            }
            "client_response" | "probe_response" => {
                let status = r.field("status").unwrap_or_default();
                let p = answered
                    .iter()
                    .position(|(_, s)| *s == status)
                    .or(if answered.is_empty() { None } else { Some(0) });
                if let Some(p) = p {
                    let (from, s) = answered.remove(p);
                    out.push(Arrow {
                        from,
                        to: r.index,
                        class: "resp",
                        label: s,
                    });
                }
            }
            "provider_call" | "loop_provider_request" => model_calls.push(r.index),
            "provider_serve" | "provider_rejected" if !model_calls.is_empty() => {
                let from = model_calls.remove(0);
                out.push(Arrow {
                    from,
                    to: r.index,
                    class: "model",
                    label: format!("model call {}", r.field("call").unwrap_or_default()),
                });
                model_answers.push((r.index, r.field("status").unwrap_or_default()));
            }
            "provider_result" | "loop_provider_response" if !model_answers.is_empty() => {
                let (from, status) = model_answers.remove(0);
                out.push(Arrow {
                    from,
                    to: r.index,
                    class: "resp",
                    label: status,
                });
            }
            _ => {}
        }
    }
    out
}

/// Runs, turns, tool executions and a crashed host's downtime.
fn spans(rows: &[Row]) -> Vec<Span> {
    let mut open: BTreeMap<(String, &'static str, String), usize> = BTreeMap::new();
    let mut out = Vec::new();
    let last = rows.len().saturating_sub(1);
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for r in rows {
        let keyed = |k: &str| r.field(k).unwrap_or_default();
        match r.event.as_str() {
            "run_started" => starts.push((r.host.clone(), "run", keyed("run_id"), r.index)),
            "run_ended" | "run_cancelled" => {
                ends.push((r.host.clone(), "run", keyed("run_id"), r.index))
            }
            "turn_start" => starts.push((r.host.clone(), "turn", keyed("turn"), r.index)),
            "turn_end" => ends.push((r.host.clone(), "turn", keyed("turn"), r.index)),
            "tool_started" => starts.push((r.host.clone(), "tool", keyed("tool_call_id"), r.index)),
            "tool_executed" | "tool_aborted" => {
                ends.push((r.host.clone(), "tool", keyed("tool_call_id"), r.index))
            }
            "loop_tool_start" => starts.push((r.host.clone(), "tool", keyed("number"), r.index)),
            "loop_tool_end" => ends.push((r.host.clone(), "tool", keyed("number"), r.index)),
            "fault" => {
                let text = keyed("fault");
                if let Some(rest) = text.strip_prefix("crash host=") {
                    let host = rest.split(' ').next().unwrap_or("").to_string();
                    starts.push((host, "down", String::new(), r.index));
                } else if let Some(host) = text.strip_prefix("restart ") {
                    ends.push((host.to_string(), "down", String::new(), r.index));
                }
            }
            _ => {}
        }
        for (host, class, key, at) in starts.drain(..) {
            open.insert((host, class, key), at);
        }
        for (host, class, key, at) in ends.drain(..) {
            let from = open
                .remove(&(host.clone(), class, key.clone()))
                .unwrap_or(at);
            out.push(Span {
                host,
                from,
                to: at,
                class,
                label: key,
            });
        }
    }
    // Spans still open at the end of the trace run to its last row: a run that never ended
    // is worth seeing.
    for ((host, class, key), from) in open {
        out.push(Span {
            host,
            from,
            to: last,
            class,
            label: format!("{key} (never ended)"),
        });
    }
    out
}

/// A short label for a row: the event and the field that says most about it.
fn label(r: &Row) -> String {
    let f = |k: &str| r.field(k).unwrap_or_default();
    let text = match r.event.as_str() {
        "client_send" | "client_request" | "probe_request" => {
            format!("{} {} {}", r.event, f("method"), f("path"))
        }
        "server_request" => format!("{} {} → {}", f("method"), f("path"), f("status")),
        "client_response" | "probe_response" => format!("{} {}", r.event, f("status")),
        "client_chunk" | "chunk_recorded" => {
            format!("{} #{} {}", r.event, f("seq_id"), f("message_type"))
        }
        "client_chunk_unnamed" => format!(
            "{} #{} {} lacks {}",
            r.event,
            f("seq_id"),
            f("message_type"),
            f("lacks")
        ),
        "fault" => format!("FAULT {}", f("fault")),
        "turn_end" | "turn_start" => {
            format!("{} {}", r.event, f("outcome").if_empty(|| f("text")))
        }
        "history" => format!(
            "history {} {}",
            f("entry.kind"),
            f("entry.tool_call_id").if_empty(|| f("entry.otid"))
        ),
        "tool_started" | "tool_executed" | "tool_aborted" => {
            format!("{} {} {}", r.event, f("tool"), f("tool_call_id"))
        }
        _ => {
            let mut s = r.event.clone();
            for (k, _) in r.fields.iter().take(2) {
                let _ = write!(s, " {k}={}", f(k));
            }
            s
        }
    };
    clip(&text, 46)
}

trait IfEmpty {
    fn if_empty(self, other: impl FnOnce() -> String) -> String;
}

impl IfEmpty for String {
    fn if_empty(self, other: impl FnOnce() -> String) -> String {
        if self.is_empty() { other() } else { self }
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n - 1).collect();
        c.push('…');
        c
    }
}

/// The lane headers, drawn apart so the page keeps them in view while the diagram scrolls.
pub fn header_svg(lanes: &[String]) -> String {
    let width = LEFT + lanes.len() * LANE;
    let mut s = format!(
        r#"<svg class="lanes" width="{width}" height="28" xmlns="http://www.w3.org/2000/svg"><text x="8" y="18" class="axis">sim ms</text>"#
    );
    for (i, h) in lanes.iter().enumerate() {
        let x = LEFT + i * LANE + LANE / 2;
        let _ = write!(
            s,
            r#"<g class="lane-head" data-host="{h}"><rect x="{}" y="2" width="{}" height="24" rx="4"/><text x="{x}" y="19" text-anchor="middle">{h}</text></g>"#,
            LEFT + i * LANE + 6,
            LANE - 12,
            h = escape(h),
        );
    }
    s.push_str("</svg>");
    s
}

/// The diagram: `broken` maps a row to the invariants a violation there names.
pub fn diagram_svg(
    rows: &[Row],
    lanes: &[String],
    broken: &BTreeMap<usize, Vec<String>>,
) -> String {
    // Room on the right for the labels of the last lane.
    let width = LEFT + lanes.len() * LANE + LANE / 2;
    let height = rows.len() * ROW + ROW;
    let mut s = String::with_capacity(rows.len() * 400);
    let _ = writeln!(
        s,
        r##"<svg class="diagram" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg"><defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#c62828" opacity="0.35"/></pattern></defs>"##
    );
    for (i, _) in lanes.iter().enumerate() {
        let x = LEFT + i * LANE + LANE / 2;
        let _ = writeln!(
            s,
            r#"<line class="lifeline" x1="{x}" y1="0" x2="{x}" y2="{height}"/>"#
        );
    }
    // Time labels where time moves; a dashed rule where it jumps.
    let mut prev: Option<u64> = None;
    for r in rows {
        let y = row_y(r.index);
        if prev != Some(r.t_ms) {
            if let Some(p) = prev
                && r.t_ms >= p + GAP_MS
            {
                let _ = writeln!(
                    s,
                    r#"<line class="gap" x1="0" y1="{gy}" x2="{width}" y2="{gy}"/><text class="gap-label" x="{LEFT}" y="{gy}" dy="-2">+{} ms</text>"#,
                    r.t_ms - p,
                    gy = y - ROW / 2,
                );
            }
            let _ = writeln!(
                s,
                r#"<text class="axis" x="{}" y="{}" text-anchor="end">{}</text>"#,
                LEFT - 8,
                y + 4,
                r.t_ms
            );
            prev = Some(r.t_ms);
        }
    }
    for sp in spans(rows) {
        let i = lanes.iter().position(|h| *h == sp.host).unwrap_or(0);
        let (x, w) = match sp.class {
            "down" => (LEFT + i * LANE + 4, LANE - 8),
            "run" => (LEFT + i * LANE + LANE / 2 - 12, 8),
            "turn" => (LEFT + i * LANE + LANE / 2 - 14, 8),
            _ => (LEFT + i * LANE + LANE / 2 + 4, 6),
        };
        let y = row_y(sp.from) - ROW / 2 + 2;
        let h = (sp.to - sp.from) * ROW + ROW - 4;
        let _ = writeln!(
            s,
            r#"<rect class="span {c}" x="{x}" y="{y}" width="{w}" height="{h}"><title>{c} {l}</title></rect>"#,
            c = sp.class,
            l = escape(&sp.label),
        );
    }
    for r in rows {
        if r.event == "fault" {
            let y = row_y(r.index) - ROW / 2;
            let _ = writeln!(
                s,
                r#"<rect class="fault" data-i="{}" x="{LEFT}" y="{y}" width="{}" height="{ROW}"><title>{}</title></rect>"#,
                r.index,
                width - LEFT,
                escape(&r.line)
            );
        }
    }
    for a in arrows(rows) {
        let (from, to) = (&rows[a.from], &rows[a.to]);
        let (x1, x2) = (lane_x(lanes, &from.host), lane_x(lanes, &to.host));
        let (y1, y2) = (row_y(a.from), row_y(a.to));
        let _ = writeln!(
            s,
            r#"<line class="arrow {c}" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" marker-end="url(#head)"><title>{l}</title></line>"#,
            c = a.class,
            l = escape(&a.label),
        );
    }
    for r in rows {
        let x = lane_x(lanes, &r.host);
        let y = row_y(r.index);
        let broke = broken.get(&r.index);
        let class = match (broke.is_some(), r.event.as_str()) {
            (true, _) => "ev broke",
            (false, "fault") => "ev fault-ev",
            (false, e) if e.starts_with("tool_") || e.starts_with("loop_tool") => "ev tool-ev",
            _ => "ev",
        };
        // No <title> per event: the page shows the trace line on hover from the listing,
        // which keeps a 10,000-event report half the size.
        let _ = writeln!(
            s,
            r#"<g class="{class}" data-i="{i}" id="e{i}"{extra}><circle cx="{x}" cy="{y}" r="4"/><text x="{}" y="{}">{}</text></g>"#,
            x + 8,
            y + 4,
            escape(&label(r)),
            i = r.index,
            extra = broke
                .map(|ids| format!(r#" data-broke="{}""#, escape(&ids.join(", "))))
                .unwrap_or_default(),
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::super::parse::rows;
    use super::*;

    const TRACE: &str = r#"       0 client   client_send turn=1 method=POST path=/v1/conversations/default/messages items=user otids=[]
       2 server   run_started run_id=run-1 conversation_id=c request_token=t
       2 server   server_request method=POST path=/v1/conversations/default/messages status=200
       2 server   provider_call run_id=run-1 attempt=1
       3 provider provider_serve call=0 cassette=a status=200 frames=3
       4 client   client_response status=200
       9 harness  fault fault="crash host=server at_ms=9 restart_after_ms=200"
     209 harness  fault fault="restart server"
"#;

    #[test]
    fn pairs_requests_with_their_answers_in_trace_order() {
        let r = rows(TRACE);
        let a = arrows(&r);
        let got: Vec<(usize, usize, &str)> = a.iter().map(|a| (a.from, a.to, a.class)).collect();
        assert_eq!(got, vec![(0, 2, "req"), (3, 4, "model"), (2, 5, "resp")]);
    }

    #[test]
    fn a_crash_is_a_span_until_the_restart_and_an_open_run_runs_to_the_end() {
        let r = rows(TRACE);
        let sp = spans(&r);
        assert!(
            sp.iter()
                .any(|s| s.class == "down" && s.host == "server" && (s.from, s.to) == (6, 7))
        );
        assert!(
            sp.iter()
                .any(|s| s.class == "run" && s.to == 7 && s.label.ends_with("(never ended)"))
        );
    }

    #[test]
    fn lanes_put_clients_first_and_the_harness_last() {
        assert_eq!(
            lanes(&rows(TRACE)),
            ["client", "server", "provider", "harness"]
        );
    }
}
