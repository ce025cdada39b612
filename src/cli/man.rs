//! `fragscope man`: one roff manual page generated from the command-line
//! definition (clap_mangen): the global synopsis and options, a list of the
//! commands, then a section per command with its synopsis, options and
//! examples, so `man fragscope` alone documents every command.

use super::common::{Exit, Global, print};
use clap::CommandFactory;
use clap_mangen::Man;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write the page to this file (e.g. fragscope.1) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
}

/// Text for a roff text line: backslashes doubled, hyphens as `\-` (so they
/// copy as ASCII), and a leading `.` or `'` kept from reading as a request.
fn roff_text(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// The `after_help` examples as a no-fill block under `heading`.
fn examples(cmd: &clap::Command, heading: &str) -> String {
    let Some(text) = cmd.get_after_help().map(|t| t.to_string()) else {
        return String::new();
    };
    let mut out = format!("{heading}\n.nf\n");
    for line in text.lines() {
        if line.trim_end().ends_with(':') && !line.starts_with(' ') {
            // "Examples:": the heading says it already.
            continue;
        }
        out.push_str(&roff_text(line.strip_prefix("  ").unwrap_or(line)));
        out.push('\n');
    }
    out.push_str(".fi\n");
    out
}

/// A subcommand's synopsis, description, options and examples, as
/// subsections of its own `.SH`.
fn command_section(sub: &clap::Command) -> std::io::Result<String> {
    let mut sub = sub.clone();
    // The global options are documented once, in OPTIONS.
    let globals: Vec<clap::Id> = sub
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().clone())
        .collect();
    for id in &globals {
        sub = sub.mut_arg(id, |a| a.hide(true));
    }
    let man = Man::new(sub.clone());
    let mut buf = Vec::new();
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    let text = String::from_utf8(buf).expect("clap_mangen writes UTF-8");
    let mut out = String::new();
    for line in text.lines() {
        match line.strip_prefix(".SH ") {
            Some(title) => {
                let title = title.trim_matches('"').to_lowercase();
                let mut c = title.chars();
                let cap: String = c
                    .next()
                    .map(|f| f.to_ascii_uppercase())
                    .into_iter()
                    .chain(c)
                    .collect();
                out.push_str(&format!(".SS {cap}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.push_str(&examples(&sub, ".SS Examples"));
    Ok(out)
}

/// The whole page, as roff.
pub fn page() -> std::io::Result<String> {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let man = Man::new(cmd.clone()).title("FRAGSCOPE");
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    let mut out = String::from_utf8(buf).expect("clap_mangen writes UTF-8");

    let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    out.push_str(".SH COMMANDS\n");
    for s in &subs {
        out.push_str(&format!(".TP\n\\fBfragscope {}\\fR\n", s.get_name()));
        if let Some(about) = s.get_about() {
            for line in about.to_string().lines() {
                out.push_str(&roff_text(line));
                out.push('\n');
            }
        }
    }
    for s in &subs {
        out.push_str(&format!(
            ".SH \"FRAGSCOPE {}\"\n",
            s.get_name().to_uppercase()
        ));
        out.push_str(&command_section(s)?);
    }
    out.push_str(&examples(&cmd, ".SH EXAMPLES"));
    let mut buf = Vec::new();
    man.render_version_section(&mut buf)?;
    out.push_str(&String::from_utf8(buf).expect("clap_mangen writes UTF-8"));
    Ok(finish(&out))
}

/// Each clap_mangen section starts with the same two-line string definition;
/// one is enough. Non-ASCII characters (≤, …) become `\[uXXXX]` so that
/// groff and mandoc render them without a UTF-8 preprocessor.
fn finish(page: &str) -> String {
    const AQ: [&str; 2] = [".ie \\n(.g .ds Aq \\(aq", ".el .ds Aq '"];
    let mut seen = false;
    let mut out = String::with_capacity(page.len());
    let mut lines = page.lines().peekable();
    while let Some(line) = lines.next() {
        if line == AQ[0] && lines.peek() == Some(&AQ[1]) {
            lines.next();
            if seen {
                continue;
            }
            seen = true;
            out.push_str(AQ[0]);
            out.push('\n');
            out.push_str(AQ[1]);
            out.push('\n');
            continue;
        }
        for c in line.chars() {
            if c.is_ascii() {
                out.push(c);
            } else {
                out.push_str(&format!("\\[u{:04X}]", c as u32));
            }
        }
        out.push('\n');
    }
    out
}

pub fn run(a: Args, _g: &Global) -> anyhow::Result<Exit> {
    let page = page()?;
    match a.output {
        Some(path) => crate::cli::output::write_atomic(&path, page.as_bytes(), &[])?,
        None => print(&page)?,
    }
    Ok(Exit::Ok)
}
