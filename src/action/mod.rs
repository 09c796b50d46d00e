//! The GitHub container action front end: `INPUT_*` in, `$GITHUB_OUTPUT`
//! and `$GITHUB_STEP_SUMMARY` out. The only module that knows the runner.

pub mod commands;
pub mod debug;
pub mod fields;
pub mod inputs;
pub mod login;
pub mod promote;
pub mod publish;
pub mod summary;
pub mod verify;

/// What `settings-image action` does (its optional positional argument).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Build the settings image and push it (the default; action.yml).
    #[default]
    Publish,
    /// Promote the newest candidate into a channel (promote/action.yml).
    Promote,
    /// Verify every reference in a cluster repository (action.yml with
    /// the input `mode: verify`).
    Verify,
}

/// Runs the action in `mode` with the process environment; returns the exit
/// code. Errors are reported as `::error` workflow commands, not returned.
pub fn run(mode: Mode) -> i32 {
    // A bug must still fail the step with an annotation, not only a trace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // `say` ignores a closed stdout: a panic inside the hook aborts.
        commands::say(&commands::error(
            "settings-image: internal error",
            &format!(
                "{info}\nhint: this is a bug in settings-image; please report it with this message"
            ),
        ));
        default_hook(info);
    }));
    let env: inputs::Env = std::env::vars().collect();
    match mode {
        Mode::Publish => match env
            .get(&inputs::input_key("mode"))
            .map(|m| m.trim())
            .filter(|m| !m.is_empty())
        {
            None | Some("publish") => run_publish(&env),
            Some("verify") => verify::run(&env),
            Some(other) => {
                let err = crate::Error::input(
                    format!("the input `mode` is {other:?}"),
                    Some("use `publish` (the default) or `verify`".to_string()),
                );
                commands::say(&commands::error_line(
                    "settings-image",
                    &err,
                    fields::Inputs::Publish,
                ));
                err.exit_code()
            }
        },
        Mode::Verify => verify::run(&env),
        Mode::Promote => promote::run(&env),
    }
}

/// The runner starts a container action in the workspace
/// (`GITHUB_WORKSPACE`); a `run:` step with a `working-directory` may not.
/// The folders of `path` are relative to the workspace, as the checks of
/// the inputs take them: the publish runs there.
fn enter_workspace(env: &inputs::Env) -> crate::Result<()> {
    let ws = inputs::workspace(env)?;
    std::env::set_current_dir(&ws)
        .map_err(|e| crate::Error::io(format!("entering the workspace {}", ws.display()), e))
}

/// The publish mode (publish.rs: one folder, several, or the plan), run
/// in the workspace; returns the exit code.
fn run_publish(env: &inputs::Env) -> i32 {
    for line in commands::mask_lines(env, &login::SECRET_INPUTS) {
        commands::say(&line);
    }
    debug::init(env.get("RUNNER_DEBUG").map(String::as_str));
    let result = enter_workspace(env).and_then(|()| publish::publish(env));
    match result {
        Ok(()) => 0,
        Err(err) => {
            commands::say(&commands::error_line(
                publish::WHO,
                &err,
                fields::Inputs::Publish,
            ));
            err.exit_code()
        }
    }
}
