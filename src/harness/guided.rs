//! Guided exploration (`sim explore --guided`): the sweep spends its seeds where the trace is
//! new, and places faults where the protocol says a bug hides.
//!
//! A swarm sweep draws every seed's plan blind, from fixed families at random times. A guided
//! sweep adds what the protocol tells us is interesting, the way FoundationDB's BUGGIFY fires
//! at chosen code points rather than at random instants:
//! - **placed faults**: a crash, partition, hold or user abort triggered right after a
//!   protocol point a run reached (`on_event` triggers): right after `requires_approval`,
//!   between a tool's side effect and the send of its result, after the approval decision,
//!   during a resume, across a busy retry, between two tool calls of a batch; and stream faults
//!   at the frames that carry a tool call's arguments;
//! - **server behaviours** the swarm does not draw for the Letta system: 409 busy, 503
//!   shutting down, a pending approval appearing on a send (another client on the
//!   conversation), run-stream 500s, busy naming the client's own run;
//! - **client faults**: the user's interrupt in each phase of a turn (stream, tools, approval
//!   dialog) and a client crash and restart (after tools, after a chunk);
//! - **provider rejections** the swarm does not draw for the agent loop ([`LOOP_REJECTIONS`]):
//!   a 413 body-size rejection, request-structure and image-format 400/422s (each with its
//!   fallback resend), and a plain 400, 401, 403 or 404 that fail the turn unretried;
//! - **retry streaks** of the agent loop: two to four retryable errors on consecutive model
//!   calls, one step's retries past the first.
//!
//! And it is coverage-guided, as AFL is: the sweep runs in rounds of [`ROUND`] seeds per
//! scenario. A run joins its scenario's corpus when its trace shows a signal no earlier run
//! of the sweep showed (a coverage goal, a fault landing in a protocol state it never landed in,
//! a new count of retries or resumes). From the second round on, two seeds in three take a
//! corpus run's plan and edit it (the shrinker's plan editing run in reverse: add a fault at a
//! protocol point that run reached, add a fault of a family, move one fault's time, index or
//! count, drop one), one in three draws a fresh plan.
//!
//! Determinism: a round's plans are a function of its seeds and of the results of the rounds
//! before it, read in (scenario, seed) order; so a guided sweep is a function of (scenarios,
//! seeds), whatever `--jobs` is. Every run's plan is explicit, and its reproduce command carries
//! it (`sim run … --plan '<fault>'`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use rand::{RngExt as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use toml::Spanned;

use super::explore::{ExploreOptions, ExploreReport, SeedResult, assemble, run_items, work_items};
use super::faults::{CrashAt, During, Fault, RUN_READ_FAIL_MAX, When};
pub use super::guidance::{Guidance, Point, guidance};
use super::scenario::{InputError, Scenario};
use super::swarm::{PROVIDER_ERROR_STATUSES, Ratio};
use super::system::{Baseline, System};
use super::world::derive_seed;
use crate::model::letta::server::Profile;
use crate::model::port::inject::DateField;
use crate::model::port::observe::Observation;

/// Seeds per scenario in one round: the plans of a round are drawn from the corpus the rounds
/// before it built.
pub const ROUND: u64 = 16;

/// Runs a scenario's corpus keeps at most (the first that showed something new).
pub const CORPUS_MAX: usize = 256;

/// What a scenario's fault-free run did, for drawing guided plans: the swarm's baseline and
/// the run's guidance, its turns and the sends that carry a user message.
#[derive(Debug, Clone)]
pub struct Root {
    pub system: System,
    pub swarm: Baseline,
    pub guidance: Guidance,
    pub turns: u32,
    pub user_sends: Vec<u64>,
    pub sends: u64,
    pub max_chunks: u64,
    /// The conversation the client talks on, as the server stores it: the agent's id for the
    /// default conversation, which the server model keys by that id (letta-protocol.md §1.7).
    /// A stale approval at start goes there.
    pub conversation: String,
    /// The added families this scenario can take: the server behaviours are the hosted and
    /// open-source servers', not the CLI's in-process backend's (letta-protocol.md §7: no busy
    /// check, and no other client can leave a call pending in it).
    pub families: &'static [&'static str],
}

impl Root {
    /// The root of `scenario`: its fault-free run (seed 0, its explicit faults removed). A
    /// root run that panics roots the sweep in an empty trace: its plans are drawn from
    /// nothing and each seed's own run reports the panic as its failure.
    pub fn of(scenario: &Scenario) -> Result<Root, InputError> {
        let mut clean = scenario.clone();
        clean.faults.clear();
        let system = clean.system();
        let (trace, end_ms) = match super::guard::guarded(|| system.run_world(&clean, 0))? {
            Ok(out) => (out.trace, out.end_ms),
            Err(_panic) => (Vec::new(), 0),
        };
        let swarm = system.baseline_of(&trace, end_ms);
        let (sends, max_chunks) = match &swarm {
            Baseline::Letta(b) => (
                b.response_frames.len().max(1) as u64,
                b.response_frames.iter().copied().max().unwrap_or(1),
            ),
            Baseline::Kimi(_) => (1, 1),
        };
        let goals = super::coverage::reached(system.goals(), &trace);
        let families: &'static [&'static str] = match system {
            System::Letta if clean.server_profile()? == Profile::Local => &LOCAL_FAMILIES,
            System::Letta => &LETTA_FAMILIES,
            System::Kimi => &LOOP_FAMILIES,
        };
        Ok(Root {
            system,
            swarm,
            guidance: guidance(&goals, &trace),
            turns: trace
                .iter()
                .filter(|e| matches!(e.obs, Observation::TurnStart { .. }))
                .count()
                .max(1) as u32,
            user_sends: super::realclient::plan::user_sends(&trace),
            sends,
            max_chunks,
            conversation: if clean.client.conversation == "default" {
                clean.agent.id.clone()
            } else {
                clean.client.conversation.clone()
            },
            families,
        })
    }
}

/// The families a guided plan adds to the swarm's, each on for a fresh seed with the swarm's
/// probability.
pub const LETTA_FAMILIES: [&str; 3] = ["placed", "server", "client"];
pub const LOCAL_FAMILIES: [&str; 2] = ["placed", "client"];
pub const LOOP_FAMILIES: [&str; 3] = ["placed", "rejection", "retries"];

/// The `rejection` family of the agent loop: a provider answer the swarm's statuses (429, 500,
/// 503, 529) never give, each with the loop's documented handling: a resend on a fallback
/// projection (kimi-loop.md §4.7), or a failed turn without a retry (§6, "400, 401, 403, 404,
/// 413 and 422 are not retried").
pub const LOOP_REJECTIONS: [(u16, &str); 10] = [
    // §4.7 1 and §7.13 media harness: the body-size rejection → the media-degraded resend.
    (413, "Request exceeds the maximum size"),
    // §4.7 3 and §7.13 strict cases 1–3 verbatim → the strict resend.
    (
        400,
        "messages.142: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01",
    ),
    (400, "400 tool_call_id  is not found"),
    (
        400,
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
    ),
    // §4.7 3: roles that do not alternate, as a 422.
    (
        422,
        "messages: roles must alternate between \"user\" and \"assistant\"",
    ),
    // §4.7 2 and §7.13 case 11: an image-format 400 → the media-stripped resend.
    (400, "unsupported image format"),
    // §7.13 strict case 4: a plain 400 is rethrown; the turn fails.
    (400, "Bad request"),
    // §6: not retried, not a fallback; the turn fails.
    (401, "invalid x-api-key"),
    (
        403,
        "Your API key does not have permission to use the specified resource",
    ),
    (404, "model: the requested model does not exist"),
];

/// A fresh guided plan for `seed`: the swarm's plan of the seed, plus one fault from each added
/// family that is on.
pub fn fresh_plan(seed: u64, root: &Root) -> Vec<Fault> {
    let mut plan = root.swarm.plan(seed);
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, "guided"));
    let families = root.families;
    let on: Vec<bool> = families
        .iter()
        .map(|_| super::swarm::FAMILY_ON.draw(&mut rng))
        .collect();
    for (family, on) in families.iter().zip(on) {
        if on {
            plan.extend(family_fault(family, &mut rng, root, &root.guidance));
        }
    }
    // Its own stream, so the draws above are the same whether or not the plan is cut down.
    let mut heal = ChaCha8Rng::seed_from_u64(derive_seed(seed, "guided-heal"));
    if HEALING_PLANS.draw(&mut heal) {
        root.system.keep_healing(&mut plan);
    }
    plan
}

/// The share of fresh guided plans cut down to the faults that heal within a budget: a plan with
/// one partition, crash or provider fault is not judged by `recovery-completes`, and most swarm
/// plans hold one, so without these the oracle would judge few guided runs (docs/explore.md).
pub const HEALING_PLANS: Ratio = Ratio::new(1, 4);

/// The faults of one draw of an added family, placed with what `at` (a run of the scenario)
/// reached: one, except a server family's busy streak and a retry streak.
fn family_fault(family: &str, rng: &mut ChaCha8Rng, root: &Root, at: &Guidance) -> Vec<Fault> {
    match family {
        "placed" => placed_fault(rng, root.system, at).into_iter().collect(),
        "server" => server_faults(rng, root),
        "rejection" => rejection_faults(rng, root),
        "retries" => retry_streak(rng, root),
        _ => vec![client_fault(rng, root)],
    }
}

/// A fault at a protocol point `at` reached: one of its points, or one of the frames that
/// carried a tool call.
pub fn placed_fault(rng: &mut ChaCha8Rng, system: System, at: &Guidance) -> Option<Fault> {
    let frames = !at.tool_frames.is_empty() && system == System::Letta;
    if frames && (at.points.is_empty() || rng.random_range(0..4u32) == 0) {
        let (response, frame) = at.tool_frames[rng.random_range(0..at.tool_frames.len())];
        let actions = super::letta::swarm::STREAM_ACTIONS;
        return Some(Fault::ServerStream {
            response,
            frame,
            action: actions[rng.random_range(0..actions.len())],
        });
    }
    if at.points.is_empty() {
        return None;
    }
    let p = &at.points[rng.random_range(0..at.points.len())];
    let when = When::OnEvent {
        event: p.event.clone(),
        nth: p.nth,
    };
    let pair = |a: &str, b: &str| [a.to_string(), b.to_string()];
    Some(match (system, rng.random_range(0..4u32)) {
        (System::Letta, 0) => Fault::Crash {
            host: "server".into(),
            when,
            restart_after_ms: Some(rng.random_range(50..=2_000)),
        },
        (System::Letta, 1) => Fault::Partition {
            between: pair("client", "server"),
            when,
            duration_ms: rng.random_range(100..=5_000),
        },
        (System::Letta, 2) => Fault::Hold {
            between: pair("client", "server"),
            when,
            duration_ms: rng.random_range(100..=5_000),
        },
        (System::Letta, _) => Fault::Crash {
            host: "provider".into(),
            when,
            restart_after_ms: Some(rng.random_range(50..=2_000)),
        },
        (System::Kimi, 0 | 1) => Fault::UserAbort {
            when,
            reason: Some(super::kimi::swarm::abort_reason(rng)),
        },
        (System::Kimi, 2) => Fault::Partition {
            between: pair("client", "provider"),
            when,
            duration_ms: rng.random_range(100..=5_000),
        },
        (System::Kimi, _) => Fault::Crash {
            host: "provider".into(),
            when,
            restart_after_ms: Some(rng.random_range(50..=2_000)),
        },
    })
}

/// [`LOOP_REJECTIONS`] by how the loop handles them: the media-degraded resend, the
/// media-stripped resend, the strict resend, none (the turn fails). A rejection's class is drawn
/// first, so each handling is as likely as the others, whatever the number of texts in it.
const REJECTION_CLASSES: [std::ops::Range<usize>; 4] = [0..1, 5..6, 1..5, 6..10];

/// The share of rejection draws in which the user aborts the turn as the rejection arrives.
pub const ABORT_AT_REJECTION: Ratio = Ratio::new(1, 3);

/// One of the root's model calls answered with one of [`LOOP_REJECTIONS`]; in
/// [`ABORT_AT_REJECTION`] of draws the user's abort lands on that same answer. `runTurn` returns
/// any error thrown once the signal fired as `aborted` (kimi-loop.md §3.3 catch-all: "a provider
/// 500 that happens to arrive after an abort"); the swarm's independent draws rarely meet that
/// race.
fn rejection_faults(rng: &mut ChaCha8Rng, root: &Root) -> Vec<Fault> {
    let calls = match &root.swarm {
        Baseline::Kimi(b) => b.provider_frames.len().max(1) as u32,
        Baseline::Letta(_) => 1,
    };
    let class = REJECTION_CLASSES[rng.random_range(0..REJECTION_CLASSES.len())].clone();
    let (status, message) = LOOP_REJECTIONS[rng.random_range(class)];
    let call = rng.random_range(0..calls);
    let mut faults = vec![Fault::ProviderError {
        call,
        status,
        retry_after_s: None,
        message: Some(message.to_string()),
    }];
    if ABORT_AT_REJECTION.draw(rng) {
        faults.push(Fault::UserAbort {
            // The loop observes each model answer, a rejection too; calls count from 0.
            when: When::OnEvent {
                event: "loop_provider_response".into(),
                nth: call + 1,
            },
            reason: Some(super::kimi::swarm::abort_reason(rng)),
        });
    }
    faults
}

/// The longest retry streak: past the 3 attempts a step had before the default was raised to
/// 10 (kimi-loop.md §6), and well inside the 10.
const RETRY_STREAK_MAX: u32 = 4;

/// Two to [`RETRY_STREAK_MAX`] retryable errors on consecutive model calls from one of the
/// root's: one step's retries past the first, each answered with the backoff table's next delay.
/// The swarm draws one provider error at a time, so a step never sees its third attempt. Each
/// error takes its call's answer's place (docs/faults.md), so the step ends as it would have.
fn retry_streak(rng: &mut ChaCha8Rng, root: &Root) -> Vec<Fault> {
    let calls = match &root.swarm {
        Baseline::Kimi(b) => b.provider_frames.len().max(1) as u32,
        Baseline::Letta(_) => 1,
    };
    let first = rng.random_range(0..calls);
    let streak = rng.random_range(2..=RETRY_STREAK_MAX);
    (first..first + streak)
        .map(|call| Fault::ProviderError {
            call,
            // The swarm's statuses, each one `chatWithRetry` retries (kimi-loop.md §6).
            status: PROVIDER_ERROR_STATUSES[rng.random_range(0..PROVIDER_ERROR_STATUSES.len())],
            retry_after_s: None,
            message: None,
        })
        .collect()
}

/// The longest busy streak a server draw makes: the client's busy budget (letta-protocol.md
/// §3.9: 3 retries), so a streak can spend it, and a client that miscounts it or backs off
/// wrongly past the first retry shows.
const BUSY_STREAK_MAX: u64 = 3;

/// The longest 503 streak a server draw makes: one more than the client's shutdown retries
/// (letta-protocol.md §3.3: 3), so the last 503 reaches the turn's transient retry.
const SHUTDOWN_STREAK_MAX: u64 = 4;

/// A server behaviour of the Letta server (docs/faults.md), on one of the sends the root made;
/// or one the swarm's single draws cannot make: busy answers to two or three consecutive sends
/// (the busy budget and backoff past the first retry), or a call left pending on the client's
/// conversation before it starts (its start-up check, letta-protocol.md §6).
fn server_faults(rng: &mut ChaCha8Rng, root: &Root) -> Vec<Fault> {
    let send = rng.random_range(1..=root.sends);
    vec![match rng.random_range(0..8u32) {
        0 => Fault::BusyOnSend { send },
        5 => {
            let streak = rng.random_range(2..=BUSY_STREAK_MAX);
            return (send..send + streak)
                .map(|send| Fault::BusyOnSend { send })
                .collect();
        }
        6 => Fault::StaleApproval {
            conversation: root.conversation.clone(),
            tool_call_id: "toolu_stale_start".into(),
            tool: super::faults::plan::default_stale_tool(),
            arguments: super::faults::plan::default_stale_args(),
        },
        1 => {
            // One 503, or a streak that spends the client's 3 shutdown retries and reaches its
            // transient retry (letta-protocol.md §3.3); each with a `Retry-After` form of
            // `retry_after_form` (§3.8), the client's only reads of the header.
            let streak = if rng.random_range(0..2u32) == 0 {
                1
            } else {
                rng.random_range(2..=SHUTDOWN_STREAK_MAX)
            };
            let (retry_after_s, retry_after_date, retry_after_broken) = retry_after_form(rng, 5);
            return (send..send + streak)
                .map(|send| Fault::ShuttingDownOnSend {
                    send,
                    retry_after_s,
                    retry_after_date,
                    retry_after_broken,
                })
                .collect();
        }
        2 => {
            let sends: &[u64] = if root.user_sends.is_empty() {
                &[1]
            } else {
                &root.user_sends
            };
            let first = rng.random_range(0..sends.len());
            let stale = super::realclient::plan::stale_approval_on(sends[first]);
            // A third of the time, when a later user send exists, the same call is named again
            // on it: answered by then, the id stands in the history, and the server must not
            // leave it pending twice (letta-protocol.md §3.4; a call id stands once). The first
            // conflict costs the client one more send (the denial, sent with the message again),
            // so the later user message arrives one send later than in the root. (A headless
            // published client sends the denial alone, a send of its own, so there the second
            // fault lands one send before that message.)
            if first + 1 < sends.len() && rng.random_range(0..3u32) == 0 {
                let again = sends[rng.random_range(first + 1..sends.len())] + 1;
                return vec![stale, super::realclient::plan::stale_approval_on(again)];
            }
            if rng.random_range(0..2u32) == 0 {
                stale
            } else {
                match stale {
                    Fault::ApprovalPendingOnSend {
                        send,
                        tool_call_id,
                        tool,
                        arguments,
                    } => Fault::ApprovalPendingInBand {
                        send,
                        tool_call_id,
                        tool,
                        arguments,
                    },
                    other => other,
                }
            }
        }
        3 => {
            // The resume stream's 500s, each with a `Retry-After` form of `retry_after_form`:
            // the published client's SDK retries read it (letta-protocol.md §2.8).
            let times = rng.random_range(1..=3);
            let (retry_after_s, retry_after_date, retry_after_broken) = retry_after_form(rng, 3);
            Fault::RunStreamFail {
                times,
                retry_after_s,
                retry_after_date,
                retry_after_broken,
            }
        }
        7 => {
            // Failed run lookups: the SDK retries a read twice (letta-protocol.md §2.8), so three
            // fail one lookup and up to nine the first three, after which the client judges an
            // error by its stream's line (§3.7) or a resume cannot check its run (§4.4).
            Fault::RunReadFail {
                times: rng.random_range(1..=RUN_READ_FAIL_MAX),
            }
        }
        _ => Fault::BusyOwnRun { send },
    }]
}

/// A `Retry-After` for a server fault, one of four forms: none, up to `max_s` seconds, the
/// HTTP date that far ahead, or that date with one field out of range (a header no client can
/// read, letta-protocol.md §3.8: unparseable → none), as `(retry_after_s, retry_after_date,
/// retry_after_broken)`.
fn retry_after_form(rng: &mut ChaCha8Rng, max_s: u64) -> (Option<u64>, bool, Option<DateField>) {
    match rng.random_range(0..4u32) {
        0 => (None, false, None),
        1 => (Some(rng.random_range(1..=max_s)), false, None),
        2 => (Some(rng.random_range(1..=max_s)), true, None),
        _ => {
            let s = rng.random_range(1..=max_s);
            let field = DateField::ALL[rng.random_range(0..DateField::ALL.len())];
            (Some(s), true, Some(field))
        }
    }
}

/// The user or the client process of a Letta turn: an interrupt in one of the turn's phases,
/// or a crash and restart.
fn client_fault(rng: &mut ChaCha8Rng, root: &Root) -> Fault {
    let turn = rng.random_range(1..=root.turns);
    let chunk = rng.random_range(1..=root.max_chunks.max(1)) as u32;
    match rng.random_range(0..5u32) {
        0 => Fault::Interrupt {
            turn,
            during: During::Stream,
            after_chunk: Some(chunk),
            after_ms: None,
        },
        1 => Fault::Interrupt {
            turn,
            during: During::Tools,
            after_chunk: None,
            after_ms: Some(rng.random_range(0..=2_000)),
        },
        2 => Fault::Interrupt {
            turn,
            during: During::Approval,
            after_chunk: None,
            after_ms: None,
        },
        3 => Fault::ClientCrash {
            turn,
            at: CrashAt::AfterTools,
            after_chunk: None,
        },
        _ => Fault::ClientCrash {
            turn,
            at: CrashAt::AfterChunk,
            after_chunk: Some(chunk),
        },
    }
}

/// An edit of a corpus run's plan: one or two of: add a fault at a protocol point the run
/// reached, add a fault of a family, move one number of one fault, drop one fault.
pub fn mutate(seed: u64, parent: &[Fault], at: &Guidance, root: &Root) -> Vec<Fault> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, "guided-edit"));
    let mut plan = parent.to_vec();
    let edits = rng.random_range(1..=2u32);
    for _ in 0..edits {
        match rng.random_range(0..8u32) {
            0..=2 => plan.extend(placed_fault(&mut rng, root.system, at)),
            3 => {
                let families = root.families;
                let f = families[rng.random_range(0..families.len())];
                plan.extend(family_fault(f, &mut rng, root, at));
            }
            4 => {
                // One fault of the seed's swarm plan.
                let swarm = root.swarm.plan(rng.random_range(0..u64::from(u32::MAX)));
                if !swarm.is_empty() {
                    plan.push(swarm[rng.random_range(0..swarm.len())].clone());
                }
            }
            5 | 6 if !plan.is_empty() => {
                let i = rng.random_range(0..plan.len());
                if let Some(f) = nudge(&plan[i], &mut rng) {
                    plan[i] = f;
                }
            }
            _ if plan.len() > 1 => {
                plan.remove(rng.random_range(0..plan.len()));
            }
            _ => plan.extend(placed_fault(&mut rng, root.system, at)),
        }
    }
    plan
}

/// `fault` with one of its numbers moved: one up or down, doubled or halved. `None` when it has
/// no number or the moved one does not read back as a fault.
fn nudge(fault: &Fault, rng: &mut ChaCha8Rng) -> Option<Fault> {
    let mut v = serde_json::to_value(fault).ok()?;
    let map = v.as_object_mut()?;
    let keys: Vec<String> = map
        .iter()
        .filter(|(_, x)| x.is_u64())
        .map(|(k, _)| k.clone())
        .collect();
    if keys.is_empty() {
        return None;
    }
    let k = &keys[rng.random_range(0..keys.len())];
    let old = map[k].as_u64()?;
    let new = match rng.random_range(0..4u32) {
        0 => old + 1,
        1 => old.saturating_sub(1),
        2 => old.saturating_mul(2),
        _ => old / 2,
    };
    map.insert(k.clone(), new.into());
    match serde_json::from_value(v).ok()? {
        // A drawn plan's failed run reads stay within their bound: past it they outlast the
        // heal, and the client waiting on them is the fault, not a finding (docs/faults.md).
        Fault::RunReadFail { times } => Some(Fault::RunReadFail {
            times: times.clamp(1, RUN_READ_FAIL_MAX),
        }),
        moved => Some(moved),
    }
}

/// A scenario's corpus: the runs that showed something new, and every signal seen so far.
#[derive(Debug, Default)]
pub struct Corpus {
    entries: Vec<(Vec<Fault>, Guidance)>,
    seen: BTreeSet<String>,
}

impl Corpus {
    /// Adds the run of `plan` if its guidance shows a signal not seen before.
    pub fn offer(&mut self, plan: &[Fault], g: &Guidance) -> bool {
        let mut new = false;
        for s in &g.signals {
            new |= self.seen.insert(s.clone());
        }
        if new && self.entries.len() < CORPUS_MAX {
            self.entries.push((plan.to_vec(), g.clone()));
        }
        new
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The signals seen so far.
    pub fn seen(&self) -> usize {
        self.seen.len()
    }
}

/// The plan of `seed` in a round drawn from `corpus`: fresh in the first round and one time in
/// three, else an edit of a corpus run's plan. Faults the scenario refuses (a target it cannot
/// reach) are dropped.
pub fn plan_for(seed: u64, scenario: &Scenario, root: &Root, corpus: &Corpus) -> Vec<Fault> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, "guided-pick"));
    let plan = if corpus.is_empty() || rng.random_range(0..3u32) == 0 {
        fresh_plan(seed, root)
    } else {
        let (parent, at) = &corpus.entries[rng.random_range(0..corpus.entries.len())];
        mutate(seed, parent, at, root)
    };
    accepted(scenario, plan)
}

/// `plan` without the faults `scenario` refuses, in order: each fault is kept if the scenario
/// with the faults kept so far and it still loads.
pub fn accepted(scenario: &Scenario, plan: Vec<Fault>) -> Vec<Fault> {
    let mut kept: Vec<Fault> = Vec::new();
    for f in plan {
        if f.problem().is_some() {
            continue;
        }
        let mut s = scenario.clone();
        s.faults.extend(
            kept.iter()
                .chain([&f])
                .cloned()
                .map(|f| Spanned::new(0..0, f)),
        );
        if s.checked().is_ok() {
            kept.push(f);
        }
    }
    kept
}

/// A guided sweep run in the calling process (as `harness::explore::explore` runs a swarm
/// sweep); `sim explore --guided` runs its rounds in worker processes instead.
pub fn explore_in_process(
    scenarios: &[Scenario],
    options: &ExploreOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ExploreReport, InputError> {
    let work = work_items(scenarios, options);
    explore(scenarios, options, progress, &mut |items, plans| {
        let results: Mutex<Vec<(usize, Result<SeedResult, InputError>)>> = Mutex::new(Vec::new());
        run_items(scenarios, options, &work, items, plans, &|_| {}, &|i, r| {
            results.lock().unwrap().push((i, r));
        })?;
        results
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|(i, r)| r.map(|r| (i, r)))
            .collect()
    })
}

/// Runs a round's work items (indexes into the sweep's work items) with their plans and
/// returns each item's result, in any order.
pub type RunRound<'a> = dyn FnMut(&[usize], &BTreeMap<usize, Vec<Fault>>) -> Result<Vec<(usize, SeedResult)>, InputError>
    + 'a;

/// A guided sweep of `scenarios` over `options.seeds`: round by round, each round's plans drawn
/// from the corpus the rounds before it built (see the module comment), run by `run_round`.
/// `progress(done, total)` is called after every round.
pub fn explore(
    scenarios: &[Scenario],
    options: &ExploreOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
    run_round: &mut RunRound<'_>,
) -> Result<ExploreReport, InputError> {
    let work = work_items(scenarios, options);
    let per_scenario = if scenarios.is_empty() {
        0
    } else {
        work.len() / scenarios.len()
    };
    let roots: Vec<Root> = scenarios.iter().map(Root::of).collect::<Result<_, _>>()?;
    let mut corpora: Vec<Corpus> = scenarios.iter().map(|_| Corpus::default()).collect();
    let mut results: Vec<Option<SeedResult>> = vec![None; work.len()];
    let total = work.len() as u64;
    let mut done = 0u64;
    let mut start = 0;
    while start < per_scenario {
        let end = (start + ROUND as usize).min(per_scenario);
        let mut items = Vec::new();
        let mut plans = BTreeMap::new();
        for (si, scenario) in scenarios.iter().enumerate() {
            for k in start..end {
                let i = si * per_scenario + k;
                let seed = work[i].1;
                items.push(i);
                plans.insert(i, plan_for(seed, scenario, &roots[si], &corpora[si]));
            }
        }
        for (i, r) in run_round(&items, &plans)? {
            results[i] = Some(r);
        }
        // The corpus grows in (scenario, seed) order, whatever order the runs ended in.
        for &i in &items {
            let r = results[i]
                .as_mut()
                .expect("every item of a round has a result");
            if let Some(g) = r.guidance.take() {
                corpora[work[i].0].offer(&plans[&i], &g);
            }
        }
        done += items.len() as u64;
        progress(done, total);
        start = end;
    }
    assemble(
        scenarios,
        options,
        results
            .into_iter()
            .map(|r| Ok(r.expect("every seed has a result"))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::port::inject::StreamFault;

    #[test]
    fn the_corpus_keeps_only_runs_that_show_something_new() {
        let mut c = Corpus::default();
        let g = |s: &[&str]| Guidance {
            signals: s.iter().map(|s| s.to_string()).collect(),
            ..Guidance::default()
        };
        assert!(c.offer(&[], &g(&["a", "b"])));
        assert!(!c.offer(&[], &g(&["b", "a"])));
        assert!(c.offer(&[], &g(&["c"])));
        assert_eq!((c.len(), c.seen()), (2, 3));
    }

    #[test]
    fn rejection_classes_cover_every_rejection_once() {
        let mut covered: Vec<usize> = REJECTION_CLASSES.iter().cloned().flatten().collect();
        covered.sort_unstable();
        assert_eq!(covered, (0..LOOP_REJECTIONS.len()).collect::<Vec<_>>());
        let statuses = |class: usize| -> Vec<u16> {
            LOOP_REJECTIONS[REJECTION_CLASSES[class].clone()]
                .iter()
                .map(|(s, _)| *s)
                .collect()
        };
        assert_eq!(statuses(0), [413]);
        assert_eq!(statuses(1), [400]);
        assert_eq!(statuses(2), [400, 400, 400, 422]);
        assert_eq!(statuses(3), [400, 401, 403, 404]);
    }

    #[test]
    fn nudging_moves_one_number_and_keeps_a_fault() {
        let f = Fault::ServerStream {
            response: 2,
            frame: 5,
            action: StreamFault::Reset,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut moved = 0;
        for _ in 0..50 {
            if let Some(g) = nudge(&f, &mut rng) {
                assert_eq!(g.kind(), "server_stream");
                moved += usize::from(g != f);
            }
        }
        assert!(moved > 20, "{moved}");
    }

    /// Doubling a drawn `run_read_fail` keeps it within the bound its family draws from: past
    /// it the failed reads outlast the heal and `turn-terminates` reports the fault itself.
    #[test]
    fn nudging_keeps_failed_run_reads_within_their_bound() {
        let f = Fault::RunReadFail {
            times: RUN_READ_FAIL_MAX,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..50 {
            match nudge(&f, &mut rng) {
                Some(Fault::RunReadFail { times }) => {
                    assert!((1..=RUN_READ_FAIL_MAX).contains(&times), "{times}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// The sweep docs/finding-power.md measures the models with, as a test: every bundled
    /// scenario of scenarios/letta and scenarios/kimi over `LOOPSIM_FINDING_POWER_SEEDS` seeds
    /// (2 by default; the mutation run uses more), once as written (no plan: `ends-as-declared`
    /// holds each run to the scenario's declared outcomes), once with swarm plans, once
    /// guided, and the Letta scenarios guided once more with the published client's profile
    /// (`published`). All must pass. It prints one `finding-power: {json}` line (runs, failures and the
    /// first failing seed of each way), which tests/mutants/summarize.py reads off each
    /// mutant's log.
    #[test]
    fn finding_power_sweeps_of_the_bundled_scenarios_pass() {
        use super::explore_in_process;
        use crate::harness::explore::{ExploreOptions, explore};
        let seeds: u64 = std::env::var("LOOPSIM_FINDING_POWER_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2);
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        // `LOOPSIM_FINDING_POWER_DIRS=kimi` sweeps one system's scenarios only (checking a
        // mutant of one model by hand); the default is both.
        let dirs: Vec<String> = std::env::var("LOOPSIM_FINDING_POWER_DIRS")
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_else(|_| vec!["letta".into(), "kimi".into()]);
        let mut files = Vec::new();
        for dir in &dirs {
            let mut in_dir: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            in_dir.sort();
            files.extend(in_dir);
        }
        let scenarios: Vec<Scenario> = files.iter().map(|p| Scenario::load(p).unwrap()).collect();
        // The Letta scenarios again, against the published client's model (its known findings
        // set aside where the trace shows them, docs/findings.md "In any scenario").
        let published: Vec<Scenario> = scenarios
            .iter()
            .filter(|s| s.scenario.system.get_ref() == "letta")
            .map(|s| s.clone().with_client_profile(Some("letta-code")))
            .collect();
        let mut line = serde_json::Map::new();
        let mut failed = Vec::new();
        for (name, swarm, guided) in [
            ("plain", false, false),
            ("swarm", true, false),
            ("guided", false, true),
            ("published", false, true),
        ] {
            let scenarios = if name == "published" {
                &published
            } else {
                &scenarios
            };
            let options = ExploreOptions {
                seeds: 0..seeds,
                jobs: 2,
                shard: None,
                swarm,
                determinism_every: 0,
                guided,
            };
            let r = if guided {
                explore_in_process(scenarios, &options, &|_, _| {})
            } else {
                explore(scenarios, &options, &|_, _| {})
            }
            .unwrap();
            let first = r.failures.iter().map(|f| f.seed).min();
            line.insert(
                name.into(),
                serde_json::json!({
                    "runs": r.runs,
                    "failed": r.failures.len(),
                    "first_seed": first,
                    "invariants": r.by_invariant().keys().cloned().collect::<Vec<_>>(),
                }),
            );
            failed.extend(
                r.failures
                    .iter()
                    .take(3)
                    .map(|f| format!("{name}: {} seed {}: {}", f.scenario, f.seed, f.message)),
            );
        }
        println!("finding-power: {}", serde_json::Value::Object(line));
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }
}
