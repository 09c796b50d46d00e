//! The generated reference pages are what the code and the manifests say
//! now: `docs/cli.md` from clap's definitions (every command, flag and
//! default), `docs/action.md` from `action.yml` and `promote/action.yml`
//! (every input and output), `docs/exit-codes.md` from
//! `error::EXIT_CODES`. A flag, input or exit code added without
//! regenerating them fails here, naming the first line that differs.
//!
//! Regenerate all three:
//! `SETTINGS_IMAGE_WRITE_REFERENCE=1 cargo test --test integration -- reference::`
//! (then review the diff and commit it).

use crate::common;

use std::fmt::Write as _;

use clap::CommandFactory;
use serde_yaml_ng::Value;

/// Compares `generated` with the file `rel` (see [`common::golden`]).
fn check(rel: &str, generated: &str) {
    common::golden(
        rel,
        generated,
        "cargo nextest run --test integration -E 'test(/^reference::/)'",
    );
}

/// The exit-code table `settings-image --help` ends with, as printed
/// (from `Exit codes:` to its end), and its rows: (code, meaning).
fn help_exit_codes() -> (String, Vec<(String, String)>) {
    let help = common::cmd::TestCommand::new().arg("--help").ok();
    let at = help
        .find("Exit codes:\n")
        .unwrap_or_else(|| panic!("--help does not end with the exit codes:\n{help}"));
    let block = help[at..].trim_end().to_string();
    let rows: Vec<(String, String)> = block
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let (code, meaning) = l.trim_start().split_once(' ').expect("CODE MEANING");
            (code.to_string(), meaning.trim().to_string())
        })
        .collect();
    assert!(rows.len() > 10 && rows[0].0 == "0", "{block}");
    (block, rows)
}

/// A header saying where the page comes from and how to regenerate it.
fn generated_from(what: &str) -> String {
    format!(
        "<!-- Generated from {what} by tests/reference.rs: do not edit; regenerate with\n     \
         {}=1 cargo test --test integration -- reference:: -->\n",
        common::WRITE_GOLDEN
    )
}

#[test]
fn the_cli_reference_is_what_clap_defines() {
    let options = clap_markdown::MarkdownOptions::new()
        .title("Command-line reference".to_string())
        .show_footer(false)
        .show_table_of_contents(true);
    let body = clap_markdown::help_markdown_custom::<settings_image::cli::Cli>(&options);
    // The exit codes `--help` ends with have a page of their own.
    let (help_end, _) = help_exit_codes();
    assert!(
        body.contains(&help_end),
        "the top-level help no longer ends with the exit codes"
    );
    let body = body
        .replace(&help_end, "Exit codes: [exit-codes.md](exit-codes.md).")
        .replace(
            "This document contains the help content for the `settings-image` command-line program.",
            "Every command and flag of `settings-image`, as `settings-image COMMAND --help` prints \
             them. The words: [concepts.md](concepts.md).",
        );
    let page = format!(
        "{}\n{}",
        generated_from(
            "the clap definitions in src/cli/args.rs, src/cli/cluster.rs and src/controller/mod.rs"
        ),
        body.trim_start()
    );
    // Sanity of the generator, not of the file: every visible command and
    // every flag of `push` is in the page.
    let cli = settings_image::cli::Cli::command();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        assert!(
            page.contains(&format!("settings-image {}", sub.get_name())),
            "{} missing",
            sub.get_name()
        );
    }
    let push = cli.find_subcommand("push").expect("push");
    for arg in push.get_arguments().filter(|a| !a.is_hide_set()) {
        if let Some(long) = arg.get_long() {
            assert!(page.contains(&format!("--{long}")), "--{long} missing");
        }
    }
    check("docs/cli.md", &page);
}

/// A table cell: one line, `|` escaped, and `<`, `>` as entities (a
/// `<branch>` would be an HTML tag, shown as nothing).
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The inputs and outputs tables of the action manifest `rel`.
fn action_tables(out: &mut String, rel: &str, uses: &str) {
    let text = std::fs::read_to_string(common::repo().join(rel)).expect("the manifest");
    let m: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    let name = m["name"].as_str().expect("name");
    writeln!(out, "## {name} (`{rel}`)\n").unwrap();
    writeln!(
        out,
        "`uses: {uses}`. {}\n",
        cell(m["description"].as_str().unwrap_or(""))
    )
    .unwrap();
    writeln!(out, "### Inputs\n").unwrap();
    writeln!(out, "| input | required | default | description |").unwrap();
    writeln!(out, "|---|---|---|---|").unwrap();
    for (k, v) in m["inputs"].as_mapping().expect("inputs") {
        let k = k.as_str().expect("an input name");
        let required = if v["required"].as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        };
        let default = match &v["default"] {
            Value::Null => String::new(),
            Value::String(s) if s.is_empty() => "`\"\"`".into(),
            Value::String(s) => format!("`{}`", cell(s)),
            other => format!(
                "`{}`",
                cell(serde_yaml_ng::to_string(other).unwrap().trim())
            ),
        };
        let mut description = cell(v["description"].as_str().unwrap_or(""));
        if let Some(dep) = v["deprecationMessage"].as_str() {
            description = format!("**Deprecated**: {}. {description}", cell(dep));
        }
        writeln!(out, "| `{k}` | {required} | {default} | {description} |").unwrap();
    }
    writeln!(out, "\n### Outputs\n").unwrap();
    writeln!(out, "| output | description |").unwrap();
    writeln!(out, "|---|---|").unwrap();
    for (k, v) in m["outputs"].as_mapping().expect("outputs") {
        let k = k.as_str().expect("an output name");
        writeln!(
            out,
            "| `{k}` | {} |",
            cell(v["description"].as_str().unwrap_or(""))
        )
        .unwrap();
    }
    out.push('\n');
}

#[test]
fn the_action_reference_is_what_the_manifests_declare() {
    let mut page = generated_from("action.yml and promote/action.yml");
    page.push_str(
        "\n# The GitHub actions: inputs and outputs\n\n\
         Every input and output of the two actions, as their manifests declare them. How to use\n\
         them: [github-actions.md](github-actions.md) (publish), [release-management.md](release-management.md)\n\
         (promote), [flux.md](flux.md#7-proving-what-the-cluster-runs-verify) (`mode: verify`).\n\n",
    );
    action_tables(&mut page, "action.yml", "ConfigButler/settings-image@v0");
    action_tables(
        &mut page,
        "promote/action.yml",
        "ConfigButler/settings-image/promote@v0",
    );
    let page = format!("{}\n", page.trim_end());
    // Every input of both manifests has its row.
    for rel in ["action.yml", "promote/action.yml"] {
        let m: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(common::repo().join(rel)).unwrap())
                .unwrap();
        for k in m["inputs"].as_mapping().unwrap().keys() {
            assert!(page.contains(&format!("| `{}` |", k.as_str().unwrap())));
        }
    }
    check("docs/action.md", &page);
}

#[test]
fn the_exit_code_reference_is_the_codes_table() {
    let mut page = generated_from("EXIT_CODES in src/error.rs");
    page.push_str(
        "\n# Exit codes\n\n\
         Every command of `settings-image` (and the actions, whose step fails with the same\n\
         code) exits with one of these; `settings-image --help` ends with the same table. What\n\
         to do about each: [troubleshooting.md](troubleshooting.md).\n\n\
         | code | meaning |\n|---|---|\n",
    );
    // The table `--help` ends with (src/error.rs's EXIT_CODES), as the
    // binary prints it.
    for (code, meaning) in help_exit_codes().1 {
        writeln!(page, "| {code} | {} |", cell(&meaning)).unwrap();
    }
    check("docs/exit-codes.md", &page);
}

/// The troubleshooting page has a section for every exit code but 0, so
/// an exit code a user meets always leads somewhere.
#[test]
fn troubleshooting_has_a_section_per_exit_code() {
    let page = std::fs::read_to_string(common::repo().join("docs/troubleshooting.md"))
        .expect("docs/troubleshooting.md");
    for (code, _) in help_exit_codes().1.iter().skip(1) {
        assert!(
            page.lines()
                .any(|l| l.starts_with("### ") && l.contains(&format!("Exit {code}"))),
            "docs/troubleshooting.md has no `### Exit {code}` section"
        );
    }
}

/// The troubleshooting page has a section for every reason the controller
/// sets on `Ready=False`, read from the reconciler's source (its `stalled`
/// and `failed` steps, its error classes, its waits and the refused
/// status), so a new reason without its entry fails here.
#[test]
fn troubleshooting_has_a_section_per_failure_reason() {
    let re = regex::Regex::new(
        r#"(?:stalled|failed)\(\s*"([A-Z]\w+)"|\("([A-Z]\w+)",\s*(?:true|false)\)|reason:\s*"([A-Z]\w+)"|(?:true|false),\s*"([A-Z]\w+)","#,
    )
    .unwrap();
    let mut reasons = std::collections::BTreeSet::new();
    for rel in [
        "src/controller/reconcile/step.rs",
        "src/controller/reconcile/observe.rs",
        "src/controller/status.rs",
        "src/controller/rollout/mod.rs",
    ] {
        let text = std::fs::read_to_string(common::repo().join(rel)).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for c in re.captures_iter(code) {
            let name = (1..=4).find_map(|i| c.get(i)).unwrap().as_str();
            // A SettingsRollout's Ready=True reason (rollout/mod.rs
            // writes its Outcome with `reason:` like its failures).
            if name != "Recorded" {
                reasons.insert(name.to_string());
            }
        }
    }
    assert!(
        reasons.len() > 20,
        "{reasons:?}: the pattern no longer matches the reconciler"
    );
    let page = std::fs::read_to_string(common::repo().join("docs/troubleshooting.md")).unwrap();
    let headings: Vec<&str> = page.lines().filter(|l| l.starts_with("### ")).collect();
    let missing: Vec<&String> = reasons
        .iter()
        .filter(|r| {
            !headings
                .iter()
                .any(|h| h[4..].split([',', ' ']).any(|w| w == r.as_str()))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/troubleshooting.md has no `### ` section naming {missing:?}"
    );
}

/// The anchors GitHub gives the headings of a Markdown text: lower case,
/// punctuation dropped, spaces as hyphens, `-1`, `-2` for repeats.
fn anchors(text: &str) -> std::collections::BTreeSet<String> {
    let fence = regex::Regex::new(r"(?s)```.*?```").unwrap();
    let heading = regex::Regex::new(r"(?m)^#{1,6} (.*)$").unwrap();
    let drop = regex::Regex::new(r"[^\w\- ]").unwrap();
    let text = fence.replace_all(text, "");
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut out = std::collections::BTreeSet::new();
    for c in heading.captures_iter(&text) {
        let base = drop
            .replace_all(&c[1].trim().to_lowercase(), "")
            .replace(' ', "-");
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every relative link of the README, CONTRIBUTING.md and docs/ names a
/// file that exists and, with `#...`, a heading it has: a guide renamed
/// or a section moved by one page breaks no other page silently.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = common::repo();
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let fence = regex::Regex::new(r"(?s)```.*?```").unwrap();
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let prose = fence.replace_all(&text, "");
        for c in link.captures_iter(&prose) {
            let l = &c[1];
            if l.starts_with("http://") || l.starts_with("https://") || l.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = l.split_once('#').unwrap_or((l, ""));
            let target = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            let name = f.strip_prefix(&root).unwrap().display().to_string();
            if !target.exists() {
                broken.push(format!("{name}: {l} (no such file)"));
            } else if !anchor.is_empty()
                && target.extension().is_some_and(|x| x == "md")
                && !anchors(&std::fs::read_to_string(&target).unwrap()).contains(anchor)
            {
                broken.push(format!("{name}: {l} (no such heading)"));
            }
        }
    }
    assert!(checked > 100, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
