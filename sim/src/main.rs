//! `sim`: the loopsim command line. Thin by design: clap arguments → harness calls → exit code.

#[path = "cmd/import.rs"]
mod cmd_import;
#[path = "cmd/record.rs"]
mod cmd_record;
mod progress;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};
use loopsim::harness::explore::{ExploreOptions, ExploreReport, explore, plan_of, with_swarm};
use loopsim::harness::gate::{GateOptions, run_gate};
use loopsim::harness::report::exit;
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::{InputError, Scenario};
use loopsim::harness::shrink::{shrink, with_plan};

const EXIT_CODES: &str = "\
Exit codes:
  0    pass: every invariant held
  2    usage or input error (bad flag, unreadable or invalid scenario or cassette)
  127  crash: a panic in the harness or a model was caught
  128  liveness: a turn did not finish after the world healed (turn-terminates)
  129  correctness: an invariant was violated (or, for `sim ci`, a canary was not caught)

Docs: docs/scenario.md, docs/cassette.md, docs/trace.md, docs/invariants.md, docs/faults.md,
docs/explore.md, docs/exit-codes.md";

/// loopsim: deterministic simulation of LLM coding-agent client/server protocols.
///
/// Runs faithful models of a Letta-style server and Letta Code-style client on a simulated
/// network, against a fake provider replaying recorded SSE cassettes, injects faults, and checks
/// protocol invariants. The same scenario and seed always give the same trace, byte for byte.
///
/// Start with: sim run scenarios/letta/approval_turn.toml --seed 1
#[derive(Parser)]
#[command(name = "sim", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario with one seed, check invariants, print a verdict.
    ///
    /// The run is executed twice to check determinism (same seed, same trace). On failure the
    /// report names the invariant, the event that broke it and the command that reproduces it.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The scenario file (TOML; see docs/scenario.md), e.g. scenarios/letta/approval_turn.toml.
        scenario: PathBuf,
        /// The run seed. Every random choice (latency, ids, faults) derives from it.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Add the seed's swarm fault plan (as `sim explore --swarm` did for this seed).
        #[arg(long)]
        swarm: bool,
        /// Also write the canonical trace (one event per line) to this file.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// How many times to run the seed; 2 or more checks `deterministic`.
        #[arg(long, default_value_t = 2, value_name = "N")]
        runs: u32,
        /// Run at least twice and report the first divergent trace event and its simulated time.
        #[arg(long)]
        check_determinism: bool,
        /// Print the full trace after the report.
        #[arg(long)]
        print_trace: bool,
        /// Override the scenario's turmoil tick ([network] tick_ms), e.g. to reproduce a
        /// failure a `sim explore --tick-ms` sweep found.
        #[arg(long, value_name = "MS")]
        tick_ms: Option<u64>,
    },
    /// Sweep seeds over scenarios, report failures by invariant and the coverage table.
    ///
    /// Results are identical for any --jobs. With --shrink, the first failure of each
    /// invariant is shrunk to a minimal scenario written under shrunk/.
    #[command(after_help = EXIT_CODES)]
    Explore {
        /// Scenario files.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// Seed range `A..B` (B exclusive), e.g. 0..1000.
        #[arg(long, value_parser = parse_range, default_value = "0..100")]
        seeds: std::ops::Range<u64>,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Run only shard K of N (1-based): the seeds with seed % N == K-1.
        #[arg(long, value_parser = parse_shard, value_name = "K/N")]
        shard: Option<(u64, u64)>,
        /// Draw a fault plan per seed (which fault families are on, where faults land).
        #[arg(long)]
        swarm: bool,
        /// Run every N-th seed twice to check determinism (0 = never).
        #[arg(long, default_value_t = 10, value_name = "N")]
        determinism_every: u64,
        /// Output format on stdout.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also write the JSON report to this file (for `sim report merge`).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Shrink the first failure of each invariant and write it under this directory.
        #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = "shrunk")]
        shrink: Option<PathBuf>,
        /// Run every scenario at this turmoil tick instead of its [network] tick_ms. Timers
        /// keep their exact values at any tick; hops between hosts take at least one tick. A
        /// 10 ms tick sweeps about eight times faster than 1 ms (docs/performance.md); each
        /// failure's reproduce command carries the flag.
        #[arg(long, value_name = "MS")]
        tick_ms: Option<u64>,
    },
    /// Shrink one failing seed to a minimal scenario that fails the same invariant.
    #[command(after_help = EXIT_CODES)]
    Shrink {
        scenario: PathBuf,
        #[arg(long)]
        seed: u64,
        /// The seed failed with `--swarm` faults.
        #[arg(long)]
        swarm: bool,
        /// The invariant to keep failing (default: the first one the seed fails).
        #[arg(long)]
        invariant: Option<String>,
        /// Where to write the shrunk scenario.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Upper bound on candidate runs.
        #[arg(long, default_value_t = 400)]
        max_runs: u32,
    },
    /// The CI regression gate: every scenario over fixed and commit-derived seeds with swarm
    /// faults, every planted canary, every snapshot.
    #[command(after_help = EXIT_CODES)]
    Ci {
        /// Repository root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// The commit under test (adds a seed range derived from it).
        #[arg(long)]
        commit: Option<String>,
        /// Seeds 0..N for every scenario. The defaults keep the gate near 10 minutes on 2 cores
        /// with ~50 scenarios; long sweeps belong to `sim explore` (docs/explore.md).
        #[arg(long, default_value_t = 150)]
        fixed_seeds: u64,
        /// Seeds taken from the commit, per scenario.
        #[arg(long, default_value_t = 100)]
        commit_seeds: u64,
        /// Seeds per canary.
        #[arg(long, default_value_t = 20)]
        canary_seeds: u64,
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Write JUnit XML here.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Write the JSON report here.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Work with JSON reports.
    Report {
        #[command(subcommand)]
        command: ReportCommand,
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
        /// Add swarm faults.
        #[arg(long)]
        swarm: bool,
        /// Also run a bare turmoil + hyper world that replays a loopsim run's exchanges (every
        /// request and response frame, at the same simulated times, between the same hosts;
        /// no models, no trace) and report the cost ratio (target: at most 2x).
        #[arg(long)]
        compare_bare: bool,
        /// Run the same seeds once per turmoil tick in this comma-separated list (ms),
        /// overriding the scenario's `[network] tick_ms`, and print one row per tick: how the
        /// tick trades wall time against the resolution of hops between hosts
        /// (docs/performance.md).
        #[arg(long, value_delimiter = ',', value_name = "MS,...")]
        ticks: Vec<u64>,
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
        /// Server profile, overriding the scenario's `[server] profile`: `cloud` (hosted Letta
        /// as the Letta Code CLI expects it), `local` (the CLI's in-process backend) or
        /// `letta-oss-0.16` (the open-source Letta 0.16.8 server byte for byte as captured,
        /// with its agents endpoints). docs/server.md "Profiles".
        #[arg(long, value_name = "NAME",
              value_parser = clap::builder::PossibleValuesParser::new(loopsim::model::letta::server::Profile::NAMES))]
        profile: Option<String>,
        /// Answer model calls with the scripted fake model the real-server captures were
        /// recorded against (FAIL500, CUTSTREAM, MIDERR, SLOW, PLAIN in the last message; else
        /// a `get_secret_weather` call) instead of the scenario's cassettes. docs/serve.md.
        #[arg(long)]
        scripted_model: bool,
    },
    Record(cmd_record::Args),
    Import(cmd_import::Args),
}

#[derive(Subcommand)]
enum ReportCommand {
    /// Merge the JSON reports of `sim explore --shard K/N --out FILE` runs into one.
    Merge {
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

fn parse_range(s: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("expected A..B, e.g. 0..1000, got {s:?}"))?;
    let a: u64 = a.parse().map_err(|_| format!("bad start {a:?} in {s:?}"))?;
    let b: u64 = b.parse().map_err(|_| format!("bad end {b:?} in {s:?}"))?;
    if b <= a {
        return Err(format!("empty range {s:?}: B must be greater than A"));
    }
    Ok(a..b)
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, n) = s
        .split_once('/')
        .ok_or_else(|| format!("expected K/N, e.g. 2/4, got {s:?}"))?;
    let k: u64 = k.parse().map_err(|_| format!("bad K in {s:?}"))?;
    let n: u64 = n.parse().map_err(|_| format!("bad N in {s:?}"))?;
    if n == 0 || k == 0 || k > n {
        return Err(format!("shard {s:?}: need 1 <= K <= N"));
    }
    Ok((k, n))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE as u8 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Run {
            scenario,
            seed,
            swarm,
            trace,
            runs,
            check_determinism,
            print_trace,
            tick_ms,
        } => run(
            &scenario,
            seed,
            swarm,
            trace,
            if check_determinism { runs.max(2) } else { runs },
            print_trace,
            tick_ms,
        ),
        Command::Explore {
            scenarios,
            seeds,
            jobs,
            shard,
            swarm,
            determinism_every,
            format,
            out,
            shrink,
            tick_ms,
        } => cmd_explore(
            &scenarios,
            tick_ms,
            ExploreOptions {
                seeds,
                jobs,
                shard,
                swarm,
                determinism_every,
            },
            format,
            out,
            shrink,
        ),
        Command::Shrink {
            scenario,
            seed,
            swarm,
            invariant,
            out,
            max_runs,
        } => cmd_shrink(&scenario, seed, swarm, invariant, out, max_runs),
        Command::Ci {
            root,
            commit,
            fixed_seeds,
            commit_seeds,
            canary_seeds,
            jobs,
            junit,
            json,
        } => cmd_ci(
            GateOptions {
                root,
                fixed_seeds,
                commit,
                commit_seeds,
                canary_seeds,
                determinism_every: 10,
                jobs,
            },
            junit,
            json,
        ),
        Command::Report {
            command:
                ReportCommand::Merge {
                    reports,
                    format,
                    out,
                },
        } => cmd_merge(&reports, format, out),
        Command::Bench {
            scenario,
            seeds,
            swarm,
            compare_bare,
            ticks,
        } => bench(&scenario, seeds, swarm, compare_bare, &ticks),
        Command::Serve {
            scenario,
            seed,
            port,
            bind,
            log,
            trace,
            profile,
            scripted_model,
        } => serve(
            scenario,
            seed,
            std::net::SocketAddr::new(bind, port),
            (log, trace),
            profile,
            scripted_model,
        ),
        Command::Record(args) => cmd_record::run(args),
        Command::Import(args) => cmd_import::run(args),
    };
    ExitCode::from(match result {
        Ok(code) => code as u8,
        Err(e) => {
            eprintln!("error: {e}");
            exit::USAGE as u8
        }
    })
}

/// Any input problem: printed as `error: <file>:<line>:<col>: …`, exit 2.
type CmdResult = Result<i32, InputError>;

fn write_file(path: &Path, text: &str) -> Result<(), InputError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(path, text).map_err(|e| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot write: {e}"),
    })
}

fn load_with_swarm(
    path: &Path,
    seed: u64,
    swarm: bool,
    tick_ms: Option<u64>,
) -> Result<Scenario, InputError> {
    let scenario = Scenario::load(path)?.with_tick(tick_ms);
    if swarm {
        let base = loopsim::harness::explore::baseline(&scenario)?;
        Ok(with_swarm(&scenario, seed, &base))
    } else {
        Ok(scenario)
    }
}

fn run(
    path: &Path,
    seed: u64,
    swarm: bool,
    trace_out: Option<PathBuf>,
    runs: u32,
    print_trace: bool,
    tick_ms: Option<u64>,
) -> CmdResult {
    let mut scenario = load_with_swarm(path, seed, swarm, tick_ms)?;
    // The report's reproduce line must carry --swarm too.
    if swarm {
        scenario.repro_flags.insert_str(0, " --swarm");
    }
    let report = run_scenario(&scenario, seed, runs)?;
    if let Some(file) = trace_out {
        write_file(&file, &report.trace_text)?;
        println!("trace written to {}", file.display());
    }
    if print_trace {
        print!("{}", report.trace_text);
    }
    print!("{}", report.render());
    Ok(report.verdict.exit_code())
}

fn cmd_explore(
    paths: &[PathBuf],
    tick_ms: Option<u64>,
    options: ExploreOptions,
    format: Format,
    out: Option<PathBuf>,
    shrink_dir: Option<PathBuf>,
) -> CmdResult {
    let scenarios: Vec<Scenario> = paths
        .iter()
        .map(|p| Scenario::load(p).map(|s| s.with_tick(tick_ms)))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let bar = progress::Bar::new("explore");
    let report = explore(&scenarios, &options, &|done, total| bar.update(done, total))?;
    bar.finish();
    let wall = started.elapsed().as_secs_f64();
    match format {
        Format::Text => {
            print!("{}", report.render());
            println!(
                "rate      {:.1} seeds/s over {} job(s) ({wall:.2} s wall)",
                report.runs as f64 / wall.max(1e-9),
                options.jobs.max(1)
            );
        }
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        ),
    }
    if let Some(file) = out {
        write_file(
            &file,
            &serde_json::to_string_pretty(&report).expect("report serialises"),
        )?;
        eprintln!("report written to {}", file.display());
    }
    if let Some(dir) = shrink_dir {
        for (invariant, seeds) in report.by_invariant() {
            let (scenario_path, seed) = &seeds[0];
            let base = Scenario::load(Path::new(scenario_path))?.with_tick(tick_ms);
            let plan = plan_of(&base, *seed, options.swarm)?;
            let start = with_plan(&base, plan);
            let shrunk = shrink(&start, *seed, &invariant, 400)?;
            let stem = Path::new(scenario_path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let target = dir.join(format!("{stem}-seed{seed}-{invariant}"));
            let file = shrunk.write(&target)?;
            eprintln!(
                "shrunk    {invariant} (seed {seed}) in {} runs → {}\n          reproduce: {}",
                shrunk.attempts,
                file.display(),
                loopsim::harness::report::reproduce_command(&file.display().to_string(), *seed, "")
            );
        }
    }
    Ok(report.exit_code())
}

fn cmd_shrink(
    path: &Path,
    seed: u64,
    swarm: bool,
    invariant: Option<String>,
    out: Option<PathBuf>,
    max_runs: u32,
) -> CmdResult {
    let base = Scenario::load(path)?;
    let start = with_plan(&base, plan_of(&base, seed, swarm)?);
    let invariant = match invariant {
        Some(i) => i,
        None => {
            let r = run_scenario(&start, seed, 2)?;
            match r.invariants.iter().find(|(_, v)| !v.is_empty()) {
                Some((id, _)) => id.to_string(),
                None if matches!(r.verdict, loopsim::harness::report::Verdict::Crash(_)) => {
                    "crash".into()
                }
                None => {
                    println!(
                        "seed {seed} passes every invariant on {}: nothing to shrink",
                        path.display()
                    );
                    return Ok(exit::PASS);
                }
            }
        }
    };
    let shrunk = shrink(&start, seed, &invariant, max_runs)?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = out.unwrap_or_else(|| PathBuf::from(format!("shrunk/{stem}-seed{seed}-{invariant}")));
    let file = shrunk.write(&dir)?;
    println!(
        "shrunk    {invariant} on {} seed {seed} in {} runs",
        path.display(),
        shrunk.attempts
    );
    for s in &shrunk.steps {
        println!("  - {s}");
    }
    println!(
        "faults    {}",
        if shrunk.scenario.faults.is_empty() {
            "none".to_string()
        } else {
            shrunk
                .scenario
                .faults
                .iter()
                .map(|f| f.get_ref().to_string())
                .collect::<Vec<_>>()
                .join("; ")
        }
    );
    println!("written   {}", file.display());
    println!(
        "reproduce cargo run --release -p sim -- run {} --seed {seed}",
        file.display()
    );
    Ok(exit::CORRECTNESS)
}

fn cmd_ci(options: GateOptions, junit: Option<PathBuf>, json: Option<PathBuf>) -> CmdResult {
    let started = Instant::now();
    let report = run_gate(&options, &|stage| eprintln!("sim ci: {stage}"))?;
    print!("{}", report.render());
    println!("wall      {:.1} s", started.elapsed().as_secs_f64());
    if let Some(f) = junit {
        write_file(&f, &report.to_junit())?;
        eprintln!("junit written to {}", f.display());
    }
    if let Some(f) = json {
        write_file(
            &f,
            &serde_json::to_string_pretty(&report).expect("report serialises"),
        )?;
        eprintln!("json written to {}", f.display());
    }
    Ok(report.exit_code)
}

fn cmd_merge(paths: &[PathBuf], format: Format, out: Option<PathBuf>) -> CmdResult {
    let mut reports = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| InputError {
            file: p.display().to_string(),
            line: None,
            column: None,
            message: format!("cannot read report: {e}"),
        })?;
        let r: ExploreReport = serde_json::from_str(&text).map_err(|e| InputError {
            file: p.display().to_string(),
            line: Some(e.line()),
            column: Some(e.column()),
            message: format!("not a `sim explore --out` report: {e}"),
        })?;
        reports.push(r);
    }
    let merged = ExploreReport::merge(&reports).map_err(|m| InputError {
        file: paths[0].display().to_string(),
        line: None,
        column: None,
        message: m,
    })?;
    match format {
        Format::Text => print!("{}", merged.render()),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&merged).expect("report serialises")
        ),
    }
    if let Some(f) = out {
        write_file(
            &f,
            &serde_json::to_string_pretty(&merged).expect("report serialises"),
        )?;
    }
    Ok(merged.exit_code())
}

/// Resident memory in KiB (Linux; `None` elsewhere).
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// What one pass of `sim bench` over seeds 0..N measured.
struct Measured {
    wall: f64,
    simulated_ms: u64,
    events: usize,
    failures: u64,
}

fn measure(
    scenario: &Scenario,
    seeds: u64,
    base: Option<&loopsim::harness::letta::swarm::Baseline>,
    label: String,
) -> Result<Measured, InputError> {
    let started = Instant::now();
    let mut m = Measured {
        wall: 0.0,
        simulated_ms: 0,
        events: 0,
        failures: 0,
    };
    let bar = progress::Bar::new(label);
    for seed in 0..seeds {
        let s = match base {
            Some(b) => with_swarm(scenario, seed, b),
            None => scenario.clone(),
        };
        let r = run_scenario(&s, seed, 1)?;
        m.simulated_ms += r.end_ms;
        m.events += r.events;
        if r.verdict.exit_code() != exit::PASS {
            m.failures += 1;
        }
        bar.update(seed + 1, seeds);
    }
    bar.finish();
    m.wall = started.elapsed().as_secs_f64();
    Ok(m)
}

fn bench(path: &Path, seeds: u64, swarm: bool, compare_bare: bool, ticks: &[u64]) -> CmdResult {
    let scenario = Scenario::load(path)?;
    let base = if swarm {
        Some(loopsim::harness::explore::baseline(&scenario)?)
    } else {
        None
    };
    let seeds = seeds.max(1);
    let rss_start = rss_kib();
    let m = measure(&scenario, seeds, base.as_ref(), "bench".into())?;
    let rss_end = rss_kib();
    let wall = m.wall;
    println!("scenario        {}", path.display());
    println!(
        "seeds           {seeds} (one run each{}), {} not passing",
        if swarm { ", swarm faults" } else { "" },
        m.failures
    );
    println!("tick            {} ms", scenario.network.tick_ms);
    println!("wall            {wall:.3} s");
    println!("runs/s          {:.1}", seeds as f64 / wall);
    println!("events/s        {:.0}", m.events as f64 / wall);
    println!("simulated       {:.3} s", m.simulated_ms as f64 / 1000.0);
    println!(
        "simulated/wall  {:.1}x",
        m.simulated_ms as f64 / 1000.0 / wall
    );
    if let (Some(a), Some(b)) = (rss_start, rss_end) {
        println!("rss             {a} KiB before, {b} KiB after");
    }
    if !ticks.is_empty() {
        println!("ticks           same seeds, one run each per tick");
        println!(
            "  {:>8}  {:>10}  {:>12}  {:>14}  {:>11}",
            "tick ms", "runs/s", "simulated s", "simulated/wall", "not passing"
        );
        for &t in ticks {
            let mut s = scenario.clone();
            s.network.tick_ms = t.max(1);
            let m = measure(&s, seeds, base.as_ref(), format!("tick {t} ms"))?;
            println!(
                "  {:>8}  {:>10.1}  {:>12.3}  {:>13.0}x  {:>11}",
                s.network.tick_ms,
                seeds as f64 / m.wall,
                m.simulated_ms as f64 / 1000.0,
                m.simulated_ms as f64 / 1000.0 / m.wall,
                m.failures
            );
        }
    }
    if compare_bare {
        let mut clean = scenario.clone();
        clean.faults.clear();
        let log = loopsim::model::letta::server::ExchangeLog::default();
        let out = loopsim::harness::letta::world::run_once_logging(&clean, 0, Some(log.clone()))?;
        let exchanges = std::mem::take(&mut *log.lock().unwrap());
        let script = loopsim::harness::letta::bare::BareScript::from_run(&clean, &out, exchanges)?;
        // loopsim without faults, one run each, against the bare world on the same seeds.
        let t = Instant::now();
        let mut sim_ms = 0;
        for seed in 0..seeds {
            sim_ms += run_scenario(&clean, seed, 1)?.end_ms;
        }
        let loopsim_wall = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut bare_ms = 0;
        for seed in 0..seeds {
            bare_ms +=
                loopsim::harness::letta::bare::run_bare(&clean, seed, &script).map_err(|m| {
                    InputError {
                        file: path.display().to_string(),
                        line: None,
                        column: None,
                        message: format!("bare run failed: {m}"),
                    }
                })?;
        }
        let bare_wall = t.elapsed().as_secs_f64();
        println!("compare-bare    same seeds, no faults, one run each");
        println!(
            "  loopsim       {:.1} runs/s ({:.3} s wall, {:.1} s simulated)",
            seeds as f64 / loopsim_wall,
            loopsim_wall,
            sim_ms as f64 / 1000.0
        );
        println!(
            "  bare          {:.1} runs/s ({:.3} s wall, {:.1} s simulated)",
            seeds as f64 / bare_wall,
            bare_wall,
            bare_ms as f64 / 1000.0
        );
        println!(
            "  ratio         {:.2}x the bare cost",
            loopsim_wall / bare_wall
        );
    }
    Ok(exit::PASS)
}

fn serve(
    scenario: PathBuf,
    seed: u64,
    listen: std::net::SocketAddr,
    (log, trace): (Option<PathBuf>, Option<PathBuf>),
    profile: Option<String>,
    scripted_model: bool,
) -> CmdResult {
    use std::io::Write as _;
    // clap has checked the name against Profile::NAMES.
    let profile = profile.and_then(|p| loopsim::model::letta::server::Profile::from_name(&p));
    let opts = loopsim::harness::serve::ServeOptions {
        scenario,
        seed,
        listen,
        request_log: log,
        trace,
        profile,
        scripted_model,
    };
    loopsim::harness::serve::serve(opts, |ready| {
        println!("{ready}");
        let _ = std::io::stdout().flush();
    })?;
    Ok(exit::PASS)
}
