//! `sim import`: other tools' recordings as version 2 cassettes (loopsim::cassette::import).

use std::collections::BTreeMap;
use std::path::PathBuf;

use loopsim::cassette::import_file;
use loopsim::cassette::scrub::Scrubber;
use loopsim::harness::report::exit;
use loopsim::harness::scenario::InputError;
use loopsim::wire::provider::StreamFormat;
use serde_json::json;

/// Turn recordings into version 2 cassettes (docs/cassette.md), one per file, scrubbed.
///
/// Reads raw SSE bodies (`*.sse`), vcrpy / pytest-recording YAML cassettes (`*.yaml`, `*.yml`;
/// parsed safely: no tags, no anchors or aliases, bounded size and depth) and Letta end-to-end
/// recordings (`*.exchanges.jsonl`). Writes DIR/<name>.jsonl for each and prints one JSON line
/// per file. What a cassette cannot represent is an error naming the file, line and key.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The files to import.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where the cassettes are written (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The provider stream format, when the file's paths and frames do not tell (raw SSE of an
    /// unrecognised stream): anthropic, openai_chat, openai_responses or gemini.
    #[arg(long, value_name = "NAME")]
    pub format: Option<String>,
    /// Another header whose value is scrubbed. Repeatable.
    #[arg(long, value_name = "NAME")]
    pub scrub_header: Vec<String>,
    /// A JSON path whose value is scrubbed in every JSON body and SSE data. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub scrub_json_path: Vec<String>,
}

fn usage(flag: &str, message: String) -> InputError {
    InputError {
        file: flag.to_string(),
        line: None,
        column: None,
        message,
    }
}

pub fn run(args: Args) -> Result<i32, InputError> {
    let format = match &args.format {
        None => None,
        Some(name) => Some(StreamFormat::from_name(name).ok_or_else(|| {
            usage(
                "--format",
                format!(
                    "unknown provider format {name:?} (expected {})",
                    StreamFormat::names()
                ),
            )
        })?),
    };
    let scrubber = Scrubber::new(&args.scrub_header, &args.scrub_json_path)
        .map_err(|m| usage("--scrub-json-path", m))?;
    std::fs::create_dir_all(&args.out).map_err(|e| {
        usage(
            &args.out.display().to_string(),
            format!("cannot create: {e}"),
        )
    })?;
    let mut written: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for file in &args.files {
        let (kind, stem, recording) =
            import_file(file, format, &scrubber).map_err(|e| InputError {
                file: e.origin.clone(),
                line: e.line,
                column: None,
                message: e.message.clone(),
            })?;
        let out = args.out.join(format!("{stem}.jsonl"));
        if let Some(first) = written.insert(out.clone(), file.clone()) {
            return Err(usage(
                &file.display().to_string(),
                format!(
                    "would be written to {}, as {} already is: import them into different folders",
                    out.display(),
                    first.display()
                ),
            ));
        }
        recording.save(&out).map_err(|e| InputError {
            file: e.origin.clone(),
            line: e.line,
            column: None,
            message: e.message.clone(),
        })?;
        let frames: usize = recording
            .exchanges()
            .iter()
            .filter_map(|x| match &x.answer()?.body {
                loopsim::cassette::ResponseBody::Sse(f) => Some(f.len()),
                _ => None,
            })
            .sum();
        println!(
            "{}",
            json!({
                "imported": file.display().to_string(),
                "kind": kind.as_str(),
                "cassette": out.display().to_string(),
                "layer": recording.header().layer.as_str(),
                "format": recording.header().format.map(|f| f.as_str()),
                "exchanges": recording.exchanges().len(),
                "sse_frames": frames,
            })
        );
    }
    Ok(exit::PASS)
}
