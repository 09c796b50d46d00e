//! Several settings folders in one run, against a real `docker-registry`
//! on 127.0.0.1 and git as the oracle: globs and repeated `--path`, the
//! `{name}`/`{path}` repository template, one entry per folder, re-run
//! safety per folder (a re-run with one changed folder pushes one image),
//! `plan`'s matrix, and the failure rules (every folder reported, input
//! errors before anything is pushed).

use std::path::Path;

use serde_json::Value;

use crate::common;

use common::cmd::{Run, TestCommand};
use common::git::ScratchRepo;
use common::registry::{Auth, Registry, skopeo_inspect};

fn run(cwd: &Path, args: &[&str]) -> Run {
    let home = tempfile::tempdir().expect("tempdir");
    TestCommand::new()
        .current_dir(cwd)
        .args(args)
        .env("HOME", home.path())
        .run()
}

/// `main-<ct>-<sha7>` of `git log -1 -- DIR`.
fn oracle_tag(r: &ScratchRepo, dir: &str) -> String {
    let line = r.git(&["log", "-1", "--format=%ct %h", "--abbrev=7", "--", dir]);
    let (ct, h) = line.split_once(' ').expect("git log printed a commit");
    format!("main-{ct}-{h}")
}

/// Three settings folders and some code, in two commits.
fn three_folders() -> ScratchRepo {
    let r = ScratchRepo::new();
    for f in ["shop", "billing", "search"] {
        r.write(&format!("configs/{f}/app.yaml"), format!("name: {f}\n"));
    }
    r.write("src/main.rs", "fn main() {}\n");
    r.commit_all("settings", 1_700_000_000);
    r.write("configs/billing/db.yaml", "pool: 4\n");
    r.commit_all("billing db", 1_700_000_100);
    r.write("src/main.rs", "fn main() { }\n");
    r.commit_all("code", 1_700_000_200);
    r
}

fn by_path(images: &Value) -> std::collections::BTreeMap<String, Value> {
    images
        .as_array()
        .expect("an array")
        .iter()
        .map(|i| (i["path"].as_str().expect("path").to_string(), i.clone()))
        .collect()
}

#[test]
fn a_re_run_with_one_changed_folder_pushes_one_image() {
    let reg = Registry::start(Auth::None);
    let r = three_folders();
    let template = format!("{}/settings/{{name}}", reg.host());
    let push = |r: &ScratchRepo| {
        run(
            &r.dir,
            &[
                "push",
                "--path",
                "configs/*",
                "--repository",
                &template,
                "--timestamp-tag",
                "main",
                "--jobs",
                "2",
                "--json",
            ],
        )
    };
    let first = push(&r);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let first = by_path(&first.json());
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        ["configs/billing", "configs/search", "configs/shop"]
    );
    for (path, image) in &first {
        let name = path.trim_start_matches("configs/");
        assert_eq!(image["pushed"], true, "{path}");
        assert_eq!(
            image["tag"],
            oracle_tag(&r, path),
            "{path}: the tag is git's"
        );
        assert_eq!(
            image["repository"],
            format!("{}/settings/{name}", reg.host())
        );
        let reference = image["reference"].as_str().expect("reference");
        let digest = image["digest"].as_str().expect("digest");
        assert!(reference.ends_with(&format!("@{digest}")));
        let seen = skopeo_inspect(
            &format!(
                "{}/settings/{name}:{}",
                reg.host(),
                image["tag"].as_str().unwrap()
            ),
            None,
        )
        .expect("skopeo reads the pushed image");
        assert_eq!(seen["Digest"], *digest, "{path}");
    }

    // The plan: nothing to do.
    let plan_args = [
        "plan",
        "--path",
        "configs/*",
        "--repository",
        &template,
        "--timestamp-tag",
        "main",
        "--json",
    ];
    let plan = run(&r.dir, &plan_args);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert_eq!(plan.json(), serde_json::json!({ "include": [] }));

    // One folder changes.
    r.write("configs/search/app.yaml", "name: search\nreplicas: 3\n");
    r.commit_all("search replicas", 1_700_000_300);
    let plan = run(&r.dir, &plan_args);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert_eq!(
        plan.json(),
        serde_json::json!({ "include": [{
            "path": "configs/search",
            "repository": format!("{}/settings/search", reg.host()),
            "tag": oracle_tag(&r, "configs/search"),
        }]})
    );

    let second = push(&r);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let second = by_path(&second.json());
    let pushed: Vec<&String> = second
        .iter()
        .filter(|(_, i)| i["pushed"] == true)
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        pushed,
        ["configs/search"],
        "only the changed folder is pushed"
    );
    for p in ["configs/billing", "configs/shop"] {
        assert_eq!(second[p]["digest"], first[p]["digest"], "{p}: same image");
        assert_eq!(second[p]["tag"], first[p]["tag"], "{p}: same tag");
    }
    assert_ne!(
        second["configs/search"]["tag"],
        first["configs/search"]["tag"]
    );
    assert_eq!(
        second["configs/search"]["tag"],
        oracle_tag(&r, "configs/search")
    );
}

#[test]
fn input_errors_stop_everything_before_a_push() {
    let reg = Registry::start(Auth::None);
    let r = three_folders();
    let repo_dir = reg.dir.path().join("data/docker/registry/v2/repositories");
    let template = format!("{}/settings/{{name}}", reg.host());
    let upper = format!("invalid repository \"{}/Settings/", reg.host());
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--path",
                "configs/*",
                "--path",
                "configs/shop",
                "--repository",
                &template,
            ],
            "twice",
        ),
        (
            &[
                "--path",
                "configs/*",
                "--repository",
                &format!("{}/settings", reg.host()),
            ],
            "same",
        ),
        (
            &[
                "--path",
                "configs/*",
                "--path",
                "nothing/*",
                "--repository",
                &template,
            ],
            "matches no folder",
        ),
        (
            &[
                "--path",
                "configs/shop",
                "--path",
                "configs/billing",
                "--repository",
                &format!("{}/Settings/{{name}}", reg.host()),
            ],
            &upper,
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["push", "--timestamp-tag", "main"];
        all.extend_from_slice(args);
        let out = run(&r.dir, &all);
        assert_eq!(out.code, 2, "{args:?}: an input error\n{}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: nothing reported as done");
        assert!(!repo_dir.exists(), "{args:?}: nothing pushed");
    }
}

#[test]
fn a_failing_folder_does_not_hide_the_others() {
    let reg = Registry::start(Auth::None);
    let r = three_folders();
    // Not committed: no commit names it.
    r.write("configs/draft/app.yaml", "name: draft\n");
    let out = run(
        &r.dir,
        &[
            "push",
            "--path",
            "configs/*",
            "--repository",
            &format!("{}/settings/{{path}}", reg.host()),
            "--timestamp-tag",
            "main",
            "--json",
        ],
    );
    // The failed folder's input error is the run's: exit 2, naming it.
    assert_eq!(out.code, 2, "a failed folder fails the run: {}", out.stderr);
    assert!(
        out.stderr.contains(
            "error: configs/draft: is not in the HEAD commit (untracked, ignored or deleted)\n\
             hint: commit the folder first, or use --source worktree"
        ),
        "{}",
        out.stderr
    );
    let images = by_path(&out.report());
    assert_eq!(images.len(), 4, "every folder reported");
    let draft = &images["configs/draft"];
    assert!(
        draft["error"]
            .as_str()
            .is_some_and(|e| e.contains("not in the HEAD commit")),
        "{draft}"
    );
    assert!(draft.get("digest").is_none());
    for p in ["configs/billing", "configs/search", "configs/shop"] {
        assert_eq!(images[p]["pushed"], true, "{p}");
        assert_eq!(
            images[p]["repository"],
            format!("{}/settings/{}", reg.host(), p.replace('/', "-"))
        );
    }
    assert!(out.stderr.contains("configs/draft"), "{}", out.stderr);
}

#[test]
fn tag_answers_every_folder_like_git_in_one_run() {
    let r = three_folders();
    let out = run(
        &r.dir,
        &[
            "tag",
            "--path",
            "configs/*",
            "--path",
            "src",
            "--prefix",
            "main",
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows = by_path(&out.json());
    assert_eq!(rows.len(), 4);
    for (p, row) in rows {
        assert_eq!(row["tag"], oracle_tag(&r, &p), "{p}");
        let id = r.git(&["log", "-1", "--format=%H", "--", &p]);
        assert_eq!(row["commit"], id, "{p}");
    }
    // One folder keeps the single-folder output.
    let one = run(
        &r.dir,
        &["tag", "--path", "configs/shop", "--prefix", "main"],
    );
    assert_eq!(one.stdout.trim(), oracle_tag(&r, "configs/shop"));
}
