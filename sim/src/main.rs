//! `sim`: the loopsim command line. Thin by design: clap arguments → harness calls → exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use loopsim::harness::run::{exit, run_scenario};
use loopsim::harness::scenario::Scenario;

const EXIT_CODES: &str = "\
Exit codes:
  0    pass: every invariant held
  2    usage or input error (bad flag, unreadable or invalid scenario or cassette)
  127  crash: a panic in the harness or a model was caught
  128  liveness: the run did not finish within its simulated-time budget
  129  correctness: an invariant was violated

Docs: docs/scenario.md, docs/cassette.md, docs/trace.md, docs/invariants.md, docs/exit-codes.md";

/// loopsim: deterministic simulation of LLM coding-agent client/server protocols.
///
/// Runs faithful models of a Letta-style server and Letta Code-style client on a simulated
/// network, against a fake provider replaying recorded SSE cassettes, and checks protocol
/// invariants. The same scenario and seed always give the same trace, byte for byte.
#[derive(Parser)]
#[command(name = "sim", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario with one seed, check invariants, print a verdict.
    ///
    /// The run is executed twice to check determinism (same seed, same trace). On failure the
    /// report names the invariant, the event that broke it and the command that reproduces it.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The scenario file (TOML; see docs/scenario.md), e.g. scenarios/approval_turn.toml.
        scenario: PathBuf,
        /// The run seed. Every random choice (latency, ids, faults) derives from it.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also write the canonical trace (one event per line) to this file.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// How many times to run the seed; 2 or more checks `deterministic`.
        #[arg(long, default_value_t = 2, value_name = "N")]
        runs: u32,
        /// Print the full trace after the report.
        #[arg(long)]
        print_trace: bool,
    },
    /// Measure simulation speed: run seeds 0..N once each and report runs per second and
    /// simulated time per wall time.
    ///
    /// Wall time is read here, in the command line, and never inside a simulation.
    Bench {
        /// The scenario file to run.
        scenario: PathBuf,
        /// How many seeds to run.
        #[arg(long, default_value_t = 200, value_name = "N")]
        seeds: u64,
    },
    /// Serve the scenario's Letta server model (and its fake provider) on real TCP, for real
    /// clients such as the Letta Code CLI and the SDKs.
    ///
    /// Applies the scenario's server-side faults (busy_on_send, approval_pending_on_send,
    /// stale_approval, drop_connection, run_stream_fail, …; docs/serve.md), prints one JSON line
    /// on stdout when it listens (address, agent, conversations), and logs every request as a
    /// JSON line to --log. Runs until stopped (Ctrl-C, SIGTERM).
    #[command(after_help = "Docs: docs/serve.md, docs/server.md, docs/scenario.md")]
    Serve {
        /// The scenario file (TOML; see docs/scenario.md).
        #[arg(long)]
        scenario: PathBuf,
        /// The seed for ids and everything else the server draws.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// TCP port to listen on (0 picks a free one; the ready line says which).
        #[arg(long, default_value_t = 8283)]
        port: u16,
        /// Address to bind. Loopback unless you say otherwise.
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
        /// Write every request (method, path, body, status) as JSON lines to this file.
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// Write the trace (one event per line) to this file as it happens.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE as u8 } else { 0 });
        }
    };
    let code = match cli.command {
        Command::Run {
            scenario,
            seed,
            trace,
            runs,
            print_trace,
        } => run(scenario, seed, trace, runs, print_trace),
        Command::Bench { scenario, seeds } => bench(scenario, seeds),
        Command::Serve {
            scenario,
            seed,
            port,
            bind,
            log,
            trace,
        } => serve(
            scenario,
            seed,
            std::net::SocketAddr::new(bind, port),
            log,
            trace,
        ),
    };
    ExitCode::from(code as u8)
}

fn run(path: PathBuf, seed: u64, trace_out: Option<PathBuf>, runs: u32, print_trace: bool) -> i32 {
    let scenario = match Scenario::load(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let report = match run_scenario(&scenario, seed, runs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    if let Some(file) = trace_out {
        if let Err(e) = std::fs::write(&file, &report.trace_text) {
            eprintln!("error: cannot write trace to {}: {e}", file.display());
            return exit::USAGE;
        }
        println!("trace written to {}", file.display());
    }
    if print_trace {
        print!("{}", report.trace_text);
    }
    print!("{}", report.render());
    report.verdict.exit_code()
}

fn bench(path: PathBuf, seeds: u64) -> i32 {
    let scenario = match Scenario::load(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let seeds = seeds.max(1);
    let started = std::time::Instant::now();
    let mut simulated_ms = 0u64;
    let mut events = 0usize;
    let mut failures = 0u64;
    for seed in 0..seeds {
        match run_scenario(&scenario, seed, 1) {
            Ok(r) => {
                simulated_ms += r.end_ms;
                events += r.events;
                if r.verdict.exit_code() != exit::PASS {
                    failures += 1;
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                return exit::USAGE;
            }
        }
        if seeds >= 20 && (seed + 1) % (seeds / 10) == 0 {
            eprintln!("  {}/{} seeds", seed + 1, seeds);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    println!("scenario        {}", path.display());
    println!("seeds           {seeds} (one run each), {failures} not passing");
    println!("wall            {wall:.3} s");
    println!("runs/s          {:.1}", seeds as f64 / wall);
    println!("events/s        {:.0}", events as f64 / wall);
    println!("simulated       {:.3} s", simulated_ms as f64 / 1000.0);
    println!(
        "simulated/wall  {:.1}x",
        simulated_ms as f64 / 1000.0 / wall
    );
    exit::PASS
}

fn serve(
    scenario: PathBuf,
    seed: u64,
    listen: std::net::SocketAddr,
    log: Option<PathBuf>,
    trace: Option<PathBuf>,
) -> i32 {
    use std::io::Write as _;
    let opts = loopsim::harness::serve::ServeOptions {
        scenario,
        seed,
        listen,
        request_log: log,
        trace,
    };
    let result = loopsim::harness::serve::serve(opts, |ready| {
        println!("{ready}");
        let _ = std::io::stdout().flush();
    });
    match result {
        Ok(()) => exit::PASS,
        Err(e) => {
            eprintln!("error: {e}");
            exit::USAGE
        }
    }
}
