//! Injected time and randomness. The loop never reads the wall clock and never uses OS
//! entropy: timers go through [`Clock`] and every random draw (step and part uuids, retry
//! jitter) comes from a seeded [`LoopPrng`].

use std::sync::Mutex;

use futures::future::BoxFuture;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Time as the loop sees it: a millisecond counter and a sleep.
pub trait Clock: Send + Sync {
    /// Milliseconds since the clock's epoch.
    fn now_ms(&self) -> u64;
    /// Sleep for `duration_ms` milliseconds of this clock.
    fn sleep(&self, duration_ms: u64) -> BoxFuture<'static, ()>;
}

/// The loop's clock over a model [`port::clock::Clock`](crate::model::port::clock::Clock): the
/// host's in a simulation or on real TCP, tokio's in tests ([`TokioClock`]). `now_ms` counts
/// from `epoch_ms` at construction.
#[derive(Debug, Clone)]
pub struct PortClock {
    clock: crate::model::port::clock::Clock,
    origin: std::time::Duration,
    epoch_ms: u64,
}

/// The loop's clock on tokio's clock (tests under a paused runtime).
pub type TokioClock = PortClock;

impl PortClock {
    /// A clock over `clock` whose `now_ms` starts at `epoch_ms`.
    pub fn on(clock: crate::model::port::clock::Clock, epoch_ms: u64) -> Self {
        Self {
            origin: clock.now(),
            clock,
            epoch_ms,
        }
    }

    /// A clock on tokio's clock whose `now_ms` starts at `epoch_ms` (the harness sets it;
    /// tests use 0).
    pub fn new(epoch_ms: u64) -> Self {
        Self::on(crate::model::port::clock::Clock::tokio(), epoch_ms)
    }
}

impl Clock for PortClock {
    fn now_ms(&self) -> u64 {
        let elapsed = self.clock.now().saturating_sub(self.origin);
        self.epoch_ms + u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }

    fn sleep(&self, duration_ms: u64) -> BoxFuture<'static, ()> {
        self.clock
            .sleep(std::time::Duration::from_millis(duration_ms))
    }
}

/// The loop's only source of randomness: a seeded ChaCha8 stream behind a lock so the turn's
/// futures can share it.
#[derive(Debug)]
pub struct LoopPrng {
    prng: Mutex<ChaCha8Rng>,
}

impl LoopPrng {
    /// Wrap a seeded generator.
    pub fn new(prng: ChaCha8Rng) -> Self {
        Self {
            prng: Mutex::new(prng),
        }
    }

    /// A generator seeded from `seed`.
    pub fn from_seed(seed: u64) -> Self {
        Self::new(ChaCha8Rng::seed_from_u64(seed))
    }

    /// The next raw 64-bit draw.
    pub fn next_u64(&self) -> u64 {
        self.prng.lock().expect("prng poisoned").next_u64()
    }

    /// A uniform draw in `[0, 1)` (53 random bits), standing in for `Math.random()`.
    pub fn unit_f64(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A random UUIDv4 string, standing in for `randomUUID()`.
    pub fn uuid_v4(&self) -> String {
        let high = self.next_u64();
        let low = self.next_u64();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&high.to_be_bytes());
        bytes[8..].copy_from_slice(&low.to_be_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}
