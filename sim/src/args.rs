//! The command line's arguments (clap). Their doc comments are the `--help` texts users read
//! and docs/ quotes.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run one scenario with one seed, check invariants, print a verdict.
    ///
    /// The run is executed twice to check determinism (same seed, same trace). On failure the
    /// report names the invariant, the event that broke it and the command that reproduces it.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Sweep seeds over scenarios, report failures by invariant and the coverage table.
    ///
    /// Results are identical for any --jobs. With --shrink, the first failure of each
    /// invariant is shrunk to a minimal scenario written under shrunk/.
    #[command(after_help = EXIT_CODES)]
    Explore(ExploreArgs),
    /// Shrink one failing seed to a minimal scenario that fails the same invariant.
    #[command(after_help = EXIT_CODES)]
    Shrink(ShrinkArgs),
    /// The CI regression gate: every scenario over fixed and commit-derived seeds with guided
    /// plans (docs/finding-power.md), every planted canary, every snapshot, every bug
    /// cassette; with --real-client, a real client over scenarios/real-client/ too.
    #[command(after_help = EXIT_CODES)]
    Ci(CiArgs),
    /// Work with JSON reports.
    Report {
        #[command(subcommand)]
        command: ReportCommand,
    },
    /// Measure simulation speed: run seeds 0..N once each and report runs per second and
    /// simulated time per wall time.
    ///
    /// Wall time is read here, in the command line, and never inside a simulation.
    Bench(BenchArgs),
    /// Serve the scenario's Letta server model (and its fake provider) on real TCP, for real
    /// clients such as the Letta Code CLI and the SDKs.
    ///
    /// Applies the scenario's server-side faults (busy_on_send, approval_pending_on_send,
    /// stale_approval, drop_connection, run_stream_fail, …; docs/serve.md), prints one JSON line
    /// on stdout when it listens (address, agent, conversations), and logs every request as a
    /// JSON line to --log. Runs until stopped (Ctrl-C, SIGTERM).
    #[command(after_help = "Docs: docs/serve.md, docs/server.md, docs/scenario.md")]
    Serve(ServeArgs),
    #[command(after_help = "Docs: docs/record-replay.md, docs/cassette.md")]
    Record(crate::cmd::record::Args),
    #[command(after_help = "Docs: docs/record-replay.md, docs/cassette.md")]
    Import(crate::cmd::import::Args),
    #[command(
        after_help = "Exit codes: 0 match, 129 divergence or a broken invariant, 2 bad input.\n\nDocs: docs/record-replay.md, docs/cassette.md, docs/exit-codes.md"
    )]
    Replay(ReplayArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// The scenario file (TOML; see docs/scenario.md), e.g. scenarios/letta/approval_turn.toml.
    pub scenario: PathBuf,
    /// The run seed. Every random choice (latency, ids, faults) derives from it.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Add the seed's swarm fault plan, and its start, if it drew one (as `sim explore --swarm`
    /// did for this seed).
    #[arg(long)]
    pub swarm: bool,
    /// Add this fault to the scenario's (repeatable): a TOML inline table as in a scenario's
    /// [[faults]] (docs/faults.md), e.g. '{ kind = "crash", host = "server", on_event =
    /// "run_ended", nth = 1, restart_after_ms = 300 }'. A `sim explore --guided` failure's
    /// reproduce command gives its plan this way.
    #[arg(long = "plan", value_name = "FAULT", value_parser = parse_plan_fault)]
    pub plan: Vec<loopsim::harness::faults::Fault>,
    /// Also write the canonical trace (one event per line) to this file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// How many times to run the seed; 2 or more checks `deterministic`.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Run at least twice and report the first divergent trace event and its simulated time.
    #[arg(long)]
    pub check_determinism: bool,
    /// Print the full trace after the report.
    #[arg(long)]
    pub print_trace: bool,
    /// Override the scenario's turmoil tick ([network] tick_ms), e.g. to reproduce a
    /// failure a `sim explore --tick-ms` sweep found.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub tick_ms: Option<u64>,
    /// Multiply every scenario's hop latency ([network] latency_ms) by K: the same run on a
    /// slower network (docs/explore.md). The reproduce command carries it.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub latency_scale: Option<u64>,
    /// Run each Letta scenario with this client profile instead of its own: `letta-code` is
    /// the published client's model (docs/client.md). Its declared outcomes then do not apply;
    /// its `[[expect]]` entries for that profile and the profile's known findings do
    /// (docs/findings.md). The reproduce command carries it.
    #[arg(long, value_enum, value_name = "NAME")]
    pub client_profile: Option<ClientProfileArg>,
    /// Start the world's clock at this instant instead of the scenario's [network] start: an
    /// RFC 3339 UTC instant such as 2099-12-31T23:59:58.500Z (docs/scenario.md). A `sim explore
    /// --guided` failure whose seed moved the start gives it this way.
    #[arg(long, value_name = "INSTANT", value_parser = parse_start)]
    pub start: Option<loopsim::harness::world_start::WorldStart>,
    /// Also write the run as one self-contained HTML page: a sequence diagram with the faults
    /// and the event each failing invariant tripped on (docs/trace.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Skip idle simulated time (the default; harness/warp.rs, docs/performance.md).
    #[arg(long, conflicts_with = "no_warp")]
    pub warp: bool,
    /// Step through every tick, idle or not: the same trace, slower; for comparing the two.
    #[arg(long)]
    pub no_warp: bool,
}

#[derive(Args)]
pub struct ExploreArgs {
    /// Scenario files.
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// Seed range `A..B` (B exclusive), e.g. 0..1000.
    #[arg(long, value_parser = parse_range, default_value = "0..100")]
    pub seeds: std::ops::Range<u64>,
    /// Worker threads.
    #[arg(long, default_value_t = 1, value_parser = at_least_one)]
    pub jobs: usize,
    /// Run only shard K of N (1-based): the seeds with seed % N == K-1.
    #[arg(long, value_parser = parse_shard, value_name = "K/N")]
    pub shard: Option<(u64, u64)>,
    /// Draw a fault plan per seed (which fault families are on, where faults land); one seed
    /// in eight also starts the world's clock just before a calendar edge (docs/faults.md).
    #[arg(long)]
    pub swarm: bool,
    /// Guided exploration (docs/explore.md "Guided"): the swarm's plans plus faults placed at
    /// protocol points (right after requires_approval, between a tool's effect and its result,
    /// during a resume, across a busy retry…), server behaviours and client interrupts and
    /// crashes; run in rounds, each drawing from the runs that showed something new. Finds
    /// rare bugs in fewer seeds than --swarm (docs/finding-power.md).
    #[arg(long, conflicts_with = "swarm")]
    pub guided: bool,
    /// Run every N-th seed twice to check determinism (0 = never).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub determinism_every: u64,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write the JSON report to this file (for `sim report merge`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Shrink the first failure of each invariant and write it under this directory.
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = "shrunk")]
    pub shrink: Option<PathBuf>,
    /// Run every scenario at this turmoil tick instead of its [network] tick_ms. Timers
    /// keep their exact values at any tick; hops between hosts take at least one tick. With
    /// idle time skipped a coarser tick saves little (10 ms sweeps about 1.5x faster than
    /// 1 ms, docs/performance.md): use it to see other interleavings. Each failure's
    /// reproduce command carries the flag.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub tick_ms: Option<u64>,
    /// Multiply every scenario's hop latency ([network] latency_ms) by K: the same run on a
    /// slower network (docs/explore.md). The reproduce command carries it.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub latency_scale: Option<u64>,
    /// Run each Letta scenario with this client profile instead of its own: `letta-code` is
    /// the published client's model (docs/client.md). Its declared outcomes then do not apply;
    /// its `[[expect]]` entries for that profile and the profile's known findings do
    /// (docs/findings.md). The reproduce command carries it.
    #[arg(long, value_enum, value_name = "NAME")]
    pub client_profile: Option<ClientProfileArg>,
    /// Also write the sweep as one self-contained HTML page: failures grouped by invariant,
    /// the coverage goals, the reproduce commands (docs/trace.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// With --html: rerun failing seeds (the first 100) and write each one's run report into
    /// this directory, linked from the sweep page.
    #[arg(long, value_name = "DIR", requires = "html")]
    pub html_dir: Option<PathBuf>,
    /// Skip idle simulated time (the default; harness/warp.rs, docs/performance.md).
    #[arg(long, conflicts_with = "no_warp")]
    pub warp: bool,
    /// Step through every tick, idle or not: the same trace, slower; for comparing the two.
    #[arg(long)]
    pub no_warp: bool,
    /// Sweep a real client instead of the models (docs/real-client.md): per seed, serve the
    /// scenario on a free loopback port with a plan of the server-side faults `sim serve`
    /// applies, run this shell command line against it (LETTA_BASE_URL, a fresh HOME and work
    /// dir, SIM_TURN, SIM_MODEL, SIM_ROOT…) and judge the run from the server's side. E.g.
    /// 'node "$SIM_ROOT/target/interop/letta-code/letta.js" -p "$SIM_TURN" -m "$SIM_MODEL"
    /// --output-format stream-json'.
    #[arg(long, value_name = "CMD", conflicts_with_all = ["swarm", "guided", "shard", "shrink", "html", "worker"])]
    pub real_client: Option<String>,
    /// With --real-client: the wall-clock budget of one run of the command, in ms.
    #[arg(long, value_name = "MS", default_value_t = 120_000, requires = "real_client",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub run_timeout_ms: u64,
    /// With --real-client: reruns of each failing seed, to say how often it fails again.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "real_client")]
    pub reruns: u32,
    /// With --real-client: where each run's HOME, work dir and logs go (failing runs are kept).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "target/real-client",
        requires = "real_client"
    )]
    pub real_client_dir: PathBuf,
    /// With --real-client: keep the directories of passing runs too.
    #[arg(long, requires = "real_client")]
    pub keep_runs: bool,
    /// Internal: run as the child process of a sweep (sim/src/isolate.rs): read work items
    /// on stdin, print one line per seed on stdout.
    #[arg(long, hide = true)]
    pub worker: bool,
    /// Internal: a worker also prints every panic it catches on stderr.
    #[arg(long, hide = true)]
    pub echo_panics: bool,
}

#[derive(Args)]
pub struct ShrinkArgs {
    pub scenario: PathBuf,
    #[arg(long)]
    pub seed: u64,
    /// The seed failed with `--swarm` faults.
    #[arg(long)]
    pub swarm: bool,
    /// The invariant to keep failing (default: the first one the seed fails).
    #[arg(long)]
    pub invariant: Option<String>,
    /// Where to write the shrunk scenario.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Upper bound on candidate runs (at least 1).
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs: u32,
}

#[derive(Args)]
pub struct CiArgs {
    /// Repository root.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// The commit under test (adds a seed range derived from it).
    #[arg(long)]
    pub commit: Option<String>,
    /// Seeds 0..N for every scenario as written (its own faults only, held to its declared
    /// outcomes by `ends-as-declared`); 0 leaves the stage out.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub as_written_seeds: u64,
    /// Seeds 0..N for every scenario, guided. The defaults keep the gate near 5 minutes on 2 cores
    /// with 68 scenarios (idle time skipped); long sweeps belong to `sim explore`
    /// (docs/explore.md).
    #[arg(long, default_value_t = 600)]
    pub fixed_seeds: u64,
    /// Seeds 0..N for every Letta scenario, guided, against the published client's model
    /// (`--client-profile letta-code`: its known findings set aside where the trace shows
    /// them, docs/findings.md "In any scenario"); 0 leaves the stage out.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub published_seeds: u64,
    /// Seeds taken from the commit, per scenario.
    #[arg(long, default_value_t = 200)]
    pub commit_seeds: u64,
    /// Seeds per canary.
    #[arg(long, default_value_t = 20)]
    pub canary_seeds: u64,
    #[arg(long, default_value_t = 2, value_parser = at_least_one)]
    pub jobs: usize,
    /// Write JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also sweep a real client over scenarios/real-client/ (the last stage; skipped, and said
    /// so, without it): CMD as `sim explore --real-client` takes it, e.g.
    /// 'node "$SIM_ROOT/target/interop/letta-code/letta.js" -p "$SIM_TURN" -m "$SIM_MODEL" --output-format stream-json'.
    #[arg(long, value_name = "CMD")]
    pub real_client: Option<String>,
    /// Stall-free seeds per real-client scenario.
    #[arg(long, default_value_t = 4, value_name = "N", requires = "real_client")]
    pub real_client_seeds: usize,
    /// Where the real-client runs go (failing runs are kept there).
    #[arg(long, default_value = "target/ci/real-client", value_name = "DIR")]
    pub real_client_dir: PathBuf,
    /// Wall-clock budget of one real-client run, in ms.
    #[arg(long, default_value_t = 120_000, value_name = "MS")]
    pub real_client_timeout_ms: u64,
    /// Step through every tick, idle or not: the same verdicts, slower. For measuring what
    /// skipping idle time saves the gate (docs/performance.md).
    #[arg(long)]
    pub no_warp: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    /// The scenario file to run.
    pub scenario: PathBuf,
    /// How many seeds to run.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub seeds: u64,
    /// Add swarm faults.
    #[arg(long)]
    pub swarm: bool,
    /// Also run a bare turmoil + hyper world that replays a loopsim run's exchanges (every
    /// request and response frame, at the same simulated times, between the same hosts;
    /// no models, no trace) and report the cost ratio (target: at most 2x).
    #[arg(long)]
    pub compare_bare: bool,
    /// Run the same seeds once per turmoil tick in this comma-separated list (ms),
    /// overriding the scenario's `[network] tick_ms`, and print one row per tick: how the
    /// tick trades wall time against the resolution of hops between hosts
    /// (docs/performance.md).
    #[arg(long, value_delimiter = ',', value_name = "MS,...")]
    pub ticks: Vec<u64>,
    /// Run the seeds warped and stepping through every tick, and report both rates, their
    /// ratio and how many traces are identical.
    #[arg(long)]
    pub compare_warp: bool,
    /// Also step idle worlds as the pass stepped (the same host counts, the same number of
    /// steps) and report what turmoil's steps cost before any host runs, and the best rate a
    /// warp could reach if every step in which no host ran cost nothing (docs/performance.md).
    #[arg(long)]
    pub floor: bool,
}

#[derive(Args)]
pub struct ServeArgs {
    /// The scenario file (TOML; see docs/scenario.md).
    #[arg(long, required_unless_present = "provider_only")]
    pub scenario: Option<PathBuf>,
    /// Serve the scenario's fake provider alone (no Letta server): model calls answered from
    /// its cassettes and script with its provider faults, model catalogs for the Letta Code
    /// CLI's local backend, every request logged to --log. docs/serve.md "--provider-only".
    #[arg(long, value_name = "SCENARIO",
          conflicts_with_all = ["scenario", "seed", "profile", "scripted_model"])]
    pub provider_only: Option<PathBuf>,
    /// The seed for ids and everything else the server draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// TCP port to listen on (0 picks a free one; the ready line says which).
    #[arg(long, default_value_t = 8283)]
    pub port: u16,
    /// Address to bind. Loopback unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Write every request (method, path, body, status) as JSON lines to this file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write the trace (one event per line) to this file as it happens.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Server profile, overriding the scenario's `[server] profile`: `cloud` (hosted Letta
    /// as the Letta Code CLI expects it), `local` (the CLI's in-process backend) or
    /// `letta-oss-0.16` (the open-source Letta 0.16.8 server byte for byte as captured,
    /// with its agents endpoints). docs/server.md "Profiles".
    #[arg(long, value_name = "NAME",
          value_parser = clap::builder::PossibleValuesParser::new(loopsim::model::letta::server::Profile::NAMES))]
    pub profile: Option<String>,
    /// Answer model calls with the scripted fake model the real-server captures were
    /// recorded against (FAIL500, CUTSTREAM, MIDERR, SLOW, PLAIN in the last message; else
    /// a `get_secret_weather` call) instead of the scenario's cassettes. docs/serve.md.
    #[arg(long)]
    pub scripted_model: bool,
    /// Connections served at once; one more is answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = loopsim::harness::serve_guard::LIMITS.max_connections, value_parser = at_least_one)]
    pub max_connections: usize,
    /// Time a client has to send a request's head and body, from its first byte.
    #[arg(long, value_name = "MS", default_value_t = loopsim::harness::serve_guard::LIMITS.request_read.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_read_ms: u64,
    /// Largest request body accepted, in bytes; a larger one is answered 413.
    #[arg(long, value_name = "BYTES", default_value_t = loopsim::harness::serve_guard::LIMITS.max_body)]
    pub max_body: u64,
}

#[derive(Subcommand)]
pub enum ReportCommand {
    /// Merge the JSON reports of `sim explore --shard K/N --out FILE` runs into one.
    Merge(MergeArgs),
}

#[derive(Args)]
pub struct MergeArgs {
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
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

/// A count that must be at least 1 (`--jobs`).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// When the diff is coloured.
#[derive(Clone, Copy, ValueEnum)]
pub enum Colour {
    /// When stdout is a terminal.
    Auto,
    Always,
    Never,
}

/// A Letta client profile (docs/client.md).
#[derive(Clone, Copy, ValueEnum)]
pub enum ClientProfileArg {
    /// The reference client: letta-protocol.md as written, with its deliberate differences.
    Reference,
    /// The published Letta Code client, with its findings.
    LettaCode,
}

impl ClientProfileArg {
    /// The profile's name in a scenario file.
    pub fn name(self) -> &'static str {
        match self {
            ClientProfileArg::Reference => "reference",
            ClientProfileArg::LettaCode => "letta-code",
        }
    }
}

/// Which side of the recording is played by loopsim's models.
#[derive(Clone, Copy, ValueEnum)]
pub enum SideArg {
    /// The client model against the server model; the requests are compared.
    Client,
    /// The recorded requests into the server model; the responses are compared.
    Server,
    /// Both, server first.
    Both,
}

/// Replay a recorded `letta` session (a version 2 cassette) in simulation and compare it with
/// the recording, exchange by exchange, after id normalisation.
///
/// Server side: the recorded requests, at their recorded offsets, and the model's answers
/// recovered from the recorded frames go into the server model; each response (status,
/// content type, body or frame by frame) is compared. Client side: the scenario the recording
/// implies runs the client model against the server model; the request sequences are compared.
/// Prints the first divergent exchange with a unified diff and the trace up to it, or how many
/// exchanges and frames matched. With several cassettes: one line each, with its wall time.
#[derive(Args)]
pub struct ReplayArgs {
    /// The cassettes (`sim record --layer letta` output, `sim import` of a letta_e2e flow).
    #[arg(required = true)]
    pub cassettes: Vec<PathBuf>,
    /// Which side loopsim plays.
    #[arg(long, value_enum, default_value_t = SideArg::Server)]
    pub side: SideArg,
    /// The server model's profile: cloud, local or letta-oss-0.16.
    #[arg(long, value_name = "NAME", default_value = "letta-oss-0.16")]
    pub server_profile: String,
    /// The client model's profile (client side): reference or letta-code.
    #[arg(long, value_name = "NAME", default_value = "letta-code")]
    pub client_profile: String,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Compare every body, the bookkeeping ones too (models, agent and conversation objects);
    /// without it those are compared on status and content type only.
    #[arg(long)]
    pub strict: bool,
    /// Also write the scenario the recording implies (client side) as a standalone directory:
    /// DIR/scenario.toml and its answers under DIR/answers/, for `sim run`, `sim explore
    /// --swarm` and `sim shrink`. With several cassettes, one subdirectory each.
    #[arg(long, value_name = "DIR")]
    pub emit_scenario: Option<PathBuf>,
    /// Colour the diff.
    #[arg(long, value_enum, default_value_t = Colour::Auto)]
    pub color: Colour,
    /// Also write every report of this command as one self-contained HTML page: the first
    /// divergence as the recorded and the replayed body side by side, their diff, and the
    /// replayed world as a sequence diagram (docs/trace.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Reads `sim run --start`: an RFC 3339 UTC instant, refused as `[network] start` refuses it.
fn parse_start(s: &str) -> Result<loopsim::harness::world_start::WorldStart, String> {
    loopsim::harness::world_start::WorldStart::parse(s)
}

/// Reads one `sim run --plan` fault.
fn parse_plan_fault(s: &str) -> Result<loopsim::harness::faults::Fault, String> {
    loopsim::harness::guidance::parse_plan_fault(s)
}
