//! `sim serve`: the scenario's server on real TCP, its ready line on stdout.

use std::io::Write as _;
use std::net::SocketAddr;

use loopsim::harness::report::exit;
use loopsim::harness::serve::{ServeOptions, serve_with_limits};
use loopsim::harness::serve_guard::{LIMITS, Limits};
use loopsim::model::letta::server::Profile;

use super::CmdResult;
use crate::args::ServeArgs;

pub fn run(a: ServeArgs) -> CmdResult {
    let options = ServeOptions {
        scenario: a.scenario,
        seed: a.seed,
        listen: SocketAddr::new(a.bind, a.port),
        request_log: a.log,
        trace: a.trace,
        // clap has checked the name against Profile::NAMES.
        profile: a.profile.and_then(|p| Profile::from_name(&p)),
        scripted_model: a.scripted_model,
    };
    let limits = Limits {
        max_connections: a.max_connections,
        request_read: std::time::Duration::from_millis(a.request_read_ms),
        max_body: a.max_body,
        ..LIMITS
    };
    serve_with_limits(options, limits, |ready| {
        println!("{ready}");
        let _ = std::io::stdout().flush();
    })?;
    Ok(exit::PASS)
}
