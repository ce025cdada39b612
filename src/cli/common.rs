//! Shared plumbing of the commands: global options, exit codes, error
//! printing, stdout that tolerates a closed pipe, and input expansion.

use super::{ColorChoice, GlobalArgs};
use crate::core::style::Style;
use crate::input::{self, LoadError, LoadOptions, Loaded};
use std::ffi::OsStr;
use std::io::{IsTerminal, Write};

#[derive(Debug, Clone)]
pub struct Global {
    /// `--bytes` and `--color`, for every renderer of this invocation.
    pub style: Style,
    pub verbose: bool,
    pub load: LoadOptions,
    /// Progress bars only when stderr is a terminal.
    pub progress: bool,
}

impl Global {
    pub fn from_args(a: &GlobalArgs) -> Global {
        let color = use_color(
            a.color,
            std::io::stdout().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        );
        Global {
            style: Style {
                exact_bytes: a.bytes,
                color,
            },
            verbose: a.verbose,
            load: LoadOptions {
                max_input_size: a.max_input_size,
                ..LoadOptions::default()
            },
            progress: std::io::stderr().is_terminal(),
        }
    }
}

/// `--color`: `auto` colors only a terminal, and not when NO_COLOR is set to
/// a non-empty value (no-color.org); an explicit `always`/`never` wins over
/// NO_COLOR, as a per-invocation choice should.
pub fn use_color(choice: ColorChoice, stdout_is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => stdout_is_terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// How a command that ran to the end wants the process to exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    /// A `check` rule failed.
    RuleFailed,
    /// Some inputs were unreadable (each already named on stderr).
    SomeInputsFailed,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::RuleFailed => 1,
            Exit::SomeInputsFailed => 2,
        }
    }
}

pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// One line by default; the chain of causes under `--verbose`. File names
/// and file contents reach messages, so control characters are escaped: no
/// input can split or forge a line.
pub fn print_error(e: &anyhow::Error, verbose: bool) {
    use crate::core::text::one_line;
    let mut err = std::io::stderr().lock();
    if verbose {
        let _ = writeln!(err, "fragscope: error: {}", one_line(&e.to_string()));
        for c in e.chain().skip(1) {
            let _ = writeln!(err, "  caused by: {}", one_line(&c.to_string()));
        }
    } else {
        let _ = writeln!(err, "fragscope: error: {}", one_line(&format!("{e:#}")));
    }
}

pub fn warn(msg: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "fragscope: warning: {}",
        crate::core::text::one_line(msg)
    );
}

/// Writes to stdout; a closed pipe surfaces as an error that exits 0.
pub fn print(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Writes `value` to stdout in serde_json's pretty form and a line break,
/// as it is serialized: a long document is never held whole. A closed pipe
/// surfaces as an error that exits 0, as in [`print`].
pub fn print_json<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    super::output::write_atomic_with("-", &[], |w| crate::render::pretty::write_line(w, value))?;
    Ok(())
}

/// Expands directories into the files they hold (sorted, non-recursive,
/// hidden files skipped); other arguments pass through.
pub fn expand_inputs(inputs: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for i in inputs {
        let p = std::path::Path::new(i);
        if i != "-" && p.is_dir() {
            let mut v: Vec<String> = std::fs::read_dir(p)
                .map_err(|e| anyhow::anyhow!("{i}: cannot list directory: {e}"))?
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_file())
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path().to_string_lossy().into_owned())
                .collect();
            v.sort();
            if v.is_empty() {
                anyhow::bail!("{i}: directory holds no files");
            }
            out.extend(v);
        } else {
            out.push(i.clone());
        }
    }
    Ok(out)
}

/// Inputs smaller than this load without a progress bar.
pub const PROGRESS_MIN_BYTES: u64 = 64 << 20;

/// Loads an input, with a progress bar on stderr while a large file is read
/// when stderr is a terminal (never in pipes or CI logs). `bars` holds the
/// bars of inputs read at the same time.
pub fn load_input(
    path: &str,
    g: &Global,
    bars: &indicatif::MultiProgress,
) -> Result<Loaded, LoadError> {
    let size = (path != "-")
        .then(|| std::fs::metadata(path).ok())
        .flatten()
        .map(|m| m.len())
        .filter(|&n| n >= PROGRESS_MIN_BYTES);
    let (true, Some(size)) = (g.progress, size) else {
        return input::load(path, &g.load);
    };
    let bar = bars.add(indicatif::ProgressBar::new(size));
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta} left)",
        )
        .expect("a valid template"),
    );
    bar.set_message(format!("reading {path}"));
    let r = input::load_observed(path, &g.load, &|n| bar.set_position(n));
    bar.finish_and_clear();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn color_choice() {
        let set = OsString::from("1");
        let empty = OsString::new();
        assert!(use_color(ColorChoice::Auto, true, None));
        assert!(use_color(ColorChoice::Auto, true, Some(&empty)));
        assert!(!use_color(ColorChoice::Auto, true, Some(&set)));
        assert!(!use_color(ColorChoice::Auto, false, None));
        assert!(use_color(ColorChoice::Always, false, Some(&set)));
        assert!(!use_color(ColorChoice::Never, true, None));
    }
}
