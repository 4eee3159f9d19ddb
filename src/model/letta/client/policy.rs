//! The turn-recovery policy of Letta Code as a pure module: no I/O, no clock, no randomness
//! (otids come from a generator the caller passes). Every table, classifier, decision function,
//! delay formula, budget and fixed text of letta-protocol.md §3 lives here, with the section it
//! comes from; the upstream tests of letta-tests-and-real-client.md Part A §A.3-A.4 are its unit
//! tests.
//!
//! Thrown values are modelled as JSON ([`serde_json::Value`]) shaped like the SDK's `APIError`
//! (`{status?, error?, message, headers?}`), because `extractConflictDetail` (§3.1) inspects
//! them dynamically and must tolerate anything (`null`, `42`, a string).
//!
//! One file per section, all names re-exported here: `texts` (fixed texts), `budgets`
//! (budgets, constants, resume policies), `thrown` (§3.1, §3.3), `classifiers` (§3.2),
//! `provider_errors` (§3.5-3.6), `pre_stream` (§3.4), `retry_decisions` (§3.7), `delays`
//! (§3.8-3.9), `post_stream` (§3.10), `input` (§3.11, §2.4).

mod budgets;
mod classifiers;
mod delays;
mod input;
mod post_stream;
mod pre_stream;
mod provider_errors;
mod retry_decisions;
mod texts;
mod thrown;

pub use self::budgets::*;
pub use self::classifiers::*;
pub use self::delays::*;
pub use self::input::*;
pub use self::post_stream::*;
pub use self::pre_stream::*;
pub use self::provider_errors::*;
pub use self::retry_decisions::*;
pub use self::texts::*;
pub use self::thrown::*;

#[cfg(test)]
mod tests;
