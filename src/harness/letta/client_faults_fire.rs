//! `client-faults-fire` (docs/invariants.md): the user interrupts and client crashes a plan
//! scripts after a turn's n-th chunk fire there. Pure: it reads the scenario's plan and a
//! finished trace.
//!
//! The client model fires these faults itself (the harness cannot see inside a stream read),
//! so a client that stopped honouring them would turn every such plan into a fault-free run and
//! every sweep would pass for the wrong reason. The trace shows the client's chunks one by one
//! (`client_chunk`, observed exactly when the chunk reaches the fault hook), so the oracle
//! counts them itself and holds the client to its plan.

use crate::harness::invariants::{CLIENT_FAULTS_FIRE, Violation};
use crate::harness::letta::world::{CLIENT_CRASHED, interrupts_and_crashes};
use crate::harness::scenario::Scenario;
use crate::harness::trace::TraceEvent;
use crate::model::letta::client::{CrashWhen, InterruptWhen};
use crate::model::port::observe::Observation;

/// The host the Letta world runs its client on.
const CLIENT_HOST: &str = "client";

/// A turn as one client process runs it.
struct TurnRun {
    turn: u32,
    /// Chunks processed so far in this process.
    chunks: u32,
    /// The turn's armed `during = "stream"` interrupt: its chunk.
    interrupt_at: Option<u32>,
    /// The turn's armed crash: (plan index, chunk).
    crash_at: Option<(usize, u32)>,
    /// The interrupt is due: the event of the chunk it follows.
    interrupt_due: Option<usize>,
    /// The crash is due: (plan index, the event of the chunk it follows).
    crash_due: Option<(usize, usize)>,
}

/// Whether the scenario's plan scripts an interrupt or a client crash after a chunk: the runs
/// `client-faults-fire` judges.
pub fn scripts_chunk_faults(scenario: &Scenario) -> bool {
    let (interrupts, crashes) = interrupts_and_crashes(scenario);
    interrupts
        .iter()
        .any(|p| matches!(p.when, InterruptWhen::AfterChunk(_)))
        || crashes
            .iter()
            .any(|p| matches!(p.when, CrashWhen::AfterChunk(_)))
}

/// `client-faults-fire`: in every client process, a turn that processes its n-th chunk fires
/// the plan's interrupt `during = "stream", after_chunk = n` of that turn before it processes
/// another chunk, and a turn that processes its n-th chunk with a crash `at = "after_chunk",
/// after_chunk = n` of that turn unfired ends with that crash, not with a `turn_end`. As the
/// client arms them (`Client::drain_ctx`): a turn's first stream interrupt in plan order (a
/// user interrupts a turn once) and its first after-chunk crash not yet fired (a crash marks
/// its turn crashed, so it fires once). A process the harness kills (a `crash` of the client
/// in the plan) is not judged past its end: the turn runs again in the next process.
pub fn client_faults_fire(scenario: &Scenario, events: &[TraceEvent]) -> Vec<Violation> {
    let (interrupts, crashes) = interrupts_and_crashes(scenario);
    let mut fired: Vec<usize> = Vec::new();
    let mut current: Option<TurnRun> = None;
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::Fault { fault } if e.host == "harness" && fault == CLIENT_CRASHED => {
                if let Some((plan, _)) = current.take().and_then(|r| r.crash_due) {
                    fired.push(plan);
                }
            }
            _ if e.host != CLIENT_HOST => {}
            Observation::ClientStarted { .. } => current = None,
            Observation::TurnStart { turn, .. } => {
                let turn = *turn;
                current = Some(TurnRun {
                    turn,
                    chunks: 0,
                    interrupt_at: interrupts.iter().find_map(|p| match p.when {
                        InterruptWhen::AfterChunk(n) if p.turn == turn => Some(n),
                        _ => None,
                    }),
                    crash_at: crashes.iter().enumerate().find_map(|(k, p)| match p.when {
                        CrashWhen::AfterChunk(n) if p.turn == turn && !fired.contains(&k) => {
                            Some((k, n))
                        }
                        _ => None,
                    }),
                    interrupt_due: None,
                    crash_due: None,
                });
            }
            Observation::ClientChunk { .. } => {
                let Some(run) = current.as_mut() else {
                    continue;
                };
                if let Some(at) = run.interrupt_due.take() {
                    out.push(Violation::at(
                        CLIENT_FAULTS_FIRE,
                        i,
                        format!(
                            "turn {} processed another chunk after its chunk #{} (event {}) though the plan interrupts it there: the scripted interrupt never fired",
                            run.turn,
                            run.chunks,
                            at + 1
                        ),
                    ));
                }
                run.chunks += 1;
                if run.interrupt_at == Some(run.chunks) {
                    run.interrupt_due = Some(i);
                }
                if let Some((plan, n)) = run.crash_at
                    && n == run.chunks
                {
                    run.crash_due = Some((plan, i));
                }
            }
            Observation::ClientInterrupt { turn, during } if during == "stream" => {
                if let Some(run) = current.as_mut()
                    && run.turn == *turn
                {
                    run.interrupt_due = None;
                }
            }
            Observation::TurnEnd { turn, outcome } => {
                let Some(run) = current.take() else {
                    continue;
                };
                if let Some(at) = run.interrupt_due {
                    out.push(Violation::at(
                        CLIENT_FAULTS_FIRE,
                        i,
                        format!(
                            "turn {turn} ended ({outcome}) after its chunk #{} (event {}) though the plan interrupts it there: the scripted interrupt never fired",
                            run.interrupt_at.unwrap_or_default(),
                            at + 1
                        ),
                    ));
                }
                if let Some((_, at)) = run.crash_due {
                    out.push(Violation::at(
                        CLIENT_FAULTS_FIRE,
                        i,
                        format!(
                            "turn {turn} ended ({outcome}) after its chunk #{} (event {}) though the plan crashes the client there: the scripted crash never fired",
                            run.crash_at.map(|(_, n)| n).unwrap_or_default(),
                            at + 1
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}
