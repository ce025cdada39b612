//! `fragscope convert IN -o OUT.{json,msgpack}`

use super::common::{Exit, Global};
use crate::input;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot to read (any supported form, `-` for stdin).
    #[arg(value_name = "IN")]
    pub input: String,
    /// Output path; `.json` writes PyTorch's schema as JSON, `.msgpack`/`.mp`
    /// fragscope's compact MessagePack (both read back by fragscope).
    #[arg(short, long, value_name = "OUT")]
    pub output: String,
    /// Output format, when the extension does not say.
    #[arg(long, value_enum)]
    pub to: Option<To>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    Json,
    Msgpack,
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let to = match a.to {
        Some(t) => t,
        None => {
            let lower = a.output.to_ascii_lowercase();
            if lower.ends_with(".json") {
                To::Json
            } else if lower.ends_with(".msgpack") || lower.ends_with(".mp") {
                To::Msgpack
            } else {
                anyhow::bail!(
                    "{}: cannot tell the output format from the extension; use .json or .msgpack, or --to",
                    a.output
                )
            }
        }
    };
    let (snap, _) = input::load_snapshot(&a.input, &g.load)?;
    // Written as it is encoded: the output is never held whole.
    crate::cli::output::write_atomic_with(
        &a.output,
        std::slice::from_ref(&a.input),
        |w| match to {
            To::Json => crate::render::encode::write_json(&snap, w),
            To::Msgpack => crate::render::encode::write_msgpack(&snap, w),
        },
    )?;
    Ok(Exit::Ok)
}
