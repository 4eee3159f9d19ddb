//! `sim serve`: the scenario's server (or, with `--provider-only`, its fake provider alone) on
//! real TCP, its ready line on stdout.

use std::io::Write as _;
use std::net::SocketAddr;

use loopsim::harness::report::exit;
use loopsim::harness::serve::{
    ProviderOnlyOptions, ServeOptions, serve_provider, serve_with_limits,
};
use loopsim::harness::serve_guard::{LIMITS, Limits};
use loopsim::model::letta::server::Profile;

use super::CmdResult;
use crate::args::ServeArgs;

pub fn run(a: ServeArgs) -> CmdResult {
    let ready = |ready: serde_json::Value| {
        println!("{ready}");
        let _ = std::io::stdout().flush();
    };
    let listen = SocketAddr::new(a.bind, a.port);
    if let Some(scenario) = a.provider_only {
        let options = ProviderOnlyOptions {
            scenario,
            listen,
            request_log: a.log,
            trace: a.trace,
        };
        serve_provider(options, ready)?;
        return Ok(exit::PASS);
    }
    let options = ServeOptions {
        // clap requires --scenario unless --provider-only is given.
        scenario: a.scenario.expect("clap requires --scenario"),
        seed: a.seed,
        listen,
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
    serve_with_limits(options, limits, ready)?;
    Ok(exit::PASS)
}
