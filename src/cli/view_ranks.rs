//! `fragscope view DIR`: a directory of rank files opens on an overview of
//! the ranks, the per-rank table `fragscope stats DIR` prints (outliers
//! flagged by its rule). Served, a rank's own page is made when a row is
//! opened, by the row's index (`/rank?index=I`), never by a path from the
//! request; written, the page says which command opens a rank.

use super::common::{Exit, Global, expand_inputs};
use super::view::{Args, serve, text, write_page, written_doc};
use crate::analysis::ranks;
use crate::pipeline;
use crate::render::view as rv;
use std::net::SocketAddr;

pub fn run(a: &Args, g: &Global, addr: SocketAddr) -> anyhow::Result<Exit> {
    if a.device.is_some() {
        anyhow::bail!(
            "{}: --device: a directory of ranks opens on all of them",
            a.file
        );
    }
    let files = expand_inputs(std::slice::from_ref(&a.file))?;
    // Unreadable files are named in the report's left-out lines.
    let (r, _) = pipeline::ranks_report(&g.style, &files, &g.load);
    // Each row's file: its label is the path less the directories all
    // files share.
    let labels = ranks::labels(&files);
    let paths: Vec<&String> = r
        .rows
        .iter()
        .filter_map(|row| {
            labels
                .iter()
                .position(|l| *l == row.file)
                .map(|i| &files[i])
        })
        .collect();
    let name = crate::analysis::report::base_name(&a.file);
    let doc = rv::ranks_data(&g.style, &r, a.output.is_none(), &name);
    if let Some(out) = &a.output {
        write_page(out, &a.file, &doc)?;
        return Ok(Exit::Ok);
    }
    serve(a, addr, &doc, |path, q| {
        if path != "/rank" {
            return text(
                404,
                "not found: this server serves /, /api/data and /rank?index=I",
            );
        }
        let Some(i) = q
            .get("index")
            .and_then(|x| x.parse::<usize>().ok())
            .filter(|i| *i < paths.len())
        else {
            return text(400, &format!("/rank?index=I, I in 0..{}", paths.len()));
        };
        match written_doc(g, paths[i], None, a.max_points) {
            Ok(d) => (200, "text/html; charset=utf-8", rv::page(&d).into_bytes()),
            Err(e) => text(
                500,
                &format!("{e:#}").replace(paths[i].as_str(), &r.rows[i].file),
            ),
        }
    })
}
