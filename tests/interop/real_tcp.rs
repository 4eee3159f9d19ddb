//! The models are not tied to the simulation: the same provider, server and client code runs on
//! real loopback TCP with tokio's clock, and each host does exactly what it did on turmoil.

use loopsim::harness::letta::world::run_once;
use loopsim::harness::scenario::Scenario;
use loopsim::harness::tcp::run_once_tcp;
use loopsim::harness::trace::TraceEvent;
use loopsim::model::port::observe::Observation;

/// One host's events in order, without times (real time differs; behaviour must not).
/// `provider_serve_end` is left out: whether the provider reaches its recorded end before the
/// server hangs up after `message_stop` is a race in real time.
fn host_events(trace: &[TraceEvent], host: &str) -> Vec<String> {
    trace
        .iter()
        .filter(|e| e.host == host)
        .filter(|e| !matches!(e.obs, Observation::ProviderServeEnd { .. }))
        .map(|e| {
            let line = e.render();
            line[8..].trim().to_string()
        })
        .collect()
}

#[test]
fn approval_turn_on_real_tcp_matches_the_simulation_host_by_host() {
    let path = crate::common::scenario_path("approval_turn.toml");
    let scenario = Scenario::load(&path).unwrap();
    let real = run_once_tcp(&scenario, 5).unwrap();
    let sim = run_once(&scenario, 5).unwrap();

    let outcomes = real.outcomes.expect("the client finished on real TCP");
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].to_string(), "stopped: end_turn");
    assert_eq!(
        real.workspace
            .executions_of("toolu_01NRLabsLyVHZPKxbKvkfSMn"),
        1
    );

    for host in ["client", "server", "provider"] {
        assert_eq!(
            host_events(&real.trace, host),
            host_events(&sim.trace, host),
            "host {host} behaved differently on real TCP"
        );
    }
}
