//! Prints, for each folder given, the commit that last changed it (one walk
//! for all of them), as `FOLDER COMMIT COMMITTER-TIME`, or `FOLDER -
//! REASON` when the walk has no answer. Used by `scripts/bench-history.sh`.
//!
//! usage: last-changes REPOSITORY-ROOT FOLDER...

use std::path::PathBuf;
use std::process::ExitCode;

use settings_image::history::git::{Repo, Walk};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next().map(PathBuf::from) else {
        eprintln!("usage: last-changes REPOSITORY-ROOT FOLDER...");
        return ExitCode::from(2);
    };
    let folders: Vec<String> = args.collect();
    let repo = match Repo::discover(&root) {
        Ok(Some(repo)) => repo,
        Ok(None) => {
            eprintln!("{} is not in a git repository", root.display());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let names: Vec<&str> = folders.iter().map(String::as_str).collect();
    let walks = match repo.last_changes(&names, None) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (folder, walk) in folders.iter().zip(walks) {
        match walk {
            Walk::Found(c) => println!("{folder} {} {}", c.id, c.timestamp),
            Walk::NotInHead => println!("{folder} - not in HEAD"),
            Walk::Boundary { boundary, .. } => {
                println!("{folder} - history ends at {boundary}")
            }
        }
    }
    ExitCode::SUCCESS
}
