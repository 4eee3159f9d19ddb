//! One recorded response against ours (status line, content type, body or frame by frame,
//! after [`Normalizer`]), and the report of a whole replay: the exchanges and frames compared,
//! the first divergence with a unified diff and the trace up to it.

use serde::Serialize;

use super::derive::{Derived, our_text};
use super::normalize::Normalizer;
use super::server::{ServerAnswer, WorldOutput};
use crate::cassette::{Recording, ResponseBody};
use crate::harness::report::exit;
use crate::harness::trace::TraceEvent;
use crate::model::letta::server::Profile;

/// What the recording says came back.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The exchange's name in the report and in id labels (`x12`, a capture's name).
    pub name: String,
    /// `HTTP/1.1 200 OK`
    pub status_line: String,
    pub content_type: String,
    pub body_text: String,
}

/// How one exchange differs.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// One line each: a failed request, the status line, the content type, the body.
    pub problems: Vec<String>,
    /// The unified diff of the normalised bodies (empty when they are equal).
    pub diff: String,
    pub recorded: String,
    pub ours: String,
}

/// One frame per line, so a diff shows frames.
fn frame_lines(s: &str) -> String {
    s.replace("\n\n", "\n\u{23CE}\n")
}

/// A JSON body pretty-printed (one key per line) for the diff; other text as it is.
fn diff_form(s: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(v) if v.is_object() || v.is_array() => {
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| s.to_string()) + "\n"
        }
        _ => frame_lines(s),
    }
}

/// A unified diff of two texts, labelled `recorded` and `ours`.
pub fn unified_diff(recorded: &str, ours: &str, radius: usize) -> String {
    similar::TextDiff::from_lines(recorded, ours)
        .unified_diff()
        .context_radius(radius)
        .header("recorded", "ours")
        .to_string()
}

/// Colours a unified diff for a terminal: removals red, additions green, hunks cyan.
pub fn colour_diff(diff: &str) -> String {
    diff.lines()
        .map(|l| {
            let code = if l.starts_with("+++") || l.starts_with("---") {
                "1"
            } else if l.starts_with('+') {
                "32"
            } else if l.starts_with('-') {
                "31"
            } else if l.starts_with("@@") {
                "36"
            } else {
                return format!("{l}\n");
            };
            format!("\u{1b}[{code}m{l}\u{1b}[0m\n")
        })
        .collect()
}

/// Compares one recorded response with ours. `ours_text` is our body in the form the
/// recording's text has; both are normalised with the chain's normalisers (ids shared along the
/// chain), so this must be called for every exchange in order, matching or not.
pub fn compare_answer(
    expected: &Expected,
    ours: Option<&ServerAnswer>,
    ours_text: &str,
    recorded_ids: &mut Normalizer,
    our_ids: &mut Normalizer,
) -> Option<Difference> {
    let recorded = recorded_ids.capture(&expected.name, &expected.body_text);
    let Some(a) = ours else {
        return Some(Difference {
            problems: vec!["never sent".into()],
            diff: String::new(),
            recorded,
            ours: String::new(),
        });
    };
    let actual = our_ids.capture(&expected.name, ours_text);
    let mut problems = Vec::new();
    if let Some(e) = &a.error {
        problems.push(format!("request failed: {e}"));
    }
    if a.status_line != expected.status_line {
        problems.push(format!(
            "status line: recorded {:?}, ours {:?}",
            expected.status_line, a.status_line
        ));
    }
    if a.content_type != expected.content_type {
        problems.push(format!(
            "content-type: recorded {:?}, ours {:?}",
            expected.content_type, a.content_type
        ));
    }
    let mut diff = String::new();
    if recorded != actual {
        diff = unified_diff(&diff_form(&recorded), &diff_form(&actual), 1);
        problems.push("body differs".into());
    }
    (!problems.is_empty()).then_some(Difference {
        problems,
        diff,
        recorded,
        ours: actual,
    })
}

/// The first exchange that differs.
#[derive(Debug, Clone, Serialize)]
pub struct Divergence {
    /// The exchange's number in the recording (1-based).
    pub exchange: usize,
    /// `POST /v1/conversations/conv-…/messages` as recorded.
    pub request: String,
    #[serde(flatten)]
    pub difference: Difference,
}

/// One exchange of a replay, as recorded and as replayed.
#[derive(Debug, Clone, Serialize)]
pub struct SequenceRow {
    /// The exchange's number in the recording, or the request's in the sequence (1-based).
    pub n: usize,
    /// `POST /v1/… → 200` as recorded.
    pub recorded: String,
    /// The same as replayed.
    pub ours: String,
    /// `match`, `differs`, or `not compared` (a client-side step after the first divergence).
    pub state: &'static str,
}

/// What a replay found.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub cassette: String,
    pub side: &'static str,
    pub server_profile: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_profile: Option<String>,
    /// Exchanges (server side) or requests (client side) compared.
    pub exchanges: usize,
    /// SSE frames compared (server side).
    pub frames: usize,
    /// How many exchanges differ in all.
    pub differing: usize,
    /// Every exchange that differs, one line each: `12 POST /v1/…: body differs`.
    pub differences: Vec<String>,
    /// Bookkeeping exchanges whose status and content type match but whose bodies differ (not
    /// divergences unless `--strict`).
    pub bookkeeping_bodies_differing: usize,
    pub divergence: Option<Divergence>,
    /// Every exchange (server side) or request (client side), recorded beside replayed, for
    /// the side-by-side view of `sim replay --html`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sequence: Vec<SequenceRow>,
    /// Invariants broken in the replayed world: (invariant, message).
    pub violations: Vec<(String, String)>,
    /// Client side: how each user turn ended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turn_outcomes: Vec<String>,
    /// The trace up to the end of the divergent exchange (all of it when none diverged).
    pub trace: Vec<String>,
    /// Why the simulation stopped early, if it did.
    pub stopped: Option<String>,
}

impl ReplayReport {
    /// 0 when everything matched and held, 129 at a divergence or a broken invariant.
    pub fn exit_code(&self) -> i32 {
        if self.divergence.is_none() && self.violations.is_empty() && self.stopped.is_none() {
            exit::PASS
        } else {
            exit::CORRECTNESS
        }
    }

    /// The verdict in one line: `match` or where it diverged.
    pub fn summary(&self) -> String {
        let what = if self.side == "client" {
            "requests"
        } else {
            "exchanges"
        };
        let head = format!(
            "{}: {} {what}, {} frames compared",
            self.cassette, self.exchanges, self.frames
        );
        let mut parts = Vec::new();
        match &self.divergence {
            None => parts.push("match".to_string()),
            Some(d) => parts.push(format!(
                "diverges at exchange {} ({}): {}; {} of {} differ",
                d.exchange,
                d.request,
                d.difference.problems.join(", "),
                self.differing,
                self.exchanges
            )),
        }
        if !self.turn_outcomes.is_empty() {
            parts.push(format!("turns {}", self.turn_outcomes.join(", ")));
        }
        for (inv, _) in &self.violations {
            parts.push(format!("violates {inv}"));
        }
        if let Some(s) = &self.stopped {
            parts.push(format!("stopped: {s}"));
        }
        format!("{head}: {}", parts.join("; "))
    }

    /// The human report; `colour` colours the diff.
    pub fn render(&self, colour: bool) -> String {
        let mut out = format!(
            "replay {} ({} side, server profile {}{})\n",
            self.cassette,
            self.side,
            self.server_profile,
            self.client_profile
                .as_ref()
                .map(|c| format!(", client profile {c}"))
                .unwrap_or_default()
        );
        out.push_str(&self.summary());
        out.push('\n');
        for (inv, m) in &self.violations {
            out.push_str(&format!("invariant {inv}: {m}\n"));
        }
        if self.bookkeeping_bodies_differing > 0 {
            out.push_str(&format!(
                "{} bookkeeping bodies differ (models, agent and conversation objects; --strict compares them)\n",
                self.bookkeeping_bodies_differing
            ));
        }
        if self.differences.len() > 1 {
            out.push_str("differing exchanges:\n");
            for l in &self.differences {
                out.push_str(&format!("  {l}\n"));
            }
        }
        if let Some(d) = &self.divergence {
            out.push_str(&format!("\nexchange {}: {}\n", d.exchange, d.request));
            for p in &d.difference.problems {
                out.push_str(&format!("  {p}\n"));
            }
            if !d.difference.diff.is_empty() {
                out.push('\n');
                out.push_str(&if colour {
                    colour_diff(&d.difference.diff)
                } else {
                    d.difference.diff.clone()
                });
            }
            out.push_str(&format!(
                "\ntrace up to exchange {} ({} events):\n",
                d.exchange,
                self.trace.len()
            ));
            for l in &self.trace {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

/// Which bodies a server-side replay compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The bodies of protocol exchanges (the requests CLI conformance counts as steps: sends,
    /// streams, run lookups, cancels, the resume-data reads); of the bookkeeping around them
    /// (models, agent and conversation objects, the 404s of endpoints 0.16.8 lacks) only the
    /// status line and content type.
    #[default]
    Protocol,
    /// Every body.
    Strict,
}

impl Scope {
    /// The difference, unless it is only a bookkeeping body outside the scope (then counted).
    fn keep(
        self,
        x: &crate::cassette::Exchange,
        d: Difference,
        bookkeeping: &mut usize,
    ) -> Option<Difference> {
        let only_body = d.problems.iter().all(|p| p == "body differs");
        if self == Scope::Strict || !only_body || is_protocol_step(&x.method, &x.path) {
            return Some(d);
        }
        *bookkeeping += 1;
        None
    }
}

/// Whether CLI conformance counts the request as a protocol step.
pub fn is_protocol_step(method: &str, path: &str) -> bool {
    let raw = crate::harness::letta::conformance::RawRequest {
        method: method.to_string(),
        path: path.to_string(),
        body: None,
        status: None,
    };
    !crate::harness::letta::conformance::normalise(&[raw]).is_empty()
}

/// The last events of a trace up to `until_ms` (at most this many lines).
pub const TRACE_LINES: usize = 60;

fn trace_until(events: &[TraceEvent], until_ms: Option<u64>) -> Vec<String> {
    let upto: Vec<&TraceEvent> = events
        .iter()
        .filter(|e| until_ms.is_none_or(|t| e.t_ms <= t))
        .collect();
    let skip = upto.len().saturating_sub(TRACE_LINES);
    upto[skip..].iter().map(|e| e.render()).collect()
}

/// The status line of a recorded status, as our side writes it.
pub fn status_line(status: u16) -> String {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("HTTP/1.1 {status} {reason}")
}

/// Compares a server-side replay's world with its recording.
pub fn report_server(
    rec: &Recording,
    d: &Derived,
    out: &WorldOutput,
    profile: Profile,
    scope: Scope,
) -> ReplayReport {
    let (mut recorded_ids, mut our_ids) =
        (Normalizer::with_timestamps(), Normalizer::with_timestamps());
    let mut frames = 0;
    let mut differing = 0;
    let mut bookkeeping = 0;
    let mut differences = Vec::new();
    let mut divergence: Option<(Divergence, Option<u64>)> = None;
    let mut compared = 0;
    let mut sequence = Vec::new();
    for (k, req) in d.requests.iter().enumerate() {
        let ours = out.answers[k].as_ref();
        let ours_text = ours.map_or(String::new(), |a| our_text(&a.content_type, &a.body));
        let Some(n) = d.exchange_of[k] else {
            // A prelude request: its ids are references for later exchanges, nothing to compare.
            recorded_ids.capture(&req.name, &req.recorded_text);
            our_ids.capture(&req.name, &ours_text);
            continue;
        };
        let x = &rec.exchanges()[n - 1];
        let Some(answer) = x.answer() else {
            // Nothing arrived in the recording: nothing to compare.
            continue;
        };
        compared += 1;
        if let ResponseBody::Sse(f) = &answer.body {
            frames += f.len();
        }
        let expected = Expected {
            name: req.name.clone(),
            status_line: status_line(answer.status),
            content_type: x.response_header("content-type").unwrap_or("").to_string(),
            body_text: req.recorded_text.clone(),
        };
        let diff = compare_answer(&expected, ours, &ours_text, &mut recorded_ids, &mut our_ids)
            .and_then(|d| scope.keep(x, d, &mut bookkeeping));
        sequence.push(SequenceRow {
            n,
            recorded: format!("{} {} → {}", x.method, x.path, answer.status),
            ours: ours.map_or("no answer".to_string(), |a| {
                format!("{} {} → {}", x.method, a.path, a.status)
            }),
            state: if diff.is_some() { "differs" } else { "match" },
        });
        if let Some(diff) = diff {
            differing += 1;
            differences.push(format!(
                "{n} {} {}: {}",
                x.method,
                x.path,
                diff.problems.join(", ")
            ));
            if divergence.is_none() {
                divergence = Some((
                    Divergence {
                        exchange: n,
                        request: format!("{} {}", x.method, x.path),
                        difference: diff,
                    },
                    ours.map(|a| a.ended_ms),
                ));
            }
        }
    }
    let until = divergence.as_ref().and_then(|(_, t)| *t);
    let trace = match &divergence {
        Some(_) => trace_until(&out.trace, until),
        None => Vec::new(),
    };
    ReplayReport {
        cassette: rec.origin().to_string(),
        side: "server",
        server_profile: profile.as_str().to_string(),
        client_profile: None,
        exchanges: compared,
        frames,
        differing,
        differences,
        bookkeeping_bodies_differing: bookkeeping,
        divergence: divergence.map(|(d, _)| d),
        sequence,
        violations: Vec::new(),
        turn_outcomes: Vec::new(),
        trace,
        stopped: out.stopped.clone(),
    }
}

/// The report of a client-side replay.
pub fn report_client(
    rec: &Recording,
    c: &super::client::ClientComparison,
    opts: &super::ReplayOptions,
) -> ReplayReport {
    use crate::harness::letta::conformance::render;
    let divergence = c.mismatch.as_ref().map(|m| Divergence {
        exchange: m.index + 1,
        request: m
            .expected
            .as_ref()
            .map_or("<end>".to_string(), ToString::to_string),
        difference: Difference {
            problems: vec![m.to_string()],
            diff: unified_diff(&render(&c.expected), &render(&c.actual), 2),
            recorded: render(&c.expected),
            ours: render(&c.actual),
        },
    });
    let violations = c
        .report
        .invariants
        .iter()
        .flat_map(|(inv, vs)| vs.iter().map(|v| (inv.to_string(), v.message.clone())))
        .collect();
    let lines: Vec<String> = c.report.trace_text.lines().map(str::to_string).collect();
    let skip = lines.len().saturating_sub(TRACE_LINES);
    let first_bad = c.mismatch.as_ref().map(|m| m.index);
    let show = |s: Option<&super::super::letta::conformance::Step>| {
        s.map_or("<end>".to_string(), ToString::to_string)
    };
    let sequence = (0..c.expected.len().max(c.actual.len()))
        .map(|i| SequenceRow {
            n: i + 1,
            recorded: show(c.expected.get(i)),
            ours: show(c.actual.get(i)),
            state: match first_bad {
                Some(b) if i == b => "differs",
                Some(b) if i > b => "not compared",
                _ => "match",
            },
        })
        .collect();
    ReplayReport {
        cassette: rec.origin().to_string(),
        side: "client",
        server_profile: opts.server.profile.as_str().to_string(),
        client_profile: Some(opts.client_profile.as_str().to_string()),
        exchanges: c.expected.len().max(c.actual.len()),
        frames: 0,
        differing: usize::from(c.mismatch.is_some()),
        differences: Vec::new(),
        bookkeeping_bodies_differing: 0,
        divergence,
        sequence,
        violations,
        turn_outcomes: c.report.turn_outcomes.clone(),
        trace: lines[skip..].to_vec(),
        stopped: None,
    }
}
