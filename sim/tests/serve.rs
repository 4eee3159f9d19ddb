//! `sim serve` as a user runs it: it prints one JSON ready line, answers HTTP on the
//! port it names, logs every request as a JSON line, and refuses bad input with exit 2.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn http(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_prints_a_ready_line_answers_http_and_logs_requests() {
    let log = std::env::temp_dir().join(format!("sim-serve-log-{}.jsonl", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "serve",
            "--scenario",
            "scenarios/letta/approval_turn.toml",
            "--port",
            "0",
            "--log",
        ])
        .arg(&log)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line is JSON");
    let addr = ready["listening"].as_str().unwrap().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{ready}");
    assert_eq!(
        ready["agent_id"],
        "agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd"
    );
    assert_eq!(ready["profile"], "cloud");

    let health = http(
        &addr,
        "GET /v1/health/ HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(
        health.contains(r#"{"version":"0.16.8","status":"ok"}"#),
        "{health}"
    );
    let body = r#"{"agent_id": 1"#;
    let bad = http(
        &addr,
        &format!(
            "POST /v1/conversations/default/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(bad.starts_with("HTTP/1.1 422"), "{bad}");
    let _ = child.kill();
    let _ = child.wait();

    let logged: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[0]["method"], "GET");
    assert_eq!(logged[0]["path"], "/v1/health/");
    assert_eq!(logged[0]["status"], 200);
    assert_eq!(logged[1]["body"]["_raw"], body);
    assert_eq!(logged[1]["status"], 422);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn serve_refuses_a_bad_scenario_and_a_simulation_only_fault() {
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["serve", "--scenario", "scenarios/nope.toml", "--port", "0"])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read scenario"));
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "serve",
            "--scenario",
            "scenarios/letta/server_restart.toml",
            "--port",
            "0",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a simulation fault"));
}

#[test]
fn serve_profile_flag_serves_the_letta_oss_profile_with_the_scripted_model() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "serve",
            "--scenario",
            "scenarios/letta/approval_turn.toml",
            "--port",
            "0",
            "--profile",
            "letta-oss-0.16",
            "--scripted-model",
        ])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line is JSON");
    let addr = ready["listening"].as_str().unwrap().to_string();
    assert_eq!(ready["profile"], "letta-oss-0.16", "{ready}");
    assert_eq!(ready["model_calls"], "scripted", "{ready}");
    let agent = ready["agent_id"].as_str().unwrap().to_string();
    let post = |extra: &str, body: &str| {
        http(
            &addr,
            &format!(
                "POST /v1/agents/{agent}/messages HTTP/1.1\r\nhost: x\r\nuser-agent: curl/7.88.1\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    // captures/letta_server x1: streaming on the agents endpoint needs an SDK client.
    let x1 = post(
        "",
        r#"{"messages":[{"role":"user","content":"PLAIN hello"}],"streaming":true}"#,
    );
    assert!(x1.starts_with("HTTP/1.1 422"), "{x1}");
    assert!(x1.contains(r#"{"detail":"streaming=true is only supported for SDK v1.0+ clients."}"#));
    // a3: step streaming, the whole call with `tool_calls` a list.
    let a3 = post(
        "x-stainless-package-version: 1.10.3\r\n",
        r#"{"messages":[{"role":"user","content":"What is the weather in Paris?"}],"streaming":true,"stream_tokens":false,"client_tools":[{"name":"get_secret_weather","parameters":{"type":"object"}}]}"#,
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(a3.starts_with("HTTP/1.1 200"), "{a3}");
    assert!(
        a3.contains(r#""tool_calls":[{"name":"get_secret_weather","arguments":"{\"city\": \"Paris\"}","tool_call_id":"call_fake0001"}]"#),
        "{a3}"
    );
    assert!(a3.contains(r#"{"message_type":"stop_reason","stop_reason":"requires_approval"}"#));
}

#[test]
fn serve_refuses_an_unknown_profile() {
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "serve",
            "--scenario",
            "scenarios/letta/approval_turn.toml",
            "--profile",
            "letta-oss-9",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("letta-oss-0.16"));
}
