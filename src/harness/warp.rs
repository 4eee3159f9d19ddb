//! The world's clock: simulated time is turmoil's elapsed time plus a warp offset the harness
//! owns, and every model timer is registered here, so the step loop can skip idle time.
//!
//! turmoil steps every host on every tick whether or not anything happens and has no API to
//! move its clock faster, so idle time cannot be skipped inside turmoil. It is skipped around
//! it instead: the hosts read time through their `Env`'s [`Clock`], which here is turmoil's
//! elapsed time plus the offset, and each model sleep is a tokio timer on the host's runtime
//! aimed at the turmoil instant where virtual time reaches its deadline. When the world is
//! quiescent between two steps (see [`crate::harness::world::run_to_end`]), the loop adds
//! whole ticks to the offset instead of stepping through them, and re-aims every pending timer
//! that many ticks earlier on its host's runtime, so each fires at the same virtual instant,
//! at the same place inside its tick, as without the skip.
//!
//! A skip of any number of ticks is exact because nothing a host runs depends on how many
//! steps its runtime has taken. tokio keeps per-runtime state that does: it reseeds the
//! thread RNG from the runtime's seed generator each time the runtime is entered (once per
//! turmoil step), and that RNG picks the branch order of an unbiased `select!` and the `Notify`
//! a `tokio::sync::watch` waiter waits on, so the order two waiters wake in. The models use
//! neither: every `select!` is `biased;` and change signals are
//! [`crate::model::port::signal`], which wakes waiters oldest first (tidy rules
//! `select-biased`, `step-rng`). The `LocalSet`'s and the scheduler's poll counters advance
//! with the steps too, but choose between queues that are always empty on a simulated host
//! (every task is on the set and woken on its thread, so it goes to the set's local queue).
//!
//! Re-aiming resets the pending timers in the order they were first polled (their
//! registration order in tokio's timer wheel, which fires timers due at one instant in that
//! order), so timers that share a deadline still wake their tasks in the same order.
//!
//! With warping off ([`WorldClock::new`] `false`) a sleep is a plain tokio timer and nothing is
//! registered: the stepping of before the warp existed, for `--no-warp` and for comparison.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::model::port::clock::{Clock, Sleep, Timers};

/// Whether scenarios loaded from now on skip idle time: on unless the command line's
/// `--no-warp` turned it off for the whole process. The trace is the same either way (the
/// equality test in tests/harness/warp.rs); `--no-warp` is for comparing the two.
static WARP_BY_DEFAULT: AtomicBool = AtomicBool::new(true);

/// Sets whether scenarios loaded from now on skip idle time.
pub fn set_warp_by_default(warp: bool) {
    WARP_BY_DEFAULT.store(warp, Ordering::SeqCst);
}

/// Whether a scenario loaded now skips idle time.
pub fn warp_by_default() -> bool {
    WARP_BY_DEFAULT.load(Ordering::SeqCst)
}

/// A tokio timer shared by its sleep future and the registry (which re-aims it).
type SharedSleep = Arc<Mutex<Pin<Box<tokio::time::Sleep>>>>;

/// One world's clock: the warp offset and the registry of pending model timers. Cloning
/// shares it.
#[derive(Clone)]
pub struct WorldClock(Arc<Inner>);

struct Inner {
    warp: AtomicBool,
    /// Counts every use of the world's Env by a host (a timer or stream polled, a connection
    /// made, an event observed): unchanged across a step means no host ran.
    activity: AtomicU64,
    /// Virtual time minus turmoil's elapsed time, in nanoseconds.
    offset_ns: AtomicU64,
    registry: Mutex<Registry>,
    /// The names of the hosts whose software took an Env from this world: how many hosts
    /// turmoil steps, for `sim bench --floor`.
    hosts: Mutex<BTreeSet<String>>,
}

#[derive(Default)]
struct Registry {
    next_seq: u64,
    /// Pending timers by registration order.
    pending: BTreeMap<u64, Pending>,
    /// (virtual deadline, registration) of every pending timer.
    by_deadline: BTreeSet<(Duration, u64)>,
}

struct Pending {
    deadline: Duration,
    /// The turmoil instant the timer is aimed at on its host's runtime.
    target: tokio::time::Instant,
    sleep: Weak<Mutex<Pin<Box<tokio::time::Sleep>>>>,
}

impl Default for WorldClock {
    fn default() -> Self {
        WorldClock::new(false)
    }
}

impl WorldClock {
    /// A clock at offset zero; `warp` says whether timers are registered for skipping.
    pub fn new(warp: bool) -> Self {
        WorldClock(Arc::new(Inner {
            warp: AtomicBool::new(warp),
            activity: AtomicU64::new(0),
            offset_ns: AtomicU64::new(0),
            registry: Mutex::new(Registry::default()),
            hosts: Mutex::new(BTreeSet::new()),
        }))
    }

    /// Turns warping on or off; only before the world's first step.
    pub fn set_warp(&self, warp: bool) {
        self.0.warp.store(warp, Ordering::SeqCst);
    }

    /// Whether idle time may be skipped.
    pub fn warps(&self) -> bool {
        self.0.warp.load(Ordering::SeqCst)
    }

    /// Notes that the software of host `name` started on this world (again, on a restart).
    pub fn host_started(&self, name: &str) {
        let mut hosts = self.0.hosts.lock().unwrap();
        if !hosts.contains(name) {
            hosts.insert(name.to_string());
        }
    }

    /// How many hosts have started software on this world.
    pub fn hosts(&self) -> usize {
        self.0.hosts.lock().unwrap().len()
    }

    /// Notes a use of the Env by a running host.
    pub fn touch(&self) {
        self.0.activity.fetch_add(1, Ordering::Relaxed);
    }

    /// How many uses of the Env there have been.
    pub fn activity(&self) -> u64 {
        self.0.activity.load(Ordering::Relaxed)
    }

    /// How far virtual time is ahead of turmoil's.
    pub fn offset(&self) -> Duration {
        Duration::from_nanos(self.0.offset_ns.load(Ordering::SeqCst))
    }

    /// Virtual time on the running host (turmoil's elapsed time there plus the offset; the
    /// offset alone outside the simulation).
    pub fn now(&self) -> Duration {
        turmoil::sim_elapsed().unwrap_or_default() + self.offset()
    }

    /// Virtual time between steps.
    pub fn elapsed(&self, sim: &turmoil::Sim<'_>) -> Duration {
        sim.elapsed() + self.offset()
    }

    /// Virtual time between steps, in whole milliseconds.
    pub fn elapsed_ms(&self, sim: &turmoil::Sim<'_>) -> u64 {
        self.elapsed(sim).as_millis() as u64
    }

    /// The earliest deadline of a pending timer at or after `now`. A timer whose deadline is
    /// before `now` fired in an earlier step, where its task ran; if that task dropped its
    /// interest without dropping the timer, it is no reason to stop.
    pub fn next_deadline(&self, now: Duration) -> Option<Duration> {
        let reg = self.0.registry.lock().unwrap();
        reg.by_deadline
            .range((now, 0)..)
            .next()
            .map(|(deadline, _)| *deadline)
    }

    /// Moves virtual time `by` ahead of turmoil's and re-aims every timer still pending after
    /// `now` that much earlier on its host, in registration order.
    pub fn advance(&self, now: Duration, by: Duration) {
        let offset = self.offset() + by;
        self.0
            .offset_ns
            .store(offset.as_nanos() as u64, Ordering::SeqCst);
        let mut reg = self.0.registry.lock().unwrap();
        for p in reg.pending.values_mut() {
            if p.deadline < now {
                continue;
            }
            let Some(sleep) = p.sleep.upgrade() else {
                continue;
            };
            p.target = p.target.checked_sub(by).unwrap_or(p.target);
            sleep.lock().unwrap().as_mut().reset(p.target);
        }
    }

    /// This clock as the model [`Clock`] a host's `Env` hands out.
    pub fn model_clock(&self) -> Clock {
        Clock::new(SimTimers(self.clone()))
    }

    fn register(
        &self,
        deadline: Duration,
        target: tokio::time::Instant,
        sleep: &SharedSleep,
    ) -> u64 {
        let mut reg = self.0.registry.lock().unwrap();
        let seq = reg.next_seq;
        reg.next_seq += 1;
        reg.pending.insert(
            seq,
            Pending {
                deadline,
                target,
                sleep: Arc::downgrade(sleep),
            },
        );
        reg.by_deadline.insert((deadline, seq));
        seq
    }

    fn deregister(&self, seq: u64) {
        let mut reg = self.0.registry.lock().unwrap();
        if let Some(p) = reg.pending.remove(&seq) {
            reg.by_deadline.remove(&(p.deadline, seq));
        }
    }
}

/// The turmoil instant on the running host where virtual time reaches `deadline`.
fn aim(clock: &WorldClock, deadline: Duration) -> Option<tokio::time::Instant> {
    let now = clock.now();
    // On a turmoil host this is the simulated instant (turmoil runs each host on a paused
    // tokio clock it advances itself), never the wall clock.
    let here = tokio::time::Instant::now();
    if deadline >= now {
        here.checked_add(deadline - now)
    } else {
        Some(here.checked_sub(now - deadline).unwrap_or(here))
    }
}

/// A host's model timers on the world clock.
struct SimTimers(WorldClock);

impl Timers for SimTimers {
    fn now(&self) -> Duration {
        self.0.touch();
        self.0.now()
    }

    fn sleep_until(&self, deadline: Duration) -> Sleep {
        if !self.0.warps() {
            return match aim(&self.0, deadline) {
                Some(at) => Box::pin(tokio::time::sleep_until(at)),
                None => Box::pin(std::future::pending()),
            };
        }
        Box::pin(WarpSleep {
            clock: self.0.clone(),
            deadline,
            armed: None,
            done: false,
        })
    }
}

/// A sleep the warp can re-aim: aimed and registered when first polled (as tokio registers a
/// timer on its first poll), deregistered when it completes or is dropped.
struct WarpSleep {
    clock: WorldClock,
    deadline: Duration,
    armed: Option<(u64, SharedSleep)>,
    done: bool,
}

impl Future for WarpSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.clock.touch();
        if self.done {
            return Poll::Ready(());
        }
        if self.armed.is_none() {
            let Some(target) = aim(&self.clock, self.deadline) else {
                return Poll::Pending;
            };
            let sleep: SharedSleep =
                Arc::new(Mutex::new(Box::pin(tokio::time::sleep_until(target))));
            let seq = self.clock.register(self.deadline, target, &sleep);
            self.armed = Some((seq, sleep));
        }
        let (seq, sleep) = self.armed.as_ref().expect("armed above");
        let polled = sleep.lock().unwrap().as_mut().poll(cx);
        if polled.is_ready() {
            let seq = *seq;
            self.clock.deregister(seq);
            self.armed = None;
            self.done = true;
        }
        polled
    }
}

impl Drop for WarpSleep {
    fn drop(&mut self) {
        if let Some((seq, _)) = self.armed.take() {
            self.clock.deregister(seq);
        }
    }
}
