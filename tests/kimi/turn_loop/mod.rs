//! Tests for `model::kimi::turn_loop`: the upstream `test/loop` suite of Kimi Code ported case by
//! case (kimi-loop.md §7), plus the host (§8) and the stream adapter.
//!
//! Method: every test builds one turn with the fixtures in `util` (a scripted fake LLM, a
//! recording transcript and a collecting live sink), runs it on a paused tokio clock (timers
//! are virtual, so retry sleeps and the 2 s grace timeout cost nothing) and asserts on the
//! result, the transcript, the live events and the fixtures' execution records. The module
//! names follow the upstream files; each test is named after the behaviour it checks and its
//! doc line names the upstream case (`§7.x #n`). Cases that do not apply to a Rust port are
//! listed in `api_shape` with the reason.

mod abort;
mod api_shape;
mod argument_parsing;
mod error_paths;
mod events;
mod fallbacks;
mod hooks;
mod host;
mod retry;
mod scheduler;
mod stream_adapter;
mod streaming;
mod tool_calls;
mod transcript;
mod turn_lifecycle;
mod util;
