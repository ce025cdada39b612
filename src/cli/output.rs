//! Writing results without losing anything: every output goes to a
//! temporary file in the target directory and is renamed into place, so an
//! existing file is never left half-written; an output path that names one of
//! the inputs is refused.

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
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        write(&mut out).map_err(io)?;
        return out.flush().map_err(io);
    }
    let target = PathBuf::from(path);
    if inputs
        .iter()
        .any(|i| i != "-" && same_file(Path::new(i), &target))
    {
        return Err(OutputError::WouldOverwriteInput { path: path.into() });
    }
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".fragscope-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(io)?;
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        write(&mut w).map_err(io)?;
        w.flush().map_err(io)?;
    }
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
}
