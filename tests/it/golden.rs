//! The one compare-or-bless helper for golden outputs. A run rewrites the
//! files only when `FRAGSCOPE_BLESS` is exactly `1`; otherwise it compares
//! and, on a difference, panics naming the file, the first line that differs
//! and how to rewrite it.

use std::path::{Path, PathBuf};

/// Whether this run rewrites golden files: `FRAGSCOPE_BLESS=1`, nothing else.
pub fn blessing() -> bool {
    std::env::var_os("FRAGSCOPE_BLESS").is_some_and(|v| v == "1")
}

/// `tests/golden/NAME`.
pub fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Compares `actual` with `tests/golden/NAME` (NAME may hold folders), or
/// writes it there under `FRAGSCOPE_BLESS=1`.
#[track_caller]
pub fn check(name: &str, actual: &(impl AsRef<[u8]> + ?Sized)) {
    check_file(&path(name), actual.as_ref());
}

/// [`check`] for a file anywhere in the repository (an absolute path).
#[track_caller]
pub fn check_file(path: &Path, actual: &[u8]) {
    if blessing() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, actual).unwrap();
        return;
    }
    let want = std::fs::read(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with FRAGSCOPE_BLESS=1 to write it",
            path.display()
        )
    });
    if want != actual {
        panic!(
            "{} differs from the output: {}\n(rerun with FRAGSCOPE_BLESS=1 if the change is intended)",
            path.display(),
            first_difference(&want, actual)
        );
    }
}

/// Compares `generated` with the section of the document at `path` between
/// the marker lines `begin` and `end`, or splices it in under
/// `FRAGSCOPE_BLESS=1`; for tables that the tests compute and docs/ shows.
#[track_caller]
pub fn check_section(path: &Path, begin: &str, end: &str, generated: &str) {
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (Some(b), Some(e)) = (doc.find(begin), doc.find(end)) else {
        panic!(
            "{} lacks the generated-section markers {begin:?} and {end:?}",
            path.display()
        );
    };
    let current = &doc[b + begin.len()..e];
    if current == generated {
        return;
    }
    if blessing() {
        let new = format!("{}{begin}{generated}{}", &doc[..b], &doc[e..]);
        std::fs::write(path, new).unwrap();
        return;
    }
    panic!(
        "the generated section of {} is stale: {}\n(rerun with FRAGSCOPE_BLESS=1 if the change is intended)\nnew section:\n{generated}",
        path.display(),
        first_difference(current.as_bytes(), generated.as_bytes())
    );
}

/// Where two outputs first part, in words: the line number with both lines
/// (or the byte offset, for outputs that are not text), and both sizes.
fn first_difference(want: &[u8], got: &[u8]) -> String {
    let sizes = format!("golden {} bytes, output {} bytes", want.len(), got.len());
    match (std::str::from_utf8(want), std::str::from_utf8(got)) {
        (Ok(w), Ok(g)) => {
            let (mut wl, mut gl) = (w.lines(), g.lines());
            let mut n = 1;
            loop {
                match (wl.next(), gl.next()) {
                    (Some(a), Some(b)) if a == b => n += 1,
                    (None, None) => return format!("line endings differ ({sizes})"),
                    (a, b) => {
                        return format!(
                            "first at line {n} ({sizes})\n  golden: {a:?}\n  output: {b:?}"
                        );
                    }
                }
            }
        }
        _ => {
            let at = want
                .iter()
                .zip(got)
                .position(|(a, b)| a != b)
                .unwrap_or(want.len().min(got.len()));
            format!("first at byte {at} ({sizes})")
        }
    }
}
