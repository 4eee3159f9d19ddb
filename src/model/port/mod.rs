//! The seams through which a model meets the world. The harness implements them for the
//! simulation (turmoil) and for real TCP (`sim serve`); a model sees only these traits and types.
//!
//! - [`env`]: network, clock and observation for one host.
//! - [`clock`]: the clock an [`env::Env`] hands out: time, sleeps, timeouts.
//! - [`http`]: HTTP/1.1 over an [`env::Env`] stream.
//! - [`observe`]: the observable protocol events that become the trace.
//! - [`spawn`]: where a model's side tasks run.
//! - [`signal`]: a value tasks wait on to change, waking its waiters oldest first.
//! - [`inject`]: the injection points where a fault plan can act on a server or provider.

pub mod clock;
pub mod env;
pub mod http;
pub mod inject;
pub mod observe;
pub mod signal;
pub mod spawn;
