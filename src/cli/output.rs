//! Writing results without losing anything: every output goes to a
//! temporary file in the target directory and is renamed into place, so an
//! existing file is never left half-written; an output path that names one of
//! the inputs is refused. A path that names no regular file (`/dev/null`, a
//! FIFO, a terminal) is written in place, as by any other tool: a file
//! renamed over it would replace the device or the pipe itself. A path that
//! is a symbolic link to a file replaces the file it names and keeps the link.

use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: refusing to write over an input file")]
    WouldOverwriteInput { path: String },
    // The cause is the next link of the chain, not repeated here.
    #[error("{path}: cannot write")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Atomically writes `bytes` to `path` (`-` = stdout), refusing to replace
/// any of `inputs`.
pub fn write_atomic(path: &str, bytes: &[u8], inputs: &[String]) -> Result<(), OutputError> {
    write_atomic_with(path, inputs, |w| w.write_all(bytes))
}

/// [`write_atomic`] for output produced piece by piece (a file too large to
/// hold in memory): `write` gets a buffered writer.
pub fn write_atomic_with(
    path: &str,
    inputs: &[String],
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), OutputError> {
    let io = |e| OutputError::Io {
        path: path.to_string(),
        source: e,
    };
    if path == "-" {
        return buffered(stdout_handle().map_err(io)?, write).map_err(io);
    }
    let target = PathBuf::from(path);
    if inputs
        .iter()
        .any(|i| i != "-" && same_file(Path::new(i), &target))
    {
        return Err(OutputError::WouldOverwriteInput { path: path.into() });
    }
    if written_in_place(&target) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .map_err(io)?;
        return buffered(f, write).map_err(io);
    }
    // A symbolic link to a file: the file it names is replaced, the link
    // kept (renamed over, the link itself would become the new file).
    let target = match std::fs::symlink_metadata(&target) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(&target).unwrap_or(target),
        _ => target,
    };
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".fragscope-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(io)?;
    buffered(tmp.as_file_mut(), write).map_err(io)?;
    // Temporary files are created private (0600); a report is meant to be
    // shared, so keep the mode of the file being replaced, else 0644.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o644);
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
    }
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(&target).map_err(|e| io(e.error))?;
    Ok(())
}

/// Whether `target` exists and is neither a regular file nor a directory
/// (a character device such as `/dev/null`, a FIFO, a socket), so that it
/// is written in place rather than replaced.
fn written_in_place(target: &Path) -> bool {
    std::fs::metadata(target).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// `write` into `out` through a 1 MiB buffer, flushed: every output's road.
fn buffered(
    out: impl Write,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
    write(&mut w)?;
    w.flush()
}

/// Standard output for a long document: on Unix a duplicate of its
/// descriptor, for the standard handle looks for the last line break of
/// every write it is given, which took half the time of writing 2 GB of
/// JSON without one. Elsewhere the standard handle.
#[cfg(unix)]
fn stdout_handle() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    std::io::stdout().flush()?;
    Ok(std::io::stdout().as_fd().try_clone_to_owned()?.into())
}
#[cfg(not(unix))]
fn stdout_handle() -> std::io::Result<std::io::Stdout> {
    Ok(std::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn refuses_input_and_replaces_atomically() {
        let d = tempfile::tempdir().unwrap();
        let inp = d.path().join("in.pickle");
        std::fs::write(&inp, b"x").unwrap();
        let p = inp.to_string_lossy().to_string();
        assert!(matches!(
            write_atomic(&p, b"y", std::slice::from_ref(&p)),
            Err(OutputError::WouldOverwriteInput { .. })
        ));
        assert_eq!(std::fs::read(&inp).unwrap(), b"x");
        let out = d.path().join("out.json").to_string_lossy().to_string();
        write_atomic(&out, b"first", std::slice::from_ref(&p)).unwrap();
        write_atomic(&out, b"second", std::slice::from_ref(&p)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"second");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o644, "outputs are readable by others");
        }
        let leftovers = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary files left behind");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_file_is_kept_and_the_file_replaced() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("report.html");
        let link = d.path().join("latest.html");
        std::fs::write(&file, b"old").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomic(&link.to_string_lossy(), b"new", &[]).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"new");
        // A dangling link: its own path is written, as before.
        let dangling = d.path().join("gone.html");
        std::os::unix::fs::symlink(d.path().join("nowhere/x.html"), &dangling).unwrap();
        write_atomic(&dangling.to_string_lossy(), b"x", &[]).unwrap();
        assert_eq!(std::fs::read(&dangling).unwrap(), b"x");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            3,
            "files left behind"
        );
    }

    #[test]
    fn only_what_is_no_regular_file_is_written_in_place() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert!(!written_in_place(&f));
        assert!(!written_in_place(d.path()));
        assert!(!written_in_place(&d.path().join("missing")));
        #[cfg(unix)]
        assert!(written_in_place(Path::new("/dev/null")));
    }
}
