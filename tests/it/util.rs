//! The helpers every test module shares: run the built binary and show the
//! command, stdout and stderr when an expectation fails ([`run`]); run it
//! under a hang watchdog and resource limits for hostile inputs
//! ([`guarded`]); locate the fixtures and the shared real files (skip with a
//! note when absent, fail under `CI=true`); build pickles by opcode.
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

/// A synthetic snapshot (`fragscope::synth`), pickled as PyTorch writes one.
pub fn synthetic_pickle(o: &fragscope::synth::SynthOptions) -> Vec<u8> {
    let mut bytes = Vec::new();
    fragscope::synth::write_pickle(&fragscope::synth::generate(o), &mut bytes)
        .expect("writing to memory");
    bytes
}

/// A generated snapshot of `events` trace events (the default shape)
/// written to `synthetic.pickle` in `d`, and its size.
pub fn generated_snapshot(d: &Path, events: u64) -> (PathBuf, u64) {
    let input = d.join("synthetic.pickle");
    let o = fragscope::synth::SynthOptions {
        events,
        ..Default::default()
    };
    std::fs::write(&input, synthetic_pickle(&o)).unwrap();
    let size = std::fs::metadata(&input).unwrap().len();
    (input, size)
}

/// `../shared/real`, or `None` (with a printed note) when it is absent;
/// under `CI=true` its absence fails the test instead.
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

/// The files of `../shared/real` whose names end with one of `exts`, sorted
/// (none when the folder is absent).
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

/// Snapshots and traces of `../shared/real` (not the README or the OOM
/// messages), sorted; none when the folder is absent.
pub fn real_inputs() -> Vec<PathBuf> {
    let Some(d) = real_dir() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            !(n.ends_with(".md") || n.ends_with(".txt"))
        })
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

/// Running the built `fragscope` binary the way a user would on hostile
/// input, with a hang watchdog and optional resource limits; [`Run`] here
/// holds its exit code and text as fields, and its assertions print the
/// command, stdout and stderr when they fail.
pub mod guarded {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Far above what any case needs on a loaded debug build; reaching it
    /// means the input made fragscope hang, which is the failure, not slowness.
    pub const HANG: Duration = Duration::from_secs(300);

    #[derive(Default, Clone, Copy)]
    pub struct Limits {
        /// RLIMIT_AS: the address space the process may map, in bytes.
        pub address_space: Option<u64>,
        /// RLIMIT_FSIZE, with SIGXFSZ ignored so that a write fails with EFBIG.
        pub file_size: Option<u64>,
        /// A watchdog tighter than [`HANG`], for inputs whose linear cost is
        /// known to be seconds and whose quadratic cost would be minutes.
        pub hang: Option<Duration>,
    }

    pub struct Run {
        pub cmd: String,
        /// None when killed by a signal.
        pub code: Option<i32>,
        pub stdout: String,
        pub stderr: String,
    }

    impl std::fmt::Display for Run {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "\ncommand: {}\nexit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                self.cmd,
                self.code,
                &self.stdout[..self.stdout.len().min(4000)],
                &self.stderr[..self.stderr.len().min(4000)]
            )
        }
    }

    /// Sets a resource limit in the child between fork and exec
    /// (async-signal-safe: `setrlimit` only).
    fn set_limit(resource: libc::__rlimit_resource_t, n: u64) -> std::io::Result<()> {
        let r = libc::rlimit {
            rlim_cur: n,
            rlim_max: n,
        };
        // SAFETY: `r` is a valid rlimit for the duration of the call.
        if unsafe { libc::setrlimit(resource, &r) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
        run_limited(args, Limits::default())
    }

    pub fn run_limited<S: AsRef<std::ffi::OsStr>>(args: &[S], limits: Limits) -> Run {
        let mut cmd = Command::new(super::bin());
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("NO_COLOR", "1");
        let text = format!(
            "fragscope {}",
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        );
        // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(n) = limits.address_space {
                    set_limit(libc::RLIMIT_AS, n)?;
                }
                if let Some(n) = limits.file_size {
                    set_limit(libc::RLIMIT_FSIZE, n)?;
                    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn fragscope");
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let t_out = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out.read_to_end(&mut s);
            s
        });
        let t_err = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = err.read_to_end(&mut s);
            s
        });
        let start = Instant::now();
        let hang = limits.hang.unwrap_or(HANG);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if start.elapsed() > hang {
                let _ = child.kill();
                let _ = child.wait();
                panic!("hang: `{text}` ran past {hang:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
        let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
        Run {
            cmd: text,
            code: status.code(),
            stdout,
            stderr,
        }
    }

    impl Run {
        pub fn stderr_lines(&self) -> Vec<&str> {
            self.stderr.lines().collect()
        }

        /// Exit 2 with exactly one stderr line, `fragscope: error: ...`, naming `file`.
        pub fn assert_clean_error(&self, file: &str) -> &Self {
            assert_eq!(self.code, Some(2), "expected exit 2{self}");
            let lines = self.stderr_lines();
            assert_eq!(lines.len(), 1, "expected one stderr line{self}");
            assert!(
                lines[0].starts_with("fragscope: error: "),
                "error line has the wrong prefix{self}"
            );
            assert!(lines[0].contains(file), "error does not name {file}{self}");
            self
        }

        /// Either success (warnings allowed) or a clean one-line error; never a
        /// panic, an abort or a signal.
        pub fn assert_ok_or_clean_error(&self, file: &str) {
            match self.code {
                Some(0) => {
                    for l in self.stderr_lines() {
                        assert!(
                            l.starts_with("fragscope: warning: "),
                            "unexpected stderr on success{self}"
                        );
                    }
                }
                Some(2) => {
                    self.assert_clean_error(file);
                }
                _ => panic!("neither success nor a clean error{self}"),
            }
        }

        pub fn assert_ok(&self) -> &Self {
            assert_eq!(self.code, Some(0), "expected success{self}");
            self
        }

        pub fn assert_stderr_has(&self, what: &str) -> &Self {
            assert!(self.stderr.contains(what), "stderr lacks {what:?}{self}");
            self
        }
    }
}

pub fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A tiny deterministic generator (xorshift64*), so that byte-flip cases
/// are the same on every run.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// `bytes` with `flips` bytes, at random places, changed to another value.
    pub fn flipped(&mut self, bytes: &[u8], flips: usize) -> Vec<u8> {
        let mut b = bytes.to_vec();
        for _ in 0..flips {
            let i = self.below(b.len() as u64) as usize;
            b[i] ^= 1 + self.below(255) as u8;
        }
        b
    }
}

/// Builds protocol-4 pickles by opcode.
pub struct Pk(pub Vec<u8>);
impl Pk {
    pub fn new() -> Pk {
        Pk(vec![0x80, 4])
    }
    pub fn raw(mut self, b: &[u8]) -> Pk {
        self.0.extend_from_slice(b);
        self
    }
    pub fn s(mut self, s: &str) -> Pk {
        if s.len() < 256 {
            self.0.push(0x8c);
            self.0.push(s.len() as u8);
        } else {
            self.0.push(b'X');
            self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// LONG1 with 8 bytes, as CPython writes addresses.
    pub fn int(mut self, v: i64) -> Pk {
        self.0.extend_from_slice(&[0x8a, 8]);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn stop(mut self) -> Vec<u8> {
        self.0.push(b'.');
        self.0
    }
}

/// Temporary files an output write left behind in `dir` (there should be
/// none: every write renames its temporary file or removes it).
pub fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".fragscope-"))
        .collect()
}

/// `{"segments": [], "device_traces": [[entry 0, …, entry n-1]]}` as
/// CPython pickles it, each entry a dict of `fields` items written by
/// `item(p, entry, field)` (its key, then its value).
pub fn one_trace_pickle(
    n: usize,
    fields: usize,
    mut item: impl FnMut(
        &mut fragscope::synth::pickle_writer::Pickler<Vec<u8>>,
        usize,
        usize,
    ) -> std::io::Result<()>,
) -> Vec<u8> {
    use fragscope::synth::pickle_writer::{Ident, Pickler};
    let mut p = Pickler::new(Vec::new());
    p.dict(Ident::Fresh, 2, |p, i| match i {
        0 => {
            p.str(Ident::Fresh, "segments")?;
            p.list(Ident::Fresh, 0, |_, _| Ok(()))
        }
        _ => {
            p.str(Ident::Fresh, "device_traces")?;
            p.list(Ident::Fresh, 1, |p, _| {
                p.list(Ident::Fresh, n, |p, k| {
                    p.dict(Ident::Fresh, fields, |p, f| item(p, k, f))
                })
            })
        }
    })
    .unwrap();
    p.finish().unwrap().0
}

/// Decodes a pickle with the schema layer taking trace entries as they are
/// read (the fast path on): the model and how many entries it took.
pub fn fast(bytes: &[u8]) -> Result<(fragscope::model::Snapshot, usize), String> {
    decode_with(bytes, fragscope::input::snapshot::TraceSink::new())
}

/// [`fast`] with the fast path off: the general machine reads every entry.
pub fn general(bytes: &[u8]) -> Result<(fragscope::model::Snapshot, usize), String> {
    decode_with(
        bytes,
        fragscope::input::snapshot::TraceSink::new().with_fast_path(false),
    )
}

fn decode_with(
    bytes: &[u8],
    mut sink: fragscope::input::snapshot::TraceSink,
) -> Result<(fragscope::model::Snapshot, usize), String> {
    use fragscope::input::{pickle, snapshot};
    let d = pickle::decode_from(bytes, &mut sink).map_err(|e| e.to_string())?;
    let taken = sink.entries();
    let s = snapshot::from_arena_with(&d.arena, d.root, sink).map_err(|e| e.to_string())?;
    Ok((s, taken))
}

/// The fast path for trace entries against the general machine: the same
/// model and the same number of entries taken, or the same error.
pub fn fast_path_agrees(name: &str, bytes: &[u8]) -> bool {
    match (general(bytes), fast(bytes)) {
        (Ok((a, ta)), Ok((b, tb))) => {
            assert!(a == b, "{name}: the fast path changes the model");
            assert_eq!(ta, tb, "{name}: entries taken");
            true
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{name}: different errors");
            false
        }
        (a, b) => panic!("{name}: {:?} vs {:?}", a.err(), b.err()),
    }
}

/// Item `f` (0, 1 or 2) of entry `k` of an allocation in [`one_trace_pickle`]:
/// `action` "alloc", `addr` (k + 1) MiB, `size` 512, their keys and the
/// action shared by every entry (memo ids 0 to 3).
pub fn alloc_item(
    p: &mut fragscope::synth::pickle_writer::Pickler<Vec<u8>>,
    k: usize,
    f: usize,
) -> std::io::Result<()> {
    use fragscope::synth::pickle_writer::Ident;
    match f {
        0 => {
            p.str(Ident::Shared(0), "action")?;
            p.str(Ident::Shared(1), "alloc")
        }
        1 => {
            p.str(Ident::Shared(2), "addr")?;
            p.int((k as i64 + 1) << 20)
        }
        _ => {
            p.str(Ident::Shared(3), "size")?;
            p.int(512)
        }
    }
}

/// Runs python3 with `args` (a script's path or `-c` and its text, then
/// its arguments), which must succeed. `None`, with a note naming what is
/// not checked, where python3 cannot run and CI is not set; under CI a
/// missing python3 fails the test.
pub fn python3<S: AsRef<std::ffi::OsStr>>(args: &[S], unchecked: &str) -> Option<()> {
    match Command::new("python3").args(args).output() {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            Some(())
        }
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("note: python3 cannot run ({e}); {unchecked} not checked");
            None
        }
        Err(e) => panic!("python3 cannot run: {e}"),
    }
}
