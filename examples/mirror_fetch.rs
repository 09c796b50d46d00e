//! Fetches a repository into a mirror cache the way the controller does
//! (`history::mirror`), for `scripts/bench-mirror.sh`:
//!
//! ```text
//! cargo run --release --example mirror_fetch -- CACHE_DIR URL BRANCH [FOLDER OUT_LAYOUT]
//! ```
//!
//! With FOLDER and OUT_LAYOUT it also builds the folder at the branch's
//! head into an OCI layout (`request::run_mirror`). Prints one line: what
//! the fetch did.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use settings_image::history::SourceMode;
use settings_image::history::mirror::{Limits, Mirrors, Remote};
use settings_image::pipeline::{RunReport, Spec};
use settings_image::request::{Forward, Request, Target};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 3 && args.len() != 5 {
        eprintln!("usage: mirror_fetch CACHE_DIR URL BRANCH [FOLDER OUT_LAYOUT]");
        std::process::exit(2);
    }
    let run = || -> settings_image::Result<String> {
        let mirrors = Mirrors::new(&args[0], Limits::default())?;
        let remote = Remote::new(&args[1])?;
        let mirror = mirrors.fetch(&remote, &args[2], None, &AtomicBool::new(false))?;
        let mut line = format!("{:?}", mirror.fetched());
        if args.len() == 5 {
            let report = settings_image::pipeline::run(
                &Spec::one(Request {
                    path: PathBuf::from(&args[3]),
                    tags: Vec::new(),
                    target: Target::Layout(PathBuf::from(&args[4])),
                    source: SourceMode::Commit,
                    timestamp_tag: Some(args[2].clone()),
                    github: None,
                    source_url: settings_image::history::SourceUrl::Origin,
                    ci: Default::default(),
                    forward: Forward::default(),
                    provenance: false,
                    revision: None,
                    extra: Default::default(),
                })
                .in_mirror(&mirror),
            )
            .and_then(RunReport::into_report)?;
            line.push_str(&format!(
                " {} {}",
                report.timestamp_tag.unwrap_or_default(),
                report.digest
            ));
        }
        Ok(line)
    };
    match run() {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("hint: {h}");
            }
            std::process::exit(1);
        }
    }
}
