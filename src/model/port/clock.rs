//! The one clock a model reads: time since the run's zero, sleeps and timeouts.
//!
//! Every sleep, timeout and reading of the time in `src/model` goes through a [`Clock`], which
//! an [`Env`](super::env::Env) hands out. The clock's source is behind [`Timers`]: the harness
//! supplies a simulated one whose time the harness owns (it may skip idle time, see
//! docs/performance.md), and this module supplies [`Clock::tokio`], tokio's clock, for real
//! TCP (`sim serve`) and for tests under a paused tokio runtime. This file is the only place in
//! `src/model` that names `tokio::time` (tests/tidy.rs enforces it).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// A pending sleep: completes at its deadline.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + Sync + 'static>>;

/// A clock's source of time and timers.
pub trait Timers: Send + Sync + 'static {
    /// Time since this clock's zero.
    fn now(&self) -> Duration;
    /// A future that completes when [`Timers::now`] reaches `deadline` (at once if it has).
    fn sleep_until(&self, deadline: Duration) -> Sleep;
}

/// A model's clock. Cloning shares the source.
#[derive(Clone)]
pub struct Clock(Arc<dyn Timers>);

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

/// A timeout ran out before its future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl Clock {
    /// A clock over `timers`.
    pub fn new(timers: impl Timers) -> Self {
        Clock(Arc::new(timers))
    }

    /// tokio's clock, with its zero at this call: real time on a normal runtime, virtual time
    /// under a paused one (`#[tokio::test(start_paused = true)]`).
    pub fn tokio() -> Self {
        Clock::new(TokioTimers {
            // Only `sim serve`, real TCP and paused-runtime tests build this clock; a simulated
            // world gets the harness clock from its Env, so no run reads real time here.
            origin: tokio::time::Instant::now(),
        })
    }

    /// Time since the clock's zero.
    pub fn now(&self) -> Duration {
        self.0.now()
    }

    /// Whole milliseconds since the clock's zero.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.now().as_millis()).unwrap_or(u64::MAX)
    }

    /// Completes when the clock reaches `deadline`.
    pub fn sleep_until(&self, deadline: Duration) -> Sleep {
        self.0.sleep_until(deadline)
    }

    /// Completes after `d` of this clock's time.
    pub fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now().saturating_add(d))
    }

    /// Runs `future` for at most `d`: its output, or [`Elapsed`] if the clock reached the
    /// deadline first. The deadline is taken now, as `tokio::time::timeout` takes it.
    pub fn timeout<F: Future>(&self, d: Duration, future: F) -> Timeout<F> {
        Timeout {
            value: Box::pin(future),
            delay: self.sleep(d),
        }
    }
}

/// [`Clock::timeout`]'s future. It polls like `tokio::time::timeout`: the future first, then the
/// deadline, and the deadline outside the task's cooperative budget when the future used the
/// last of it, so a future that keeps the budget exhausted still times out.
pub struct Timeout<F: Future> {
    value: Pin<Box<F>>,
    delay: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let had_budget_before = tokio::task::coop::has_budget_remaining();
        if let Poll::Ready(v) = self.value.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let has_budget_now = tokio::task::coop::has_budget_remaining();
        let delay = self.delay.as_mut();
        let polled = if had_budget_before && !has_budget_now {
            let mut free = tokio::task::coop::unconstrained(delay);
            Pin::new(&mut free).poll(cx)
        } else {
            delay.poll(cx)
        };
        polled.map(|()| Err(Elapsed))
    }
}

/// tokio's clock as [`Timers`].
struct TokioTimers {
    origin: tokio::time::Instant,
}

impl Timers for TokioTimers {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep_until(&self, deadline: Duration) -> Sleep {
        match self.origin.checked_add(deadline) {
            Some(at) => Box::pin(tokio::time::sleep_until(at)),
            None => Box::pin(std::future::pending()),
        }
    }
}
