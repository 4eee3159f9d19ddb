//! `sim report merge`: the shard reports of one sweep as one.

use loopsim::harness::sweep::merge_report_files;

use super::{CmdResult, check_output, write_file};
use crate::args::{Format, MergeArgs};

pub fn merge(a: MergeArgs) -> CmdResult {
    if let Some(f) = &a.out {
        check_output(f)?;
    }
    let merged = merge_report_files(&a.reports)?;
    let json = || serde_json::to_string_pretty(&merged).expect("report serialises");
    match a.format {
        Format::Text => print!("{}", merged.render()),
        Format::Json => println!("{}", json()),
    }
    if let Some(f) = a.out {
        write_file(&f, &json())?;
    }
    Ok(merged.exit_code())
}
