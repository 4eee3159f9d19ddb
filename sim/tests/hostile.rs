//! Hostile input and dying seeds as a user meets them through the `sim` binary: a seed that
//! aborts its process gets a crash verdict without ending the sweep; `sim report merge`,
//! `sim shrink` and the output paths refuse what they cannot honour.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sim_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sim"));
    c.args(args).current_dir(root());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("sim runs")
}

fn sim(args: &[&str]) -> Output {
    sim_env(args, &[])
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("loopsim-hostile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SCENARIO: &str = "scenarios/letta/approval_turn.toml";

/// The JSON report without the fields an aborted seed changes.
fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn a_seed_that_aborts_its_process_is_a_crash_and_the_sweep_goes_on() {
    let args = [
        "explore", SCENARIO, "--seeds", "0..8", "--jobs", "2", "--format", "json",
    ];
    let aborting = [("LOOPSIM_TEST_ABORT_SEED", "3")];
    let o = sim_env(&args, &aborting);
    assert_eq!(o.status.code(), Some(127), "{}{}", stdout(&o), stderr(&o));
    let r = json(&o);
    assert_eq!(r["runs"], 8);
    assert_eq!(r["passed"], 7);
    let failures = r["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{r}");
    let f = &failures[0];
    assert_eq!(f["seed"], 3);
    assert_eq!(f["kind"], "crash");
    assert_eq!(f["invariants"], serde_json::json!(["crash"]));
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("panic in a destructor during cleanup"),
        "{message}"
    );
    assert!(f["reproduce"].as_str().unwrap().contains("--seed 3"), "{f}");
    // The same report every time, whatever the jobs.
    let again = sim_env(
        &[
            "explore", SCENARIO, "--seeds", "0..8", "--jobs", "1", "--format", "json",
        ],
        &aborting,
    );
    assert_eq!(json(&again), r);
    // The other seeds are what a sweep without the abort gives.
    let clean = json(&sim(&args));
    assert_eq!(clean["passed"], 8);
    assert_eq!(clean["coverage"]["tool-executed"], 8);
    assert_eq!(r["coverage"]["tool-executed"], 7);
}

fn assert_input_error(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(o), stderr(o));
    for n in needles {
        assert!(stderr(o).contains(n), "{n:?} not in {}", stderr(o));
    }
}

#[test]
fn report_merge_refuses_anything_but_one_complete_set_of_shards_of_one_sweep() {
    let dir = temp_dir("merge");
    let shard = |name: &str, seeds: &str, k_n: &str, extra: &[&str]| -> String {
        let file = dir.join(name);
        let mut args = vec![
            "explore",
            SCENARIO,
            "--seeds",
            seeds,
            "--shard",
            k_n,
            "--out",
            file.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let o = sim(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        file.to_str().unwrap().to_string()
    };
    let s1 = shard("s1.json", "0..6", "1/3", &[]);
    let s2 = shard("s2.json", "0..6", "2/3", &[]);
    let s3 = shard("s3.json", "0..6", "3/3", &[]);
    let half = shard("h1.json", "0..6", "1/2", &[]);
    let other = shard("o3.json", "0..9", "3/3", &[]);
    let swarm = shard("w3.json", "0..6", "3/3", &["--swarm"]);
    let merge = |files: &[&str]| {
        let mut args = vec!["report", "merge", "--format", "json"];
        args.extend_from_slice(files);
        sim(&args)
    };
    let whole = merge(&[&s1, &s2, &s3]);
    assert_eq!(whole.status.code(), Some(0), "{}", stderr(&whole));
    let r: serde_json::Value = serde_json::from_str(&stdout(&whole)).unwrap();
    assert_eq!(r["runs"], 6);
    let o = merge(&[&s1, &s2, &s2, &s3]);
    assert_input_error(&o, &["shard 2/3 is given twice", "s2.json"]);
    let o = merge(&[&s1, &s3]);
    assert_input_error(&o, &["incomplete set of shards: missing 2/3"]);
    let o = merge(&[&s1, &s2, &half]);
    assert_input_error(&o, &["different splits", "1/2"]);
    let o = merge(&[&s1, &s2, &other]);
    assert_input_error(&o, &["not shards of one sweep", "o3.json"]);
    let o = merge(&[&s1, &s2, &swarm]);
    assert_input_error(&o, &["not shards of one sweep", "--swarm"]);
    // An unknown key is an error with its line and column, not something dropped.
    let text = std::fs::read_to_string(&s3).unwrap();
    let edited = dir.join("edited.json");
    std::fs::write(&edited, text.replacen("{", "{\n  \"colour\": 1,", 1)).unwrap();
    let o = merge(&[&s1, &s2, edited.to_str().unwrap()]);
    assert_input_error(&o, &["edited.json:2:", "unknown field `colour`"]);
    // A report whose counts were edited is not a whole shard.
    let cut = dir.join("cut.json");
    std::fs::write(&cut, text.replacen("\"runs\": 2", "\"runs\": 1", 1)).unwrap();
    let o = merge(&[&s1, &s2, cut.to_str().unwrap()]);
    assert_input_error(&o, &["cut.json is not a whole report"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn shrink_refuses_zero_runs_and_an_unknown_invariant() {
    let planted = "scenarios/planted/dangling_tool_call.toml";
    let o = sim(&["shrink", planted, "--seed", "1", "--max-runs", "0"]);
    assert_input_error(&o, &["--max-runs"]);
    let o = sim(&["shrink", planted, "--seed", "1", "--invariant", "no-such"]);
    assert_input_error(&o, &["unknown invariant \"no-such\"", "tool-call-resolved"]);
}

#[test]
fn ci_and_shrink_check_their_output_paths_before_running() {
    let dir = temp_dir("outputs");
    let missing = dir.join("no-such-dir").join("x");
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let planted = "scenarios/planted/dangling_tool_call.toml";
    for args in [
        vec!["ci", "--junit", missing.to_str().unwrap()],
        vec!["ci", "--json", dir.to_str().unwrap()],
        vec![
            "shrink",
            planted,
            "--seed",
            "1",
            "--out",
            missing.to_str().unwrap(),
        ],
        vec![
            "shrink",
            planted,
            "--seed",
            "1",
            "--out",
            file.to_str().unwrap(),
        ],
        vec![
            "explore",
            planted,
            "--seeds",
            "0..1",
            "--shrink",
            file.to_str().unwrap(),
        ],
        vec![
            "report",
            "merge",
            "x.json",
            "--out",
            missing.to_str().unwrap(),
        ],
    ] {
        let o = sim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} ran: {}", stdout(&o));
        assert!(
            stderr(&o).contains("cannot write"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(!dir.join("no-such-dir").exists());
    std::fs::remove_dir_all(&dir).ok();
}

/// `sim serve` started on a free port with `extra` flags: the child and its address.
fn serve(extra: &[&str], log: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["serve", "--scenario", SCENARIO, "--port", "0", "--log"])
        .arg(log)
        .args(extra)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("a ready line");
    (child, ready["listening"].as_str().unwrap().to_string())
}

/// Everything the server sends until it closes the connection (or resets it).
fn read_all(s: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn connect(addr: &str) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    // A bound on a broken server, not a timing assertion: every read below ends by the
    // server's own limit long before this.
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    s
}

fn post(path: &str, content_type: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn serve_defends_itself_against_a_hostile_client() {
    use std::io::Write;
    let dir = temp_dir("serve");
    let log = dir.join("requests.jsonl");
    let (mut child, addr) = serve(
        &[
            "--max-connections",
            "3",
            "--request-read-ms",
            "300",
            "--max-body",
            "1000",
        ],
        &log,
    );
    // Slowloris: half a head, then silence. The server closes the connection once the
    // request's time is up, and answers the next client.
    let mut slow = connect(&addr);
    slow.write_all(b"POST /v1/conversations/default/messages HTTP/1.1\r\nhost: x\r\n")
        .unwrap();
    let said = read_all(&mut slow);
    assert!(!said.contains("200 OK"), "{said}");
    // A body over the limit is answered 413.
    let big = format!("{{\"x\": \"{}\"}}", "a".repeat(5000));
    let mut s = connect(&addr);
    s.write_all(
        post(
            "/v1/conversations/default/messages",
            "application/json",
            &big,
        )
        .as_bytes(),
    )
    .unwrap();
    let said = read_all(&mut s);
    assert!(said.starts_with("HTTP/1.1 413"), "{said}");
    // A JSON route given another content type answers as FastAPI does.
    let mut s = connect(&addr);
    s.write_all(post("/v1/conversations/default/messages", "text/plain", "{}").as_bytes())
        .unwrap();
    let said = read_all(&mut s);
    assert!(said.starts_with("HTTP/1.1 422"), "{said}");
    assert!(said.contains("model_attributes_type"), "{said}");
    // Three idle connections take every slot; a fourth is answered 503 and closed.
    let idle: Vec<_> = (0..3).map(|_| connect(&addr)).collect();
    // Each idle connection is accepted before the next one is tried.
    for s in &idle {
        let _ = s.peer_addr();
    }
    let mut fourth = connect(&addr);
    let said = read_all(&mut fourth);
    let refused = said.starts_with("HTTP/1.1 503");
    drop(idle);
    // The slots come back once those close.
    let health = "GET /v1/health/ HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let mut answered = String::new();
    for _ in 0..50 {
        let mut s = connect(&addr);
        s.write_all(health.as_bytes()).unwrap();
        answered = read_all(&mut s);
        if answered.starts_with("HTTP/1.1 200") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(refused, "a fourth connection was served: {said}");
    // SIGTERM stops it normally, and the log holds every answered request.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    let logged = std::fs::read_to_string(&log).unwrap();
    let statuses: Vec<u64> = logged
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["status"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(statuses.contains(&413), "{logged}");
    assert!(statuses.contains(&422), "{logged}");
    assert_eq!(statuses.last(), Some(&200), "{logged}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_seed_that_aborts_its_process_fails_its_gate_sweep_and_the_gate_goes_on() {
    // A repository of one bundled scenario (its cassettes linked in), so the gate is short.
    let dir = temp_dir("ci-abort");
    std::fs::create_dir_all(dir.join("scenarios/letta")).unwrap();
    std::fs::copy(root().join(SCENARIO), dir.join(SCENARIO)).unwrap();
    let _ = std::os::unix::fs::symlink(root().join("cassettes"), dir.join("cassettes"));
    let report = dir.join("gate.json");
    let args = [
        "ci",
        "--root",
        dir.to_str().unwrap(),
        "--fixed-seeds",
        "6",
        "--jobs",
        "2",
        "--json",
        report.to_str().unwrap(),
    ];
    let o = sim_env(&args, &[("LOOPSIM_TEST_ABORT_SEED", "3")]);
    assert_eq!(o.status.code(), Some(127), "{}{}", stdout(&o), stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let case = |suite: &str| {
        r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["suite"] == suite)
            .unwrap_or_else(|| panic!("no {suite} check: {r}"))
            .clone()
    };
    // The seed aborts in both stages that run it: as written (20 seeds) and guided (6).
    for (suite, counts) in [
        ("as-written", "20 seeds, 19 passed, 1 failed"),
        ("sweep", "6 seeds, 5 passed, 1 failed"),
    ] {
        let case = case(suite);
        assert_eq!(case["ok"], false, "{r}");
        let message = case["message"].as_str().unwrap();
        assert!(message.contains(counts), "{message}");
        assert!(message.contains("seed 3 failed crash"), "{message}");
        assert!(message.contains("--seed 3"), "{message}");
    }
    // Without the abort the same sweep passes (this small repository has no snapshots, a
    // failure of its own).
    let o = sim(&args);
    assert!(
        stdout(&o).contains("ok   sweep"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}
