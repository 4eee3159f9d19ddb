//! Run one seed of a scenario and look at what happened, from your own code.
//!
//!     cargo run --release --example one_seed -- scenarios/letta/approval_turn.toml 1
//!
//! Prints the report `sim run` prints, then the first lines of the trace.

use loopsim::check::Check;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "scenarios/letta/approval_turn.toml".into());
    let seed: u64 = match args.next().map(|s| s.parse()) {
        None => 1,
        Some(Ok(s)) => s,
        Some(Err(_)) => {
            eprintln!("error: the seed must be a number");
            std::process::exit(2);
        }
    };
    let report = match Check::load(&path).and_then(|c| c.run_seed(seed)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    print!("{}", report.render());
    println!("first trace lines:");
    for line in report.trace_text.lines().take(10) {
        println!("  {line}");
    }
    std::process::exit(report.verdict.exit_code());
}
