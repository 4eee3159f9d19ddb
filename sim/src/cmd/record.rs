//! `sim record`: the recording reverse proxy (loopsim::harness::record).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use loopsim::cassette::Layer;
use loopsim::cassette::matching::MatchOn;
use loopsim::cassette::scrub::Scrubber;
use loopsim::harness::record::{DEFAULT_MAX_BODY, RecordMode, RecordOptions, interrupted, record};
use loopsim::harness::report::exit;
use loopsim::harness::scenario::InputError;
use loopsim::wire::provider::StreamFormat;

/// Record real traffic through a loopback reverse proxy, as a version 2 cassette.
///
/// Forwards every request to --upstream unchanged and streams every response back as it
/// arrives, writing each exchange (scrubbed) to <out>.partial as it goes; Ctrl-C ends the
/// session, writes the end line and renames the file to --out. Prints one JSON line when it
/// listens and one when it stops. docs/record-replay.md walks through it.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which conversation is recorded: `letta` (a client and a Letta server) or `provider`
    /// (a server, or the CLI's local backend, and an LLM provider).
    #[arg(long, value_parser = ["letta", "provider"])]
    pub layer: String,
    /// The upstream base URL, http://host:port[/base] (plain http).
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// The cassette (version 2, docs/cassette.md).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8384", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// vcrpy's record modes: `once` records when --out does not exist and otherwise only
    /// replays; `new_episodes` replays what --out holds and records the rest; `all` records
    /// everything afresh; `none` only replays, refusing the rest with a 501 that names the
    /// nearest recorded request.
    #[arg(long, default_value = "once", value_parser = RecordMode::NAMES)]
    pub mode: String,
    /// Another header whose value is scrubbed (beyond Authorization, x-api-key, cookies and
    /// every name that looks secret). Repeatable.
    #[arg(long, value_name = "NAME")]
    pub scrub_header: Vec<String>,
    /// A JSON path whose value is scrubbed in every JSON body and SSE data, e.g.
    /// `metadata.user_id` or `messages[*].name`. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub scrub_json_path: Vec<String>,
    /// The provider stream format written in the header (--layer provider): anthropic,
    /// openai_chat, openai_responses or gemini. Without it each stream's format is read from
    /// its path or frames.
    #[arg(long, value_name = "NAME")]
    pub format: Option<String>,
    /// A note written in the header.
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Bound on one request or response body, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY, value_name = "BYTES")]
    pub max_body: usize,
    /// Replaying: a recorded exchange must match the request's canonical body hash too, not
    /// only its method, path and query.
    #[arg(long)]
    pub match_body: bool,
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
    let layer = Layer::from_name(&args.layer)
        .ok_or_else(|| usage("--layer", format!("unknown layer {:?}", args.layer)))?;
    let mode = RecordMode::from_name(&args.mode)
        .ok_or_else(|| usage("--mode", format!("unknown mode {:?}", args.mode)))?;
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
    let mut opts = RecordOptions::new(layer, &args.upstream, args.out);
    opts.listen = args.listen;
    opts.mode = mode;
    opts.scrubber = scrubber;
    opts.format = format;
    opts.note = args.note;
    opts.max_body = args.max_body;
    opts.match_on = if args.match_body {
        MatchOn::MethodPathBody
    } else {
        MatchOn::MethodPath
    };
    let summary = record(
        opts,
        |ready| {
            println!("{ready}");
            let _ = std::io::stdout().flush();
        },
        interrupted(),
    )?;
    println!("{}", summary.to_json());
    Ok(exit::PASS)
}
