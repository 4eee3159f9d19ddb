//! For the interop tests: install the real clients (tests/interop/setup.sh), run `sim serve`'s
//! code on a free loopback port in this process, read its request log.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::repo;
use loopsim::harness::serve::{ServeOptions, serve};
use serde_json::Value;

/// Where the interop tests install and write (ignored by git: under target/).
pub fn work_dir() -> PathBuf {
    std::env::var_os("LOOPSIM_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/interop"))
}

/// Runs tests/interop/setup.sh once per test binary. `None` (after printing why) only when a
/// package registry is unreachable; any other failure panics.
pub fn setup() -> Option<PathBuf> {
    static SETUP: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let r = SETUP.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo().join("tests/interop/setup.sh"))
            .arg(work_dir())
            .output()
            .expect("bash runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        match out.status.code() {
            Some(0) => Ok(PathBuf::from(
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .lines()
                    .last()
                    .unwrap_or(""),
            )),
            Some(75) => Err(stderr),
            _ => panic!("tests/interop/setup.sh failed:\n{stderr}"),
        }
    });
    match r {
        Ok(p) => Some(p.clone()),
        Err(why) => {
            println!("SKIPPED: {}", why.trim());
            None
        }
    }
}

/// A running `sim serve` (in this process, on a thread).
pub struct Served {
    pub ready: Value,
    pub base_url: String,
    pub log: PathBuf,
    pub dir: PathBuf,
}

impl Served {
    /// Starts serving `scenario` (relative to the crate root) with `seed` on a free port.
    pub fn start(scenario: &str, tag: &str, seed: u64) -> Served {
        let dir = work_dir()
            .join("runs")
            .join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("requests.jsonl");
        let opts = ServeOptions {
            scenario: repo().join(scenario),
            seed,
            listen: "127.0.0.1:0".parse().unwrap(),
            request_log: Some(log.clone()),
            trace: Some(dir.join("trace.txt")),
            profile: None,
            scripted_model: false,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let tx2 = tx.clone();
            if let Err(e) = serve(opts, move |ready| {
                let _ = tx2.send(Ok(ready));
            }) {
                let _ = tx.send(Err(e.to_string()));
            }
        });
        let ready = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("sim serve got ready")
            .unwrap_or_else(|e| panic!("sim serve failed: {e}"));
        let base_url = ready["base_url"].as_str().unwrap().to_string();
        Served {
            ready,
            base_url,
            log,
            dir,
        }
    }

    /// Every request logged so far.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("request log line is JSON"))
            .collect()
    }

    /// The logged message sends (`POST …/messages`), in order.
    pub fn sends(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["method"] == "POST" && r["path"].as_str().unwrap().ends_with("/messages"))
            .collect()
    }
}

/// What one CLI run printed.
pub struct CliRun {
    pub events: Vec<Value>,
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
    pub elapsed: Duration,
}

impl CliRun {
    pub fn result(&self) -> &Value {
        self.events
            .iter()
            .rev()
            .find(|e| e["type"] == "result")
            .unwrap_or_else(|| {
                panic!(
                    "no result event; stdout:\n{}\nstderr:\n{}",
                    self.stdout, self.stderr
                )
            })
    }

    pub fn messages(&self, message_type: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "message" && e["message_type"] == message_type)
            .collect()
    }

    pub fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == ty).collect()
    }
}

/// Runs the real CLI headless against `served` (letta-tests-and-real-client.md B.1, B.8): a
/// fresh HOME and working directory, a loopback `LETTA_BASE_URL`, no API key, telemetry and the
/// updater off. `prepare` may write files into the working directory first.
pub fn run_cli(
    letta_js: &Path,
    served: &Served,
    args: &[&str],
    prepare: impl FnOnce(&Path),
) -> CliRun {
    run_cli_env(letta_js, served, args, &[], prepare)
}

/// [`run_cli`] with more environment variables, set after (and so over) its own.
pub fn run_cli_env(
    letta_js: &Path,
    served: &Served,
    args: &[&str],
    env: &[(&str, &str)],
    prepare: impl FnOnce(&Path),
) -> CliRun {
    let home = served.dir.join("home");
    let work = served.dir.join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    prepare(&work);
    let started = Instant::now();
    let mut child = Command::new("node")
        .arg(letta_js)
        .args(args)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TERM", "dumb")
        .env("LETTA_BASE_URL", &served.base_url)
        .env("LETTA_CODE_TELEM", "0")
        .env("DO_NOT_TRACK", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("LETTA_DISABLE_SESSION_PERSIST", "1")
        .envs(env.iter().copied())
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    // Bounded: no flow needs more than a minute (flow 3 waits 10 s by design).
    let deadline = started + Duration::from_secs(120);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let events = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    CliRun {
        events,
        stdout,
        stderr,
        code,
        elapsed: started.elapsed(),
    }
}
