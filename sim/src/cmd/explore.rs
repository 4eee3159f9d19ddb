//! `sim explore`: a sweep with a progress bar and its rate, the JSON report when asked, and the
//! shrinking of the first failure of each invariant with `--shrink`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use loopsim::harness::explore::ExploreReport;
use loopsim::harness::html;
use loopsim::harness::realclient::{self, RealClientOptions};
use loopsim::harness::scenario::{InputError, Retune};
use loopsim::harness::seed::run_planned;

use loopsim::harness::explore::ExploreOptions;
use loopsim::harness::sweep::{load_files, shrink_first_failures};

use super::{CmdResult, check_output, check_output_dir, write_file};
use crate::args::{ExploreArgs, Format};
use crate::isolate;
use crate::progress::Bar;

pub fn run(a: ExploreArgs) -> CmdResult {
    if a.real_client.is_some() {
        return real_client(a);
    }
    for file in a.out.iter().chain(&a.html) {
        check_output(file)?;
    }
    loopsim::harness::warp::set_warp_by_default(!a.no_warp);
    if let Some(dir) = &a.shrink {
        check_output_dir(dir)?;
    }
    let options = ExploreOptions {
        seeds: a.seeds.clone(),
        jobs: a.jobs,
        shard: a.shard,
        swarm: a.swarm,
        determinism_every: a.determinism_every,
        guided: a.guided,
    };
    let retune = retune(&a);
    let scenarios = load_files(&a.scenarios, &retune)?;
    if a.worker {
        return Ok(isolate::worker(&scenarios, &options, a.echo_panics));
    }
    let started = Instant::now();
    let bar = Bar::new("explore");
    // Seeds run in a child process, so that one whose panic aborts cannot end the sweep.
    let report = isolate::explore(&(&a).into(), &scenarios, &options, &|done, total| {
        bar.update(done, total)
    })?;
    bar.finish();
    let wall = started.elapsed().as_secs_f64();
    let json = || serde_json::to_string_pretty(&report).expect("report serialises");
    match a.format {
        Format::Text => {
            print!("{}", report.render());
            println!(
                "rate      {:.1} seeds/s over {} job(s) ({wall:.2} s wall)",
                report.runs as f64 / wall.max(1e-9),
                options.jobs.max(1)
            );
        }
        Format::Json => println!("{}", json()),
    }
    if let Some(file) = a.out {
        write_file(&file, &json())?;
        eprintln!("report written to {}", file.display());
    }
    if let Some(file) = &a.html {
        let pages = match &a.html_dir {
            Some(dir) => write_run_pages(&report, dir, file, &retune)?,
            None => BTreeMap::new(),
        };
        let rate = html::Rate {
            seeds_per_s: report.runs as f64 / wall.max(1e-9),
            jobs: options.jobs.max(1),
            wall_s: wall,
        };
        write_file(file, &html::sweep_page(&report, &pages, Some(&rate)))?;
        eprintln!("html report written to {}", file.display());
    }
    if let Some(dir) = a.shrink {
        shrink_first_failures(&report, &retune, &dir, &mut |s| eprint!("{}", s.render()))?;
    }
    Ok(report.exit_code())
}

/// Failing seeds whose run report a sweep page links to, at most this many.
const RUN_PAGES: usize = 100;

/// Reruns the first failing seeds and writes each run's page into `dir`; returns the links,
/// relative to the sweep page `page` when `dir` is beside it or under it.
fn write_run_pages(
    report: &ExploreReport,
    dir: &Path,
    page: &Path,
    retune: &Retune,
) -> Result<BTreeMap<(String, u64), String>, InputError> {
    std::fs::create_dir_all(dir).map_err(|e| InputError {
        file: dir.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot create the --html-dir directory: {e}"),
    })?;
    let base = page.parent().unwrap_or(Path::new(""));
    let mut links = BTreeMap::new();
    for f in report.failures.iter().take(RUN_PAGES) {
        let run = run_planned(
            Path::new(&f.scenario),
            f.seed,
            report.swarm,
            &f.faults,
            retune,
            1,
        )?;
        let stem = Path::new(&f.scenario)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        let file = dir.join(format!("{stem}-seed{}.html", f.seed));
        write_file(&file, &html::run_page(&run))?;
        let link = file.strip_prefix(base).unwrap_or(&file);
        links.insert(
            (f.scenario.clone(), f.seed),
            link.display().to_string().replace('\\', "/"),
        );
    }
    Ok(links)
}

/// The network settings the command line overrides.
fn retune(a: &ExploreArgs) -> Retune {
    Retune {
        tick_ms: a.tick_ms,
        latency_scale: a.latency_scale,
        client_profile: a.client_profile.map(|p| p.name()),
        start: None,
    }
}

/// `--real-client CMD`: the sweep of a real client (docs/real-client.md). One line per run on
/// stderr as runs finish, the report on stdout, the JSON report with `--out`.
fn real_client(a: ExploreArgs) -> CmdResult {
    if let Some(file) = &a.out {
        check_output(file)?;
    }
    let scenarios = load_files(&a.scenarios, &retune(&a))?;
    let root = std::env::current_dir().map_err(|e| InputError {
        file: ".".into(),
        line: None,
        column: None,
        message: format!("cannot read the current directory: {e}"),
    })?;
    let options = RealClientOptions {
        command: a.real_client.clone().unwrap_or_default(),
        seeds: a.seeds.clone(),
        jobs: a.jobs,
        run_timeout_ms: a.run_timeout_ms,
        reruns: a.reruns,
        dir: root.join(&a.real_client_dir),
        root,
        keep: a.keep_runs,
    };
    let started = Instant::now();
    let report = realclient::explore(&scenarios, &options, &|done, total, what| {
        eprintln!(
            "real-client {done}/{total} {what} ({:.0} s)",
            started.elapsed().as_secs_f64()
        )
    })?;
    let wall = started.elapsed().as_secs_f64();
    match a.format {
        Format::Text => {
            print!("{}", report.render());
            let reruns: u32 = report.failures.iter().map(|f| f.reruns).sum();
            println!(
                "rate      {:.1} runs/min over {} job(s) ({} runs + {reruns} reruns in {wall:.0} s wall)",
                (report.runs.len() as f64 + f64::from(reruns)) * 60.0 / wall.max(1e-9),
                options.jobs.max(1),
                report.runs.len()
            );
        }
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        ),
    }
    if let Some(file) = a.out {
        write_file(
            &file,
            &serde_json::to_string_pretty(&report).expect("report serialises"),
        )?;
        eprintln!("report written to {}", file.display());
    }
    Ok(report.exit_code())
}
