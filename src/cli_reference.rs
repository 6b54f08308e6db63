//! `docs/reference/cli.md`: the command-line reference, rendered from the
//! clap definitions (`Cli::command()`), and the test that keeps the
//! committed file equal to it.
//!
//! Takes the built clap [`Command`] tree; gives markdown with one section
//! per visible (sub)command: its description, its usage line, its
//! arguments and options with their help, defaults and possible values.
//! Hidden commands and arguments, clap's `help` subcommands, `--help` and
//! `--version` are left out.
//! Deterministic: the text does not depend on the terminal (clap's help is
//! not wrapped here, and styles are dropped).

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};

/// Where the rendered reference is committed, relative to the workspace root.
pub const PATH: &str = "docs/reference/cli.md";

/// The command that rewrites [`PATH`] from the clap definitions.
pub const REGENERATE: &str =
    "TOFU_UPDATE_CLI_REFERENCE=1 cargo test -p tofu --bin tofu cli_reference";

/// The whole reference for `cmd` (the root command, `tofu`), as markdown.
pub fn render(mut cmd: Command) -> String {
    cmd.build();
    let mut out = String::new();
    out.push_str("# Command-line reference\n\n");
    let _ = writeln!(
        out,
        "<!-- Generated from the clap definitions by `src/cli_reference.rs`; do not edit.\n     \
         Regenerate: `{REGENERATE}`. -->\n"
    );
    out.push_str(
        "Every `tofu` command and option, as `tofu <command> --help` prints them. \
         Worked examples are in the [guide](../guide/README.md).\n",
    );
    section(&mut out, &cmd);
    out
}

/// One command's section, then its subcommands' sections, depth first.
fn section(out: &mut String, cmd: &Command) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let _ = writeln!(out, "\n## `{name}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim_end());
    }
    let usage = cmd.clone().render_usage().to_string();
    let _ = writeln!(out, "```text\n{}\n```", usage.trim_end());
    // clap adds a `help` subcommand to every command that has subcommands.
    let visible: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .collect();
    if !visible.is_empty() {
        out.push_str("\n**Commands:**\n\n");
        for sub in &visible {
            let full = sub.get_bin_name().unwrap_or(sub.get_name());
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(out, "* [`{full}`](#{}): {about}", anchor(full));
        }
    }
    let args: Vec<&Arg> = cmd.get_arguments().filter(|a| shown(a)).collect();
    let (positional, options): (Vec<&Arg>, Vec<&Arg>) =
        args.into_iter().partition(|a| a.is_positional());
    arg_list(out, "Arguments", &positional);
    arg_list(out, "Options", &options);
    for sub in visible {
        section(out, sub);
    }
}

/// Whether an argument appears in the reference.
fn shown(a: &Arg) -> bool {
    !a.is_hide_set()
        && !matches!(
            a.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
}

/// A bulleted list of arguments under a bold title (nothing when empty).
fn arg_list(out: &mut String, title: &str, args: &[&Arg]) {
    if args.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n**{title}:**\n");
    for a in args {
        let help = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
        let mut line = format!("* `{}`", signature(a));
        if let Some(h) = help {
            // Paragraphs of a long help stay one list item.
            let h = h.trim_end().replace("\n\n", "\n\n  ").replace('\n', "\n  ");
            let _ = write!(line, ": {h}");
        }
        let _ = writeln!(out, "{}{}", line, facts(a));
    }
}

/// `-k, --workers <WORKERS>` or `<FILE>...`, as clap's help writes it.
fn signature(a: &Arg) -> String {
    let values = value_names(a);
    if a.is_positional() {
        return values;
    }
    let mut s = String::new();
    if let Some(c) = a.get_short() {
        let _ = write!(s, "-{c}");
        if a.get_long().is_some() {
            s.push_str(", ");
        }
    }
    if let Some(l) = a.get_long() {
        let _ = write!(s, "--{l}");
    }
    if a.get_action().takes_values() {
        let _ = write!(s, " {values}");
    }
    s
}

/// `<NAME>`, one per value name; `...` when the argument repeats.
fn value_names(a: &Arg) -> String {
    let names: Vec<String> = match a.get_value_names() {
        Some(n) => n.iter().map(|n| format!("<{n}>")).collect(),
        None => vec![format!("<{}>", a.get_id().as_str().to_uppercase())],
    };
    let mut s = names.join(" ");
    let many = a.get_num_args().is_some_and(|r| r.max_values() > 1);
    if a.is_positional() && (many || matches!(a.get_action(), ArgAction::Append)) {
        s.push_str("...");
    }
    s
}

/// ` (required; default: `x`; values: `a`, `b`)` or nothing.
fn facts(a: &Arg) -> String {
    let mut facts = Vec::new();
    if a.is_required_set() {
        facts.push("required".to_string());
    }
    if a.get_action().takes_values() {
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| format!("`{}`", d.to_string_lossy()))
            .collect();
        if !defaults.is_empty() {
            facts.push(format!("default: {}", defaults.join(", ")));
        }
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() {
            facts.push(format!("values: {}", values.join(", ")));
        }
    }
    if facts.is_empty() {
        String::new()
    } else {
        format!(" ({})", facts.join("; "))
    }
}

/// GitHub's heading anchor of `` `tofu ssp mf` ``: `tofu-ssp-mf`.
fn anchor(name: &str) -> String {
    name.to_lowercase().replace(' ', "-")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::CommandFactory;

    use super::{render, PATH, REGENERATE};
    use crate::Cli;

    fn rendered() -> String {
        render(Cli::command())
    }

    /// The committed reference equals the CLI's; `TOFU_UPDATE_CLI_REFERENCE=1`
    /// rewrites it.
    #[test]
    fn cli_reference_matches_the_committed_file() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(PATH);
        let want = rendered();
        if std::env::var_os("TOFU_UPDATE_CLI_REFERENCE").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let line = have
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
            panic!(
                "{PATH} differs from the CLI's clap definitions (first at line {}: committed {:?}, \
                 CLI {:?}). Regenerate it with `{REGENERATE}` and commit it.",
                line + 1,
                have.lines().nth(line).unwrap_or("<end of file>"),
                want.lines().nth(line).unwrap_or("<end of file>"),
            );
        }
    }

    /// Every visible command has a section, hidden ones none; the text has
    /// no terminal styling.
    #[test]
    fn cli_reference_has_every_visible_command_and_no_hidden_one() {
        let text = rendered();
        for cmd in Cli::command().get_subcommands() {
            let heading = format!("\n## `tofu {}`\n", cmd.get_name());
            assert_eq!(
                text.contains(&heading),
                !cmd.is_hide_set(),
                "{heading:?} in the reference"
            );
        }
        assert!(text.contains("\n## `tofu ssp mlp`\n"));
        assert!(text.contains("* `-k, --workers <WORKERS>`"));
        assert!(!text.contains("## `tofu help`"), "clap's help subcommand");
        assert!(!text.contains('\u{1b}'), "no ANSI escapes");
    }

    /// `tofu run --help` names the program format version codegen writes.
    #[test]
    fn run_help_names_the_program_format_version() {
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").expect("a run command");
        let arg = run
            .get_arguments()
            .find(|a| a.get_long() == Some("save-programs"))
            .expect("--save-programs");
        let help = arg.get_long_help().or(arg.get_help()).unwrap().to_string();
        let version = format!("version {}", codegen::program::VERSION);
        assert!(help.contains(&version), "{help:?} lacks {version:?}");
    }
}
