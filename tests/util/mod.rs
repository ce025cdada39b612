//! Shared test helpers: run the built binary and show the command, stdout and
//! stderr when an expectation fails; locate the shared real files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_fragscope")
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(name: &str) -> String {
    root()
        .join("fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `../shared/real`, or `None` (with a printed note) when it is absent.
/// A synthetic snapshot (`fragscope::synth`), pickled as PyTorch writes one.
pub fn synthetic_pickle(o: &fragscope::synth::SynthOptions) -> Vec<u8> {
    let mut bytes = Vec::new();
    fragscope::synth::write_pickle(&fragscope::synth::generate(o), &mut bytes)
        .expect("writing to memory");
    bytes
}

pub fn real_dir() -> Option<PathBuf> {
    let p = root().join("..").join("shared").join("real");
    if p.is_dir() {
        Some(p)
    } else {
        // In CI a skip would pass having tested nothing real.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} is absent: CI needs the real files",
            p.display()
        );
        eprintln!(
            "note: {} is absent; skipping tests on real files",
            p.display()
        );
        None
    }
}

pub fn real_files(exts: &[&str]) -> Vec<PathBuf> {
    let Some(d) = real_dir() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| exts.iter().any(|x| p.to_string_lossy().ends_with(x)))
        .collect();
    v.sort();
    v
}

/// The pickles of `../shared/real`, sorted, or `None` (with a printed note)
/// when the folder is absent.
pub fn real_pickles() -> Option<Vec<PathBuf>> {
    real_dir()?;
    Some(real_files(&[".pickle", ".pkl"]))
}

/// Calls `f` with the name, model and load of every real pickle that loads
/// as a snapshot (those with a trace only, when `with_trace`); `false` when
/// ../shared/real is absent.
pub fn each_real_snapshot(
    with_trace: bool,
    mut f: impl FnMut(&str, &fragscope::model::Snapshot, &fragscope::input::Loaded),
) -> bool {
    let Some(paths) = real_pickles() else {
        return false;
    };
    for p in paths {
        let opts = fragscope::input::LoadOptions::default();
        let Ok((snap, l)) = fragscope::input::load_snapshot(&p.to_string_lossy(), &opts) else {
            continue;
        };
        if with_trace && snap.traces().iter().all(|t| t.is_empty()) {
            continue;
        }
        f(&name_of(&p), &snap, &l);
    }
    true
}

pub struct Run {
    pub cmd: String,
    pub out: Output,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    /// Panics with the whole picture unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        if self.code() != code {
            panic!(
                "expected exit {code}, got {}\ncommand: {}\n--- stdout\n{}\n--- stderr\n{}",
                self.code(),
                self.cmd,
                self.stdout(),
                self.stderr()
            );
        }
        self
    }
}

pub fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args
        .into_iter()
        .map(|a| a.as_ref().to_os_string())
        .collect();
    let cmd = format!(
        "fragscope {}",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = Command::new(bin())
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run fragscope");
    Run { cmd, out }
}

pub fn run_stdin(args: &[&str], input: &[u8]) -> Run {
    use std::io::Write;
    let mut child = Command::new(bin())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fragscope");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        cmd: format!("fragscope {} < input", args.join(" ")),
        out,
    }
}

pub fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Runs the binary with `args` and returns its exit code and peak resident
/// set size in bytes, measured by GNU time (`/usr/bin/time -f %M`), which
/// runs it as the child of a small process: a child of the test process
/// would inherit the test process's high-water mark (the kernel keeps the
/// largest RSS of the process across `exec`), and tests run side by side.
/// Stdout and stderr are discarded.
pub fn peak_rss<I, S>(args: I) -> (i32, u64)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::process::Stdio;
    let time = Path::new("/usr/bin/time");
    assert!(
        time.exists(),
        "/usr/bin/time (Debian's package `time`) measures peak memory here; install it"
    );
    let report = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new(time)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(report.path())
        .arg(bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("/usr/bin/time runs");
    let text = std::fs::read_to_string(report.path()).unwrap();
    // The last line is the figure (earlier ones say how the command ended).
    let kib: u64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS in /usr/bin/time's report: {text:?}"));
    (status.code().unwrap_or(-1), kib * 1024)
}
