//! `fragscope explain [TEXT|FILE|-]`

use super::common::{Exit, Global, print};
use crate::analysis::explain::{explain_parsed, parse, parse_reader};
use crate::input;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The OOM message or memory_summary() text itself, a file that holds
    /// it (gzip/zstd too), or `-` for stdin (the default).
    #[arg(value_name = "TEXT|FILE|-")]
    pub input: Option<String>,
    /// Print a versioned JSON object (schema fragscope.explain/1).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    // A file or stdin is read as a stream, a line at a time: a long log is
    // never held whole.
    let (name, parsed) = match a.input.as_deref() {
        Some(t) if t != "-" && !std::path::Path::new(t).is_file() => {
            ("the text given".to_string(), parse(t))
        }
        p => {
            let path = p.unwrap_or("-");
            let (r, compression) = input::open_stream(path, &g.load)?;
            let name = if path == "-" { "stdin" } else { path };
            (
                name.to_string(),
                parse_reader(r).map_err(|e| input::read_error(e, path, compression))?,
            )
        }
    };
    let parsed = parsed.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let e = explain_parsed(&g.style, parsed);
    if a.json {
        print(&crate::render::explain::json(&e))?;
    } else {
        print(&crate::render::explain::text(&g.style, &e))?;
    }
    Ok(Exit::Ok)
}
