//! `fragscope completions SHELL`: the shell completion script, generated from
//! the command-line definition so it never drifts from it.

use super::common::{Exit, Global, print};
use clap::CommandFactory;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// The completion script for `shell`, as text.
pub fn script(shell: clap_complete::Shell) -> String {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "fragscope", &mut buf);
    String::from_utf8(buf).expect("clap_complete writes UTF-8")
}

pub fn run(a: Args, _g: &Global) -> anyhow::Result<Exit> {
    print(&script(a.shell))?;
    Ok(Exit::Ok)
}
