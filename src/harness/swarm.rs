//! Swarm testing: per seed, draw which fault families are on and where their faults land, and
//! turn that into an explicit plan (printed before the run, shrinkable, writable as a scenario).
//!
//! This is what every system's swarm is made of: exact integer probabilities, the per-family
//! switches, and the draws of the families systems share (network, process, provider). Each
//! system's folder lists its own families and places them inside what a fault-free run of the
//! same scenario did (its baseline). Every probability is an integer ratio drawn from a PRNG
//! seeded with `derive_seed(seed, label)`.

use rand::{RngExt as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::faults::{Fault, When};
use super::world::derive_seed;
use super::world_start::WorldStart;
use crate::model::port::inject::StreamFault;

/// A probability as an integer ratio `num / den`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub num: u32,
    pub den: u32,
}

impl Ratio {
    pub const fn new(num: u32, den: u32) -> Self {
        Ratio { num, den }
    }

    pub fn draw(self, rng: &mut ChaCha8Rng) -> bool {
        self.den > 0 && rng.random_range(0..self.den) < self.num
    }
}

/// Per-family switches: each family is on for a seed with this probability.
pub const FAMILY_ON: Ratio = Ratio::new(1, 2);

/// The plan for `seed`: the PRNG seeded from `label`, each of `families` switched on with
/// [`FAMILY_ON`], and one fault from each family that is on, drawn by `fault`. Every switch is
/// drawn first, so changing one family's placement never shifts another's switch.
pub fn draw_plan(
    seed: u64,
    label: &str,
    families: &[&'static str],
    mut fault: impl FnMut(&'static str, &mut ChaCha8Rng) -> Fault,
) -> Vec<Fault> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, label));
    let on: Vec<bool> = families.iter().map(|_| FAMILY_ON.draw(&mut rng)).collect();
    let mut faults = Vec::new();
    for (family, on) in families.iter().zip(on) {
        if on {
            faults.push(fault(family, &mut rng));
        }
    }
    faults
}

/// How often a swarm seed also moves the world's start, when its scenario names none.
pub const START_MOVED: Ratio = Ratio::new(1, 8);

/// Calendar edges a run's dates can cross (RFC 3339 UTC): 12 AM into 1 AM, 11 AM into noon and
/// 12 PM into 1 PM (the 12-hour time texts' turns), a year's end, 2028's leap day and the day
/// after it, the day after 2000's leap day, the turn of 2100 and the day after its February,
/// which has no 29th, and the second a signed 32-bit `time_t` runs out. A drawn start is an
/// edge less up to 3 s, so a run's first seconds, and any `Retry-After` date a few seconds
/// ahead, cross it.
pub const CALENDAR_EDGES: [&str; 10] = [
    "2026-03-09T01:00:00Z",
    "2026-06-15T12:00:00Z",
    "2026-06-15T13:00:00Z",
    "2027-01-01T00:00:00Z",
    "2028-02-29T00:00:00Z",
    "2028-03-01T00:00:00Z",
    "2000-03-01T00:00:00Z",
    "2100-03-01T00:00:00Z",
    "2100-01-01T00:00:00Z",
    "2038-01-19T03:14:08Z",
];

/// The start a swarm seed moves the world to, or `None` (seven seeds in eight): drawn from its
/// own stream, `derive_seed(seed, "swarm-start")`, so the fault plan of every seed is the same
/// whether or not its start moves.
pub fn swarm_start(seed: u64) -> Option<WorldStart> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, "swarm-start"));
    if !START_MOVED.draw(&mut rng) {
        return None;
    }
    let edge = CALENDAR_EDGES[rng.random_range(0..CALENDAR_EDGES.len())];
    let edge = WorldStart::parse(edge).expect("the calendar edges are instants");
    Some(WorldStart(edge.unix_ms() - rng.random_range(1..=3000)))
}

/// The `network` family: extra latency, a partition or a hold, at a time before `horizon`;
/// `between` draws the two hosts a partition or hold separates.
pub fn network_fault(
    rng: &mut ChaCha8Rng,
    horizon: u64,
    mut between: impl FnMut(&mut ChaCha8Rng) -> [String; 2],
) -> Fault {
    match rng.random_range(0..3u32) {
        0 => Fault::Latency {
            when: When::AtMs(rng.random_range(0..horizon)),
            max_ms: rng.random_range(20..=500),
        },
        1 => Fault::Partition {
            between: between(rng),
            when: When::AtMs(rng.random_range(0..horizon)),
            duration_ms: rng.random_range(100..=10_000),
        },
        _ => Fault::Hold {
            between: between(rng),
            when: When::AtMs(rng.random_range(0..horizon)),
            duration_ms: rng.random_range(100..=10_000),
        },
    }
}

/// The `process` family: `host` crashes at a time before `horizon` and restarts.
pub fn crash_fault(rng: &mut ChaCha8Rng, host: String, horizon: u64) -> Fault {
    Fault::Crash {
        host,
        when: When::AtMs(rng.random_range(0..horizon)),
        restart_after_ms: Some(rng.random_range(50..=5_000)),
    }
}

/// The error statuses the swarm's provider faults draw; each is one the clients retry
/// (letta-protocol.md §3.9, kimi-loop.md §6).
pub const PROVIDER_ERROR_STATUSES: [u16; 4] = [429, 500, 503, 529];

/// The `provider` family: one model call (of those a fault-free run made, `provider_frames`
/// frames each) fails with an error status, or its stream breaks at one of its frames with
/// one of `actions`.
pub fn provider_fault(
    rng: &mut ChaCha8Rng,
    provider_frames: &[u64],
    actions: &[StreamFault],
) -> Fault {
    let calls = provider_frames.len().max(1) as u32;
    let call = rng.random_range(0..calls);
    if rng.random_range(0..2u32) == 0 {
        let status = PROVIDER_ERROR_STATUSES[rng.random_range(0..PROVIDER_ERROR_STATUSES.len())];
        Fault::ProviderError {
            call,
            status,
            retry_after_s: (status == 429).then(|| rng.random_range(1..=30)),
            message: None,
        }
    } else {
        provider_stream_fault(rng, provider_frames, call, actions)
    }
}

/// Model call `call`'s stream breaks at one of its frames with one of `actions`.
pub fn provider_stream_fault(
    rng: &mut ChaCha8Rng,
    provider_frames: &[u64],
    call: u32,
    actions: &[StreamFault],
) -> Fault {
    let frames = provider_frames
        .get(call as usize)
        .copied()
        .unwrap_or(1)
        .max(1);
    Fault::ProviderStream {
        call,
        frame: rng.random_range(1..=frames),
        action: actions[rng.random_range(0..actions.len())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_exact_integer_draws() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(!Ratio::new(0, 5).draw(&mut rng));
        assert!(Ratio::new(5, 5).draw(&mut rng));
        assert!(!Ratio::new(1, 0).draw(&mut rng));
    }

    /// A moved start is a function of the seed, one seed in eight or so, and lands 1 ms to 3 s
    /// before one of the edges; every edge is drawn.
    #[test]
    fn a_swarm_start_lands_just_before_a_calendar_edge() {
        let edges: Vec<u64> = CALENDAR_EDGES
            .iter()
            .map(|e| WorldStart::parse(e).unwrap().unix_ms())
            .collect();
        let mut hit = vec![0; edges.len()];
        let mut moved = 0;
        for seed in 0..4000 {
            let Some(start) = swarm_start(seed) else {
                continue;
            };
            assert_eq!(swarm_start(seed), Some(start));
            moved += 1;
            let edge = edges
                .iter()
                .position(|e| (e - 3000..*e).contains(&start.unix_ms()))
                .unwrap_or_else(|| panic!("seed {seed}: {start} is before no edge"));
            hit[edge] += 1;
        }
        assert!((400..600).contains(&moved), "{moved} of 4000");
        assert!(hit.iter().all(|n| *n > 0), "{hit:?}");
    }
}
