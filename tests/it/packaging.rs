//! Packaging: the wheel maturin builds installs a working `fragscope`
//! command (and the recording module) into a fresh virtual environment, and
//! the recording module behaves without torch.
//!
//! The wheel test needs maturin (`python3 -m pip install maturin`; .ci/run
//! installs it); without it, it prints a note and returns. It builds the
//! wheel with the `dev` profile in the target directory `cargo test` has just
//! filled, so it reuses every compiled dependency and the crate (Cargo.toml
//! asks for one feature set whether or not dev-dependencies are in play) and
//! only links the binary again; the wheel's layout does
//! not depend on the profile. `FRAGSCOPE_WHEEL_PROFILE=release` builds the
//! wheel exactly as `maturin build --release` does, into target/packaging.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn works(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn python() -> Option<&'static str> {
    ["python3", "python"]
        .into_iter()
        .find(|p| works(p, "--version"))
}

/// Runs `c`, panicking with its command line, stdout and stderr unless it
/// succeeds; returns stdout.
fn ok(c: &mut Command) -> String {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{c:?} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn venv_bin(venv: &Path, name: &str) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join(format!("{name}.exe"))
    } else {
        venv.join("bin").join(name)
    }
}

#[test]
fn recorder_module_runs_without_torch() {
    let Some(py) = python() else {
        eprintln!("note: no python3 on PATH; skipping the recording module's tests");
        return;
    };
    ok(Command::new(py)
        .arg(root().join("tests/python/test_record.py"))
        .env("PYTHONDONTWRITEBYTECODE", "1"));
}

/// `fragscope.show(path)`: the self-contained page, returned without
/// IPython, displayed in an iframe with it (tests/python/test_show.py).
#[test]
fn show_gives_the_page_with_its_data() {
    let Some(py) = python() else {
        eprintln!("note: no python3 on PATH; skipping fragscope.show's tests");
        return;
    };
    ok(Command::new(py)
        .arg(root().join("tests/python/test_show.py"))
        .arg(fixture("view_oom_two_devices.pickle"))
        .env("FRAGSCOPE_BIN", crate::util::bin())
        .env("PYTHONDONTWRITEBYTECODE", "1"));
}

#[test]
fn wheel_installs_the_command_into_a_fresh_venv() {
    let Some(py) = python() else {
        eprintln!("note: no python3 on PATH; skipping the wheel test");
        return;
    };
    if !works("maturin", "--version") {
        eprintln!(
            "note: maturin is not installed (python3 -m pip install maturin); skipping the wheel test"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wheels = tmp.path().join("wheels");
    let profile = std::env::var("FRAGSCOPE_WHEEL_PROFILE").unwrap_or_else(|_| "dev".into());
    let mut build = Command::new("maturin");
    build
        .args(["build", "--profile", &profile, "--quiet", "--out"])
        .arg(&wheels)
        .current_dir(root())
        .env("CARGO_TERM_COLOR", "never");
    // A target directory of its own, whatever the profile: the other tests
    // of this binary run the debug binary at the same time, and a build in
    // their target directory can relink it under them (seen: "spawn
    // fragscope: No such file or directory").
    build.env("CARGO_TARGET_DIR", root().join("target").join("packaging"));
    ok(&mut build);
    let wheel: Vec<PathBuf> = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheel.len(), 1, "one wheel in {wheels:?}: {wheel:?}");
    let wheel = &wheel[0];
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        name_of(wheel).starts_with(&format!("fragscope-{version}-")),
        "wheel named after the crate and its version: {wheel:?}"
    );

    let venv = tmp.path().join("venv");
    ok(Command::new(py).args(["-m", "venv"]).arg(&venv));
    // The wheel has no dependencies: install it without touching an index.
    ok(Command::new(venv_bin(&venv, "python"))
        .args(["-m", "pip", "install", "--quiet", "--no-index"])
        .arg(wheel));

    let installed = venv_bin(&venv, "fragscope");
    assert!(installed.is_file(), "{installed:?} installed by the wheel");
    let v = ok(Command::new(&installed).arg("--version"));
    assert_eq!(v.trim(), format!("fragscope {version}"));

    // The installed command gives the same table as the binary under test.
    let fixture = fixture("fragmented.json");
    let got = ok(Command::new(&installed)
        .args(["stats", &fixture])
        .env("NO_COLOR", "1"));
    let want = run(["stats", &fixture]);
    want.expect_code(0);
    assert_eq!(got, want.stdout());
    assert!(got.contains("fragmentation"), "{got}");

    // The recording module ships in the same wheel and imports without torch.
    let r = ok(Command::new(venv_bin(&venv, "python")).args([
        "-c",
        "import sys, fragscope; print(callable(fragscope.record), 'torch' in sys.modules)",
    ]));
    assert_eq!(r.trim(), "True False");
    // fragscope.show finds the installed command on PATH.
    let path = std::env::join_paths(
        std::iter::once(installed.parent().unwrap().to_path_buf()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let r = ok(Command::new(venv_bin(&venv, "python"))
        .args([
            "-c",
            "import sys, fragscope; print('fragscope-data' in fragscope.show(sys.argv[1]))",
        ])
        .arg(&fixture)
        .env("PATH", path)
        .env_remove("FRAGSCOPE_BIN"));
    assert_eq!(r.trim(), "True");
}
