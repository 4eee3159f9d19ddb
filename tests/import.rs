//! `sim import`: raw SSE captures, vcrpy YAML cassettes and Letta end-to-end recordings as
//! version 2 cassettes; the committed imports of the shared captures equal fresh imports; what a
//! cassette cannot represent is an error naming it.

use std::path::{Path, PathBuf};

use loopsim::cassette::scrub::Scrubber;
use loopsim::cassette::{
    Body, CassetteErrorKind, ImportKind, Layer, RECORDING_IMPORTS, Recording, ResponseBody,
    import_bytes, import_file,
};
use loopsim::wire::provider::StreamFormat;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn captures() -> PathBuf {
    repo().join("../shared/captures")
}

fn import(kind: ImportKind, text: &str) -> Result<Recording, loopsim::cassette::CassetteError> {
    import_bytes(kind, text.as_bytes(), "x", None, &Scrubber::default())
}

/// The committed imports are exactly what importing their captures gives today. Run with
/// `LOOPSIM_BLESS_CASSETTES=1` to rewrite them after a deliberate format or import change.
#[test]
fn committed_imports_equal_fresh_imports() {
    let bless = std::env::var_os("LOOPSIM_BLESS_CASSETTES").is_some();
    for imp in RECORDING_IMPORTS {
        let fresh = imp
            .import(&captures())
            .unwrap_or_else(|e| panic!("{}: {e}", imp.capture))
            .to_jsonl();
        let path = repo().join(imp.cassette);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (bless with LOOPSIM_BLESS_CASSETTES=1)",
                imp.cassette
            )
        });
        assert!(
            committed == fresh,
            "{} differs from a fresh import of {} (bless with LOOPSIM_BLESS_CASSETTES=1)",
            imp.cassette,
            imp.capture
        );
        let r = Recording::parse(&committed, imp.cassette).unwrap();
        assert_eq!(r.to_jsonl(), committed);
        assert_eq!(
            r.header().source,
            format!("shared/captures/{}", imp.capture)
        );
    }
    // Every letta_e2e recording, vcrpy cassette and Gemini / Responses stream is there.
    let count = |dir: &str, suffix: &str| {
        std::fs::read_dir(captures().join(dir))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(suffix)
            })
            .count()
    };
    let yaml: usize = ["anthropic", "gemini", "openai_chat", "openai_responses"]
        .iter()
        .map(|d| count(d, ".cassette.yaml"))
        .sum();
    let want = count("letta_e2e", ".exchanges.jsonl")
        + yaml
        + count("gemini", ".sse")
        + count("openai_responses", ".sse");
    assert_eq!(RECORDING_IMPORTS.len(), want);
}

#[test]
fn a_letta_e2e_recording_keeps_order_offsets_and_frames() {
    let path = captures().join("letta_e2e/e_busy_conversation_409.exchanges.jsonl");
    let (kind, stem, r) = import_file(&path, None, &Scrubber::default()).unwrap();
    assert_eq!(
        (kind, stem.as_str()),
        (ImportKind::LettaE2e, "e_busy_conversation_409")
    );
    assert_eq!(r.header().layer, Layer::Letta);
    let raw: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(r.exchanges().len(), raw.len());
    assert_eq!(r.exchanges()[0].t_ms, 0);
    // The setup's slow turn, then the CLI's 409, the attach by otid (404 after the server's
    // ~1.76 s of polling), ten seconds' back-off, the same otid again.
    let posts: Vec<_> = r
        .exchanges()
        .iter()
        .filter(|x| x.method == "POST" && x.path.ends_with("/messages"))
        .collect();
    let statuses: Vec<u16> = posts.iter().map(|x| x.answer().unwrap().status).collect();
    assert_eq!(statuses, vec![200, 409, 409, 200, 200]);
    assert!(
        posts[2].t_ms - posts[1].t_ms >= 10_000,
        "{} {}",
        posts[1].t_ms,
        posts[2].t_ms
    );
    let attach = r
        .exchanges()
        .iter()
        .find(|x| x.path.ends_with("/stream"))
        .unwrap();
    assert_eq!(attach.answer().unwrap().status, 404);
    assert!(attach.answer().unwrap().t_ms >= 1700);
    // SSE frames: as many as recorded, offsets from the response head.
    for (x, raw) in r.exchanges().iter().zip(&raw) {
        match (&x.answer().unwrap().body, raw.get("sse_frames")) {
            (ResponseBody::Sse(frames), Some(rf)) => {
                let rf = rf.as_array().unwrap();
                assert_eq!(frames.len(), rf.len());
                for (f, r) in frames.iter().zip(rf) {
                    assert_eq!(f.t_ms, r["ms"].as_f64().unwrap().round() as u64);
                }
            }
            (ResponseBody::Whole(b), None) => match raw["response_body"] {
                serde_json::Value::Null => assert_eq!(*b, Body::Empty),
                ref v => assert_eq!(*b, Body::Json(v.clone())),
            },
            _ => panic!("{}: body kind differs", x.path),
        }
    }
    // The 409 keeps the server's detail verbatim.
    let ResponseBody::Whole(Body::Json(conflict)) = &posts[1].answer().unwrap().body else {
        panic!("the 409 has a JSON body")
    };
    assert!(
        conflict["detail"]
            .as_str()
            .unwrap()
            .starts_with("CONFLICT: Cannot send a new message: Another request")
    );
}

#[test]
fn a_vcrpy_cassette_becomes_one_exchange_per_interaction() {
    let path = captures().join("gemini/pydanticai_function_call_thought_signature.cassette.yaml");
    let (kind, stem, r) = import_file(&path, None, &Scrubber::default()).unwrap();
    assert_eq!(
        (kind, stem.as_str()),
        (
            ImportKind::VcrYaml,
            "pydanticai_function_call_thought_signature"
        )
    );
    assert_eq!(r.header().format, Some(StreamFormat::Gemini));
    assert_eq!(r.exchanges().len(), 2);
    let x = &r.exchanges()[0];
    assert_eq!(x.method, "POST");
    assert_eq!(
        x.path,
        "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    );
    assert!(matches!(&x.request.body, Body::Json(v) if v["tools"].is_array()));
    let ResponseBody::Sse(frames) = &x.answer().unwrap().body else {
        panic!()
    };
    // The same frames as the raw capture of that interaction.
    let raw = loopsim::wire::sse::decode_all(
        &std::fs::read(captures().join("gemini/pydanticai_function_call_thought_signature.sse"))
            .unwrap(),
    );
    let got: Vec<_> = frames.iter().map(|f| f.frame.clone()).collect();
    assert_eq!(got, raw);
    assert!(r.exchanges()[1].t_ms >= x.answer().unwrap().end.t_ms);
    assert!(
        r.header()
            .note
            .as_deref()
            .unwrap()
            .contains("https://generativelanguage.googleapis.com")
    );
}

#[test]
fn a_raw_sse_capture_becomes_one_provider_exchange() {
    let path = captures().join("openai_responses/pydanticai_function_call_args_delta.sse");
    let (_, _, r) = import_file(&path, None, &Scrubber::default()).unwrap();
    assert_eq!(r.header().format, Some(StreamFormat::OpenAiResponses));
    let x = &r.exchanges()[0];
    assert_eq!(
        (x.method.as_str(), x.path.as_str()),
        ("POST", "/v1/responses")
    );
    let e = import(ImportKind::Sse, "data: {\"x\":1}\n\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "x: cannot tell which provider format this stream is (pass --format)"
    );
    let r = import_bytes(
        ImportKind::Sse,
        b"data: {\"x\":1}\n\n",
        "x",
        Some(StreamFormat::Gemini),
        &Scrubber::default(),
    )
    .unwrap();
    assert_eq!(r.header().format, Some(StreamFormat::Gemini));
    let e = import_bytes(
        ImportKind::Sse,
        b"data: \xff\n\n",
        "x",
        None,
        &Scrubber::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Encoding);
}

const VCR: &str = "interactions:
- request:
    headers:
      authorization:
      - Bearer sk-ant-api03-NOTREALbutSHAPED01234
      host:
      - api.anthropic.com
    method: POST
    parsed_body:
      model: m
    uri: https://api.anthropic.com/v1/messages
  response:
    body:
      string: '{\"ok\": true}'
    headers:
      content-type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
";

#[test]
fn vcrpy_imports_are_scrubbed_and_refuse_what_they_cannot_keep() {
    let r = import(ImportKind::VcrYaml, VCR).unwrap();
    let text = r.to_jsonl();
    assert!(!text.contains("NOTREAL"), "{text}");
    assert!(
        text.contains(r#"["authorization","Bearer [scrubbed]"]"#),
        "{text}"
    );
    let cases = [
        (
            VCR.replace("version: 1", "version: 2"),
            "x: `version`: vcrpy cassette version 2 (this import reads version 1)",
        ),
        (
            VCR.replace("    method: POST", "    method: POST\n    extra: 1"),
            "x: `interactions[0].request.extra`: unknown key",
        ),
        (
            VCR.replace("message: OK", "message: Fine"),
            "x: `interactions[0].response.status.message`: reason \"Fine\" is not the standard one for 200 (OK)",
        ),
        (
            VCR.replace("string: '{\"ok\": true}'", "string: !!binary aGk="),
            "x:14: tag !!binary is not accepted",
        ),
        (
            VCR.replace("      model: m", "      model: &a m\n      other: *a"),
            "x:10: anchors are not accepted",
        ),
        (
            "!!python/object/apply:os.system [\"true\"]".to_string(),
            "x:1: tag !!python/object/apply:os.system is not accepted",
        ),
        ("interactions: [".to_string(), "x:2: not YAML"),
    ];
    for (text, want) in cases {
        let e = import(ImportKind::VcrYaml, &text).unwrap_err();
        assert!(e.to_string().starts_with(want), "want {want}\n got {e}");
    }
    // A billion-laughs document is refused at its first anchor, never expanded.
    let bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n";
    assert!(
        import(ImportKind::VcrYaml, bomb)
            .unwrap_err()
            .to_string()
            .contains("anchors are not accepted")
    );
    // The size bound.
    let big = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("big.cassette.yaml");
    std::fs::write(
        &big,
        vec![b'#'; (loopsim::cassette::MAX_IMPORT_BYTES + 1) as usize],
    )
    .unwrap();
    let e = import_file(&big, None, &Scrubber::default()).unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Size);
    assert!(
        e.to_string().contains("is over the 33554432-byte bound"),
        "{e}"
    );
    let e = import_file(Path::new("notes.txt"), None, &Scrubber::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("notes.txt: unknown kind of recording"),
        "{e}"
    );
}

#[test]
fn letta_e2e_imports_refuse_what_they_cannot_keep() {
    let line =
        std::fs::read_to_string(captures().join("letta_e2e/a_fresh_unrestricted.exchanges.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        f(&mut v);
        format!("{v}\n")
    };
    let cases: Vec<(String, &str)> = vec![
        (
            edit(&|v| v["colour"] = "red".into()),
            "x:1: key `colour`: unknown key; it cannot be kept",
        ),
        (
            edit(&|v| v["reason"] = "Fine".into()),
            "x:1: `reason`: reason \"Fine\" is not the standard one for 200 (OK)",
        ),
        (
            edit(&|v| v["body_end"] = "reset".into()),
            "x:1: key `body_end`: Some(\"reset\"): only \"eof\"",
        ),
        (
            edit(&|v| v["sse_trailing"] = "data: x".into()),
            "x:1: key `sse_trailing`: bytes after the last complete frame cannot be kept",
        ),
        (
            edit(&|v| v["synthesized"] = true.into()),
            "x:1: key `synthesized`: an answer the recording proxy made up",
        ),
        (
            format!("{line}\n{line}\n"),
            "x:2: key `seq`: 1 after 1 (records are numbered in arrival order)",
        ),
        (
            edit(&|v| v["t_start"] = "yesterday".into()),
            "x:1: key `t_start`: expected an ISO-8601 time",
        ),
        ("not json\n".into(), "x:1: not JSON"),
    ];
    for (text, want) in cases {
        let e = import(ImportKind::LettaE2e, &text).unwrap_err();
        assert!(e.to_string().starts_with(want), "want {want}\n got {e}");
    }
}
