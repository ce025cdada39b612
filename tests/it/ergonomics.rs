//! Shell ergonomics of the whole command line: every command's `--help` has
//! an example, mistyped commands get a suggestion, completion scripts and the
//! man page cover every command, colors follow `--color`/NO_COLOR, and sizes
//! follow `--bytes`.
//!
//! The walks over subcommands read the clap definition, so they cover
//! commands added later without edits here.

use crate::util::*;
use clap::CommandFactory;
use fragscope::cli::Cli;
use std::process::Command;

/// Every visible subcommand name (clap's own `help` excluded).
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name().to_string())
        .collect()
}

#[test]
fn every_command_help_has_an_example() {
    fn walk(c: &clap::Command, path: &str, checked: &mut usize) {
        for s in c.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{path} {}", s.get_name());
            let after = s
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                after.contains("fragscope "),
                "`{path} --help` shows no example line (after_help = {after:?})"
            );
            *checked += 1;
            walk(s, &path, checked);
        }
    }
    let mut checked = 0;
    let top = Cli::command();
    assert!(
        top.get_after_help()
            .is_some_and(|h| h.to_string().contains("fragscope ")),
        "`fragscope --help` shows no example line"
    );
    walk(&top, "fragscope", &mut checked);
    assert!(checked >= 9, "only {checked} subcommands found");

    // And the built binary prints them.
    for s in subcommands() {
        let r = run([s.as_str(), "--help"]);
        r.expect_code(0);
        assert!(
            r.stdout().contains(&format!("fragscope {s}")),
            "`fragscope {s} --help` has no `fragscope {s} ...` example:\n{}",
            r.stdout()
        );
    }
}

#[test]
fn mistyped_commands_and_options_get_a_suggestion() {
    let r = run(["stast", "x.pickle"]);
    r.expect_code(2);
    assert!(
        r.stderr()
            .contains("tip: a similar subcommand exists: 'stats'"),
        "{}",
        r.stderr()
    );
    let r = run(["culprit", "x.pickle"]);
    r.expect_code(2);
    assert!(r.stderr().contains("'culprits'"), "{}", r.stderr());
    let r = run(["stats", "--jsn", "x.pickle"]);
    r.expect_code(2);
    assert!(r.stderr().contains("'--json'"), "{}", r.stderr());
}

#[test]
fn completions_name_every_command() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = run(["completions", shell]);
        r.expect_code(0);
        let script = r.stdout();
        assert!(script.contains("fragscope"), "{shell}: {script}");
        for s in &subs {
            assert!(
                script.contains(s.as_str()),
                "{shell} completion does not mention `{s}`"
            );
        }
    }
    // The bash script also names each command as a completion word, and parses.
    let bash = run(["completions", "bash"]).stdout();
    for s in &subs {
        assert!(
            bash.split(|c: char| c.is_whitespace() || c == '"')
                .any(|w| w == s),
            "bash completion has no `{s}` word"
        );
    }
    if Command::new("bash").arg("--version").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fragscope.bash");
        std::fs::write(&p, &bash).unwrap();
        let out = Command::new("bash").arg("-n").arg(&p).output().unwrap();
        assert!(
            out.status.success(),
            "bash -n: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    run(["completions", "tcsh"]).expect_code(2);
}

#[test]
fn man_page_documents_every_command() {
    let r = run(["man"]);
    r.expect_code(0);
    let page = r.stdout();
    assert!(
        page.lines().any(|l| l.starts_with(".TH FRAGSCOPE 1")),
        "no .TH line:\n{}",
        &page[..page.len().min(300)]
    );
    assert!(page.contains(".SH COMMANDS"));
    for s in subcommands() {
        let heading = format!(".SH \"FRAGSCOPE {}\"", s.to_uppercase());
        assert!(page.contains(&heading), "man page lacks {heading}");
        // The command's examples, with roff's escaped hyphens undone.
        let text = page.replace("\\-", "-");
        assert!(
            text.contains(&format!("fragscope {s} ")) || text.contains(&format!("fragscope {s}\n")),
            "man page has no `fragscope {s}` line"
        );
    }
    // The global options are documented once, not under every command.
    assert_eq!(
        page.matches(".TP\n\\fB\\-\\-max\\-input\\-size\\fR")
            .count(),
        1,
        "{page}"
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fragscope.1");
    run(["man", "-o", out.to_str().unwrap()]).expect_code(0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page);

    // groff, when present, formats it without complaint.
    if let Ok(o) = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&out)
        .output()
    {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && err.trim().is_empty(), "groff: {err}");
    }
}

const ESC: char = '\x1b';

fn run_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(bin());
    c.args(args).env_remove("NO_COLOR");
    for (k, v) in env {
        c.env(k, v);
    }
    Run {
        cmd: format!("fragscope {}", args.join(" ")),
        out: c.output().expect("run fragscope"),
    }
}

/// Commands with text tables, on bundled fixtures.
fn table_commands() -> Vec<Vec<String>> {
    // Trace-less snapshots for diff and check, which replay traces.
    let f = fixture("fragmented.json");
    let p = fixture("pools_pending_proto4.pickle");
    let c = fixture("culprits/pinned-segments.json");
    vec![
        vec!["stats".into(), f.clone()],
        vec!["stats".into(), f.clone(), p.clone()],
        vec!["culprits".into(), c.clone()],
        vec!["diff".into(), p.clone(), f.clone()],
        vec![
            "check".into(),
            f.clone(),
            "--max-fragmentation".into(),
            "0".into(),
        ],
    ]
}

#[test]
fn color_only_when_asked_or_on_a_terminal() {
    for args in table_commands() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ok = |r: &Run| {
            // check exits 1 on its failing rule, by design.
            let want = if args[0] == "check" { 1 } else { 0 };
            r.expect_code(want);
        };
        let mut always = vec!["--color", "always"];
        always.extend(&args);
        let r = run_env(&always, &[("NO_COLOR", "1")]);
        ok(&r);
        assert!(
            r.stdout().contains(ESC),
            "{}: --color always (wins over NO_COLOR) colors nothing:\n{}",
            r.cmd,
            r.stdout()
        );
        // Bold headers, and the same table once escapes are removed.
        assert!(r.stdout().contains("\x1b[1m"), "{}", r.cmd);
        let mut never = vec!["--color", "never"];
        never.extend(&args);
        let plain = run_env(&never, &[]);
        ok(&plain);
        assert!(!plain.stdout().contains(ESC), "{}", plain.cmd);
        assert_eq!(strip_ansi(&r.stdout()), plain.stdout(), "{}", r.cmd);
        // auto: stdout is a pipe here, so no color.
        let auto = run_env(&args, &[]);
        ok(&auto);
        assert!(!auto.stdout().contains(ESC), "{}", auto.cmd);
    }
}

fn strip_ansi(s: &str) -> String {
    regex::Regex::new("\x1b\\[[0-9;]*m")
        .unwrap()
        .replace_all(s, "")
        .into_owned()
}

/// `--color auto` on a real terminal (util-linux `script` gives one): color,
/// unless NO_COLOR is set.
#[test]
fn auto_colors_a_terminal_unless_no_color() {
    let probe = Command::new("script")
        .args(["-qec", "true", "/dev/null"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("note: no util-linux `script` to give a terminal; skipping");
        return;
    }
    let line = format!("{} stats {}", bin(), fixture("fragmented.json"));
    let tty = |no_color: Option<&str>| {
        let mut c = Command::new("script");
        c.args(["-qec", &line, "/dev/null"]).env_remove("NO_COLOR");
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{line}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = tty(None);
    assert!(out.contains("fragmentation"), "{out}");
    assert!(out.contains(ESC), "no color on a terminal:\n{out}");
    let out = tty(Some("1"));
    assert!(out.contains("fragmentation"), "{out}");
    assert!(
        !out.contains(ESC),
        "NO_COLOR=1 on a terminal still colored:\n{out}"
    );
    // An empty NO_COLOR does not count (no-color.org).
    assert!(tty(Some("")).contains(ESC));
}

/// Sizes formatted with a binary unit: "1.50 GiB", "512 B".
fn unit_sizes(s: &str) -> Vec<String> {
    regex::Regex::new(r"\b\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)\b")
        .unwrap()
        .find_iter(s)
        .map(|m| m.as_str().to_string())
        .collect()
}

#[test]
fn bytes_flag_prints_exact_counts_everywhere() {
    // explain quotes the message it read; only its own figures must change.
    const OOM: &str = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.00 GiB is free. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 17.00 GiB is reserved by PyTorch but unallocated.";
    let mut cases = table_commands();
    cases.push(vec![
        "explain".into(),
        format!("torch.OutOfMemoryError: {OOM}"),
    ]);
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let unit_sizes = |s: &str| unit_sizes(&s.replace(OOM, ""));
        let human = run(&args);
        assert!(
            !unit_sizes(&human.stdout()).is_empty(),
            "{}: no human-readable size to begin with:\n{}",
            human.cmd,
            human.stdout()
        );
        let mut exact = vec!["--bytes"];
        exact.extend(&args);
        let r = run(&exact);
        assert_eq!(r.code(), human.code(), "{}", r.cmd);
        let left = unit_sizes(&r.stdout());
        assert!(
            left.is_empty(),
            "{}: sizes still in units under --bytes: {left:?}\n{}",
            r.cmd,
            r.stdout()
        );
    }
}

/// `--bytes` and `--color` belong to one invocation: two runs in one
/// process, at the same time, one with `--bytes` and one without, each
/// write what they would write alone.
#[test]
fn in_process_runs_keep_their_own_style() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("fragmented.json");
    let report = |exact: bool, out: &std::path::Path| {
        let mut args = vec!["fragscope".to_string()];
        if exact {
            args.push("--bytes".into());
        }
        args.extend(["report".into(), input.clone(), "-o".into(), path_str(out)]);
        assert_eq!(
            fragscope::cli::main_with_args(args.into_iter().map(std::ffi::OsString::from)),
            0
        );
        std::fs::read_to_string(out).unwrap()
    };
    let alone_human = report(false, &dir.path().join("alone-human.md"));
    let alone_exact = report(true, &dir.path().join("alone-exact.md"));
    assert!(!unit_sizes(&alone_human).is_empty(), "{alone_human}");
    assert_ne!(alone_human, alone_exact);
    std::thread::scope(|s| {
        for exact in [false, true] {
            let (report, dir) = (&report, dir.path());
            let want = if exact { &alone_exact } else { &alone_human };
            s.spawn(move || {
                for i in 0..8 {
                    let out = dir.join(format!("{exact}-{i}.md"));
                    assert_eq!(&report(exact, &out), want, "run {i}, --bytes: {exact}");
                }
            });
        }
    });
}
