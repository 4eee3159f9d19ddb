//! A sweep that survives an abort. Most panics unwind and `harness::guard` turns them into the
//! seed's crash verdict, but some cannot be caught in the process: a panic in a destructor
//! while another panic unwinds, a panic in a function that cannot unwind, a stack overflow.
//! Each of those kills the process. So `sim explore` runs its seeds in a child process (`sim
//! explore --worker`, the same sweep over the work items it reads on stdin), which prints a
//! line when a seed starts and one with its result when it ends. If the child dies, the seeds
//! it had started and not finished are run again one by one, each in a child of its own: the
//! one that dies again gets a crash verdict whose message is what it printed on stderr, the
//! others their results; then a new child takes the rest. The report is assembled in (scenario,
//! seed) order from the results, so it is the one an in-process sweep gives.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;

use std::collections::BTreeMap;

use loopsim::harness::explore::{
    ExploreOptions, ExploreReport, SeedResult, assemble, run_items, work_items,
};
use loopsim::harness::faults::Fault;
use loopsim::harness::guided;
use loopsim::harness::scenario::{InputError, Scenario};

use std::path::PathBuf;

use crate::args::ExploreArgs;

/// What a worker child is started with besides the [`ExploreOptions`]: the scenario files and
/// the command-line settings that change how they load.
pub struct Child {
    pub scenarios: Vec<PathBuf>,
    pub tick_ms: Option<u64>,
    pub latency_scale: Option<u64>,
    pub client_profile: Option<&'static str>,
    pub no_warp: bool,
}

impl From<&ExploreArgs> for Child {
    fn from(a: &ExploreArgs) -> Self {
        Child {
            scenarios: a.scenarios.clone(),
            tick_ms: a.tick_ms,
            latency_scale: a.latency_scale,
            client_profile: a.client_profile.map(|p| p.name()),
            no_warp: a.no_warp,
        }
    }
}

/// Test hook: a worker whose environment names a seed in this variable aborts the process
/// when that seed starts (a panic in a destructor during unwinding), as a model defect would.
pub const TEST_ABORT_SEED: &str = "LOOPSIM_TEST_ABORT_SEED";

/// How a child ended.
enum Ended {
    /// It ran every item it was given.
    Completed,
    /// It died: the items it had started and not finished, its exit status, its stderr (when
    /// captured).
    Died {
        in_flight: Vec<usize>,
        status: ExitStatus,
        stderr: String,
    },
}

/// The sweep of `scenarios` run in child processes (see the module comment).
pub fn explore(
    a: &Child,
    scenarios: &[Scenario],
    options: &ExploreOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ExploreReport, InputError> {
    let work = work_items(scenarios, options);
    let total = work.len() as u64;
    if options.guided {
        // Each round runs in children of its own; the rounds' plans travel with their items.
        return guided::explore(scenarios, options, progress, &mut |items, plans| {
            let mut results: Vec<Option<SeedResult>> = vec![None; work.len()];
            run_all(a, scenarios, options, &work, items, plans, &mut |i, r| {
                results[i] = Some(r);
            })?;
            Ok(items
                .iter()
                .map(|&i| (i, results[i].take().expect("every item has a result")))
                .collect())
        });
    }
    let mut results: Vec<Option<SeedResult>> = vec![None; work.len()];
    let mut done = 0u64;
    let items: Vec<usize> = (0..work.len()).collect();
    run_all(
        a,
        scenarios,
        options,
        &work,
        &items,
        &BTreeMap::new(),
        &mut |i, r| {
            results[i] = Some(r);
            done += 1;
            progress(done, total);
        },
    )?;
    assemble(
        scenarios,
        options,
        results
            .into_iter()
            .map(|r| Ok(r.expect("every seed has a result"))),
    )
}

/// Runs `items` (with their `plans`, in a guided sweep) in child processes until each has a
/// result, passing each result once to `record`.
fn run_all(
    a: &Child,
    scenarios: &[Scenario],
    options: &ExploreOptions,
    work: &[(usize, u64)],
    items: &[usize],
    plans: &BTreeMap<usize, Vec<Fault>>,
    record: &mut dyn FnMut(usize, SeedResult),
) -> Result<(), InputError> {
    let mut have = std::collections::BTreeSet::new();
    let mut pending: Vec<usize> = items.to_vec();
    while !pending.is_empty() {
        let before = pending.len();
        let mut once = |i: usize, r: SeedResult| {
            if have.insert(i) {
                record(i, r);
            }
        };
        let ended = run_child(a, options, options.jobs, &pending, plans, false, &mut once)?;
        if let Ended::Died { in_flight, .. } = ended {
            for i in in_flight {
                let (si, seed) = work[i];
                if let Ended::Died { status, stderr, .. } =
                    run_child(a, options, 1, &[i], plans, true, &mut once)?
                {
                    let message = abort_message(status, &stderr);
                    once(
                        i,
                        SeedResult::aborted(
                            &scenarios[si],
                            seed,
                            options.swarm,
                            plans.get(&i).map(Vec::as_slice),
                            message,
                        ),
                    );
                }
            }
        }
        pending.retain(|i| !have.contains(i));
        if pending.len() == before {
            return Err(InputError {
                file: a.scenarios[0].display().to_string(),
                line: None,
                column: None,
                message: "the sweep's worker process died before it ran a seed".into(),
            });
        }
    }
    Ok(())
}

/// Runs one child over `items` with `jobs` threads, passing each result to `record`. An item
/// with a plan is sent with it (`<i> <plan as JSON>`).
fn run_child(
    a: &Child,
    options: &ExploreOptions,
    jobs: usize,
    items: &[usize],
    plans: &BTreeMap<usize, Vec<Fault>>,
    capture_stderr: bool,
    record: &mut dyn FnMut(usize, SeedResult),
) -> Result<Ended, InputError> {
    let mut cmd = Command::new(worker_exe().map_err(|e| spawn_error(a, e))?);
    cmd.arg("explore").args(&a.scenarios);
    cmd.arg("--seeds")
        .arg(format!("{}..{}", options.seeds.start, options.seeds.end));
    cmd.arg("--jobs").arg(jobs.to_string());
    if let Some((k, n)) = options.shard {
        cmd.arg("--shard").arg(format!("{k}/{n}"));
    }
    if options.swarm {
        cmd.arg("--swarm");
    }
    if options.guided {
        cmd.arg("--guided");
    }
    cmd.arg("--determinism-every")
        .arg(options.determinism_every.to_string());
    if let Some(t) = a.tick_ms {
        cmd.arg("--tick-ms").arg(t.to_string());
    }
    if let Some(k) = a.latency_scale {
        cmd.arg("--latency-scale").arg(k.to_string());
    }
    if let Some(p) = a.client_profile {
        cmd.arg("--client-profile").arg(p);
    }
    if a.no_warp {
        cmd.arg("--no-warp");
    }
    cmd.arg("--worker");
    if capture_stderr {
        cmd.arg("--echo-panics");
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    if capture_stderr {
        // The panics' messages without backtraces: they become the seed's crash message.
        cmd.stderr(Stdio::piped()).env("RUST_BACKTRACE", "0");
    }
    let mut child = cmd.spawn().map_err(|e| spawn_error(a, e))?;
    let mut stdin = child.stdin.take().expect("piped");
    let list: String = items
        .iter()
        .map(|i| match plans.get(i) {
            Some(plan) => format!(
                "{i} {}\n",
                serde_json::to_string(plan).expect("a plan serialises")
            ),
            None => format!("{i}\n"),
        })
        .collect();
    // The worker reads all of stdin before it prints anything; a dead worker closes the pipe.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(list.as_bytes());
    });
    let stderr_reader = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = e.read_to_string(&mut s);
            s
        })
    });
    let mut started = std::collections::BTreeSet::new();
    let mut error = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let Ok(line) = line else { break };
        if let Some(i) = line.strip_prefix("start ") {
            started.extend(i.parse::<usize>().ok());
        } else if let Some(rest) = line.strip_prefix("done ") {
            let (i, json) = rest.split_once(' ').unwrap_or((rest, ""));
            if let (Ok(i), Ok(r)) = (i.parse::<usize>(), serde_json::from_str(json)) {
                started.remove(&i);
                record(i, r);
            }
        } else if let Some(json) = line.strip_prefix("error ") {
            error =
                serde_json::from_str::<(String, Option<usize>, Option<usize>, String)>(json).ok();
        }
    }
    let _ = writer.join();
    let status = child.wait().map_err(|e| spawn_error(a, e))?;
    let stderr = stderr_reader
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    if let Some((file, line, column, message)) = error {
        return Err(InputError {
            file,
            line,
            column,
            message,
        });
    }
    if status.success() {
        Ok(Ended::Completed)
    } else {
        Ok(Ended::Died {
            in_flight: started.into_iter().collect(),
            status,
            stderr,
        })
    }
}

/// The program a worker runs: this process's own image. On Linux that is `/proc/self/exe`,
/// which names the running file even after a rebuild replaced the path, so every worker of a
/// sweep runs the parent's build (a worker started from the new file would mix two builds'
/// results in one report); elsewhere the path it was started from.
fn worker_exe() -> std::io::Result<std::path::PathBuf> {
    let own = std::path::Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && own.exists() {
        return Ok(own.to_path_buf());
    }
    std::env::current_exe()
}

fn spawn_error(a: &Child, e: std::io::Error) -> InputError {
    InputError {
        file: a.scenarios[0].display().to_string(),
        line: None,
        column: None,
        message: format!("cannot start the sweep's worker process: {e}"),
    }
}

/// The crash message of a seed whose process died: how it died and the panics it printed
/// (without thread names and ids, which differ from run to run).
fn abort_message(status: ExitStatus, stderr: &str) -> String {
    let said: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_backtrace(l))
        .map(|l| match l.find(" panicked at ") {
            Some(at) if l.starts_with("thread ") => &l[at + 1..],
            _ => l,
        })
        .collect();
    let tail = &said[said.len().saturating_sub(8)..];
    format!(
        "the run killed its process ({status}), a panic no unwinding catches: {}",
        if tail.is_empty() {
            "it printed nothing".to_string()
        } else {
            tail.join(" ")
        }
    )
}

/// Whether a line of stderr is part of a backtrace (Rust prints one for a panic in a
/// destructor during unwinding whatever `RUST_BACKTRACE` says), or a note about them.
fn is_backtrace(l: &str) -> bool {
    let frame = l
        .split_once(':')
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    frame || l.starts_with("at ") || l.starts_with("stack backtrace") || l.starts_with("note:")
}

/// `sim explore --worker`: the sweep's child. Reads work item numbers on stdin (each with its
/// plan as JSON in a guided sweep), runs them, and prints `start <i>` and `done <i> <json>`
/// lines (or one `error <json>` line for bad input).
pub fn worker(scenarios: &[Scenario], options: &ExploreOptions, echo_panics: bool) -> i32 {
    let mut text = String::new();
    let _ = std::io::stdin().read_to_string(&mut text);
    let work = work_items(scenarios, options);
    let mut items: Vec<usize> = Vec::new();
    let mut plans: BTreeMap<usize, Vec<Fault>> = BTreeMap::new();
    for line in text.lines() {
        let (i, plan) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        let Ok(i) = i.parse::<usize>() else { continue };
        if i >= work.len() {
            continue;
        }
        items.push(i);
        if let Ok(plan) = serde_json::from_str::<Vec<Fault>>(plan) {
            plans.insert(i, plan);
        }
    }
    loopsim::harness::guard::echo_panics(echo_panics);
    let abort_seed: Option<u64> = std::env::var(TEST_ABORT_SEED)
        .ok()
        .and_then(|s| s.parse().ok());
    let out = Mutex::new(std::io::stdout());
    let say = |line: String| {
        let mut o = out.lock().unwrap();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    let error = |e: &InputError| {
        format!(
            "error {}",
            serde_json::to_string(&(&e.file, e.line, e.column, &e.message))
                .expect("strings serialise")
        )
    };
    let ran = run_items(
        scenarios,
        options,
        &work,
        &items,
        &plans,
        &|i| {
            say(format!("start {i}"));
            if abort_seed == Some(work[i].1) {
                abort_in_a_destructor();
            }
        },
        &|i, r| match r {
            Ok(r) => say(format!(
                "done {i} {}",
                serde_json::to_string(&r).expect("a result serialises")
            )),
            Err(e) => say(error(&e)),
        },
    );
    match ran {
        Ok(()) => 0,
        Err(e) => {
            say(error(&e));
            2
        }
    }
}

/// What [`TEST_ABORT_SEED`] does: a panic whose unwinding drops a value whose destructor
/// panics, which Rust answers by aborting the process.
fn abort_in_a_destructor() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("a destructor panicked while the seed's panic unwound");
        }
    }
    let _armed = PanicsOnDrop;
    panic!("the seed's run panicked ({TEST_ABORT_SEED})");
}
