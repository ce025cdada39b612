//! `fragscope view FILE`: the interactive page, served on the loopback
//! interface (`/` the page, `/api/...` its data), or written as one
//! self-contained file with `-o page.html` (`-o data.json`: the data alone).
//!
//! The figures are the report's: the snapshot is replayed and its report
//! built as `fragscope report` builds it; the page only lays them out. The
//! server answers from the loaded file alone: a request names a device and
//! an event, never a path.

use super::common::{Exit, Global};
use crate::analysis::culprits::{self, GroupBy};
use crate::analysis::report::{self, Report};
use crate::core::style::Style;
use crate::input::{self, Content};
use crate::model::Snapshot;
use crate::pipeline;
use crate::render::view::{self as rv, Detail, DeviceView, View};
use crate::timeline::checkpoints::Checkpoints;
use crate::timeline::{MomentState, Series};
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for
    /// stdin).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Write one self-contained page (`.html`: script, styles and data
    /// inline, no network) or the page's data (`.json`) instead of serving.
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<String>,
    /// Port to serve on (default: a free one).
    #[arg(long, value_name = "P", default_value_t = 0)]
    pub port: u16,
    /// Address to serve on. The default is 127.0.0.1, reachable from this
    /// machine only; any other address serves the file's data to whoever
    /// can reach it, so it must be named here.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Do not open a browser (none is opened without a display either).
    #[arg(long)]
    pub no_open: bool,
    /// Only this device (default: every device).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Points of the timeline's overview; finer levels of detail have 8
    /// times as many each, as far as the page's size budget allows.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_points: usize,
}

/// Everything the page shows, computed once.
struct Loaded<'a> {
    style: Style,
    report: Report,
    series: HashMap<i64, Series>,
    states: HashMap<i64, Vec<MomentState>>,
    peaks: HashMap<i64, HashMap<String, u64>>,
    /// Each device's state checkpoints: a scrub is one of them and a few
    /// thousand events of replay.
    checkpoints: HashMap<i64, Checkpoints<'a>>,
}

fn culprit_options() -> culprits::Options {
    culprits::Options {
        request: None,
        group_by: GroupBy::Site,
        top: 10,
    }
}

/// The states at a device's key moments (in their order), each a checkpoint
/// and a short replay.
fn key_states(cp: &Checkpoints, ats: &[Option<usize>]) -> Vec<MomentState> {
    ats.iter().map(|&at| cp.state_at(at)).collect()
}

fn load<'a>(
    sty: &Style,
    snap: &'a Snapshot,
    l: &input::Loaded,
    device: Option<i64>,
) -> anyhow::Result<Loaded<'a>> {
    let mut series = HashMap::new();
    // The checkpoints are one more replay of each device: made on another
    // thread while the report is built.
    let (report, checkpoints) = std::thread::scope(|s| {
        let cps = s.spawn(|| {
            snap.devices()
                .into_iter()
                .filter(|d| device.is_none_or(|x| x == *d))
                .map(|d| (d, Checkpoints::new(snap, d)))
                .collect::<HashMap<_, _>>()
        });
        let report = pipeline::build_report_with(
            sty,
            snap,
            l,
            device,
            None,
            |_, _| {},
            |r| {
                series.insert(r.device, r.samples.clone());
            },
        );
        let cps = cps.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (report, cps)
    });
    let report = report?;
    let mut states = HashMap::new();
    let mut peaks = HashMap::new();
    for d in &report.devices {
        let ats: Vec<Option<usize>> = d.key_moments.iter().map(|k| k.at).collect();
        let st = key_states(&checkpoints[&d.device], &ats);
        // The call sites' live bytes at the peak of allocated bytes.
        let peak: HashMap<String, u64> = d
            .key_moments
            .iter()
            .position(|k| k.label == "peak allocated")
            .map(|i| {
                let a = culprits::analyze(snap, &st[i], &culprit_options());
                report::culprit_rows(snap, &a)
                    .into_iter()
                    .map(|r| (r.site, r.live_bytes))
                    .collect()
            })
            .unwrap_or_default();
        states.insert(d.device, st);
        peaks.insert(d.device, peak);
    }
    Ok(Loaded {
        style: *sty,
        report,
        series,
        states,
        peaks,
        checkpoints,
    })
}

fn data(snap: &Snapshot, v: &Loaded, served: bool, max_points: usize) -> serde_json::Value {
    let devices = v
        .report
        .devices
        .iter()
        .map(|d| DeviceView {
            report: d,
            series: &v.series[&d.device],
            states: v.states[&d.device].clone(),
            peak_by_site: v.peaks[&d.device].clone(),
        })
        .collect();
    rv::data(&View {
        snap,
        report: &v.report,
        devices,
        served,
        detail: Detail {
            overview: max_points,
            // Served, the overview and one finer level come with the page;
            // the server answers the rest as the page zooms in.
            max_levels: if served { 2 } else { usize::MAX },
            ..Detail::default()
        },
        style: v.style,
    })
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if a.max_points < 2 {
        anyhow::bail!("--max-points: at least 2 points");
    }
    let addr = SocketAddr::new(a.bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)), a.port);
    if a.output.is_some() && (a.bind.is_some() || a.port != 0) {
        anyhow::bail!("-o writes a page and serves nothing: --bind and --port serve one");
    }
    let l = input::load(&a.file, &g.load)?;
    let snap = match &l.content {
        Content::Snapshot(s) => s,
        Content::Profiler(_) => anyhow::bail!(
            "{}: a profiler trace: `fragscope view` shows snapshots only so far; `fragscope report {} -o report.html` shows the trace",
            a.file,
            a.file
        ),
        Content::MemoryTimeline(_) => anyhow::bail!(
            "{}: a memory-timeline export: `fragscope view` shows snapshots only so far; `fragscope report {} -o report.html` shows the categories",
            a.file,
            a.file
        ),
    };
    let v = load(&g.style, snap, &l, a.device)?;
    if let Some(out) = &a.output {
        let inputs = std::slice::from_ref(&a.file);
        let lower = out.to_ascii_lowercase();
        let doc = data(snap, &v, false, a.max_points);
        let bytes = if lower.ends_with(".json") {
            let mut s = serde_json::to_string_pretty(&doc)?;
            s.push('\n');
            s
        } else if lower.ends_with(".html") || lower.ends_with(".htm") {
            rv::page(&doc)
        } else {
            anyhow::bail!(
                "{out}: cannot tell what to write from the extension; use .html (the page) or .json (its data)"
            );
        };
        super::output::write_atomic(out, bytes.as_bytes(), inputs)?;
        return Ok(Exit::Ok);
    }
    serve(snap, &v, addr, &a)
}

/// Serves the page until the process is stopped (Ctrl-C).
fn serve(snap: &Snapshot, v: &Loaded, addr: SocketAddr, a: &Args) -> anyhow::Result<Exit> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow::anyhow!("{addr}: cannot serve there: {e}"))?;
    let local = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| anyhow::anyhow!("{addr}: not an IP address"))?;
    let url = format!("http://{local}/");
    // The URL alone on stdout, for scripts; the rest on stderr.
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{url}")?;
        out.flush()?;
    }
    eprintln!(
        "fragscope: serving {} on {} ({}); Ctrl-C stops",
        a.file,
        url,
        if local.ip().is_loopback() {
            "this machine only"
        } else {
            "every address that reaches it"
        }
    );
    if !a.no_open && has_display() {
        open_browser(&url);
    }
    let page = rv::page(&data(snap, v, true, a.max_points));
    let max_points = a.max_points;
    for req in server.incoming_requests() {
        let (status, kind, body) = answer(snap, v, &page, &req, local, max_points);
        let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], kind.as_bytes())
            .expect("a valid header");
        let nosniff =
            tiny_http::Header::from_bytes(&b"X-Content-Type-Options"[..], &b"nosniff"[..])
                .expect("a valid header");
        let resp = tiny_http::Response::from_data(body)
            .with_status_code(status)
            .with_header(header)
            .with_header(nosniff);
        // A client that went away is no reason to stop.
        let _ = req.respond(resp);
    }
    Ok(Exit::Ok)
}

fn has_display() -> bool {
    cfg!(target_os = "macos")
        || cfg!(windows)
        || std::env::var_os("DISPLAY").is_some_and(|v| !v.is_empty())
        || std::env::var_os("WAYLAND_DISPLAY").is_some_and(|v| !v.is_empty())
}

fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if spawned.is_err() {
        eprintln!("fragscope: could not start {program}; open {url} in a browser");
    }
}

type Answer = (u16, &'static str, Vec<u8>);

fn text(status: u16, msg: &str) -> Answer {
    (
        status,
        "text/plain; charset=utf-8",
        format!("{msg}\n").into_bytes(),
    )
}

fn json(v: &serde_json::Value) -> Answer {
    (
        200,
        "application/json",
        serde_json::to_vec(v).expect("JSON values serialize"),
    )
}

/// A `Host` header a page served on a loopback address may be reached by:
/// another name pointing at 127.0.0.1 (DNS rebinding) is refused.
fn loopback_host(host: Option<&str>, local: SocketAddr) -> bool {
    let Some(h) = host else { return true };
    let port = local.port();
    [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("{local}"),
    ]
    .iter()
    .any(|ok| h.eq_ignore_ascii_case(ok))
}

fn answer(
    snap: &Snapshot,
    v: &Loaded,
    page: &str,
    req: &tiny_http::Request,
    local: SocketAddr,
    max_points: usize,
) -> Answer {
    if !matches!(
        req.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    ) {
        return text(405, "only GET");
    }
    if local.ip().is_loopback() {
        let host = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("Host"))
            .map(|h| h.value.as_str());
        if !loopback_host(host, local) {
            return text(
                403,
                "this server answers requests to the loopback address only",
            );
        }
    }
    let url = req.url();
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let q: HashMap<&str, &str> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let int = |k: &str| q.get(k).and_then(|x| x.parse::<i64>().ok());
    let device = |d: Option<i64>| d.filter(|d| v.series.contains_key(d));
    match path {
        "/" | "/index.html" => (200, "text/html; charset=utf-8", page.as_bytes().to_vec()),
        "/api/data" => json(&data(snap, v, true, max_points)),
        "/api/state" => {
            let (Some(d), Some(e)) = (device(int("device")), int("event")) else {
                return text(400, "/api/state?device=D&event=E (E = -1 for the start)");
            };
            let n = snap.trace_of(d).len() as i64;
            if e < -1 || e >= n.max(0) && !(n == 0 && e == -1) {
                return text(400, &format!("device {d}: event {e} is not in 0..{n}"));
            }
            let at = (e >= 0).then_some(e as usize);
            json(&rv::state(&v.style, snap, &v.checkpoints[&d].state_at(at)))
        }
        "/api/series" => {
            let Some(d) = device(int("device")) else {
                return text(400, "/api/series?device=D&from=E&to=E[&points=N]");
            };
            let s = &v.series[&d];
            let from = int("from").unwrap_or(-1);
            let to = int("to").unwrap_or(s.len() as i64);
            let points = int("points").unwrap_or(2000).clamp(2, 20_000) as usize;
            json(&rv::window(s, from, to, points))
        }
        _ => text(
            404,
            "not found: this server serves / and /api/{data,state,series}",
        ),
    }
}
