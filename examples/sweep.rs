//! Sweep a scenario's seeds with swarm faults from your own code, as `sim explore --swarm` does.
//!
//!     cargo run --release --example sweep -- scenarios/letta/approval_turn.toml 0..200
//!
//! Prints the sweep's report (failures by invariant with their reproduce commands, then the
//! coverage table) and exits non-zero when a seed failed.

use loopsim::check::Check;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "scenarios/letta/approval_turn.toml".into());
    let seeds = args.next().unwrap_or_else(|| "0..50".into());
    let Some((a, b)) = seeds
        .split_once("..")
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
    else {
        eprintln!("error: seeds must be A..B, e.g. 0..200, got {seeds:?}");
        std::process::exit(2);
    };
    let check = match Check::load(&path) {
        Ok(c) => c.seeds(a..b).swarm(true).jobs(2),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    match check.run() {
        Ok(report) => {
            print!("{}", report.render());
            std::process::exit(report.exit_code());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
