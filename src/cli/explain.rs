//! `fragscope explain [TEXT|FILE|-]`

use super::common::{Exit, Global, print};
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

/// The bytes read as text: taken as they are when they are UTF-8 (a copy
/// of a large paste would double it), with U+FFFD for what is not.
fn text_of(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let (name, text) = match a.input.as_deref() {
        None | Some("-") => {
            let (b, _) = input::read_input("-", &g.load)?;
            ("stdin".to_string(), text_of(b))
        }
        Some(p) if std::path::Path::new(p).is_file() => {
            let (b, _) = input::read_input(p, &g.load)?;
            (p.to_string(), text_of(b))
        }
        Some(t) => ("the text given".to_string(), t.to_string()),
    };
    let e = crate::analysis::explain::explain_owned(&g.style, text)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    if a.json {
        print(&crate::render::explain::json(&e))?;
    } else {
        print(&crate::render::explain::text(&g.style, &e))?;
    }
    Ok(Exit::Ok)
}
