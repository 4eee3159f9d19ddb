//! Launches the client command of one run: `sh -c CMD` in a fresh working directory with a fresh
//! HOME, pointed at the run's server, in a process group of its own so that the whole group can
//! be ended when its wall-clock budget runs out. Every stdout line is stamped with the real time
//! it was read, on the server's clock.

use std::io::{BufRead as _, BufReader, Read as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// What the command is told and given.
pub struct Launch<'a> {
    /// A shell command line (`sh -c`).
    pub command: &'a str,
    /// The run's directory: `home/` and `work/` are created in it.
    pub dir: &'a Path,
    /// The variables of docs/real-client.md ("The command's environment").
    pub env: Vec<(String, String)>,
    pub budget: Duration,
    /// The server's clock: stdout lines are stamped with `start.elapsed()`.
    pub start: tokio::time::Instant,
}

/// What the command did.
#[derive(Debug, Clone, Default)]
pub struct CliRun {
    /// Stdout lines, each with the real time it was read (ms on the server's clock).
    pub stdout: Vec<(u64, String)>,
    pub stderr: String,
    /// The exit code; `None` when a signal ended it (the budget's kill among them).
    pub code: Option<i32>,
    /// The budget ran out and the process group was killed.
    pub killed: bool,
    /// Real time from the launch to its exit (or to the kill).
    pub elapsed_ms: u64,
    pub work: PathBuf,
}

impl CliRun {
    /// Stdout lines that are JSON objects (the CLI's `stream-json` events), with their times.
    pub fn events(&self) -> Vec<(u64, Value)> {
        self.stdout
            .iter()
            .filter_map(|(t, l)| {
                serde_json::from_str::<Value>(l)
                    .ok()
                    .filter(Value::is_object)
                    .map(|v| (*t, v))
            })
            .collect()
    }

    /// The last `result` event.
    pub fn result(&self) -> Option<Value> {
        self.events()
            .into_iter()
            .rev()
            .find(|(_, e)| e["type"] == "result")
            .map(|(_, e)| e)
    }

    /// The last `n` lines of stdout and of stderr.
    pub fn tail(&self, n: usize) -> (Vec<String>, Vec<String>) {
        let out: Vec<String> = self.stdout.iter().map(|(_, l)| l.clone()).collect();
        let err: Vec<String> = self.stderr.lines().map(str::to_string).collect();
        let last = |v: Vec<String>| v[v.len().saturating_sub(n)..].to_vec();
        (last(out), last(err))
    }
}

/// Runs the command to its end or its budget. `Err` only when it cannot be started.
pub fn launch(l: &Launch<'_>) -> std::io::Result<CliRun> {
    let home = l.dir.join("home");
    let work = l.dir.join("work");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&work)?;
    let started = l.start.elapsed();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(l.command)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("TERM", "dumb")
        .env("LETTA_CODE_TELEM", "0")
        .env("DO_NOT_TRACK", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("LETTA_DISABLE_SESSION_PERSIST", "1")
        .env("SIM_WORK_DIR", &work)
        .envs(l.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&work)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let start = l.start;
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            lines.push((start.elapsed().as_millis() as u64, line));
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let deadline = started + l.budget;
    let mut killed = false;
    let code = loop {
        if let Some(status) = child.try_wait()? {
            break status.code();
        }
        if l.start.elapsed() >= deadline {
            killed = true;
            kill_group(pid);
            break child.wait()?.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed_ms = (l.start.elapsed() - started).as_millis() as u64;
    // Whatever the command left running in its group (it started them) ends with it.
    kill_group(pid);
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(CliRun {
        stdout,
        stderr,
        code: if killed { None } else { code },
        killed,
        elapsed_ms,
        work,
    })
}

/// Sends SIGKILL to the process group `pgid` (the group of a command this module started).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .arg("-KILL")
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
