//! `fragscope view`'s server: the page and its data on the loopback
//! interface, and the answers of `/api/...` from the loaded file alone.

use super::*;

/// Serves the page of `doc` and `doc` itself (`/api/data`) until the
/// process is stopped (Ctrl-C); `api` answers the other paths.
pub(super) fn serve(
    a: &Args,
    addr: SocketAddr,
    doc: &Doc,
    mut api: impl FnMut(&str, &HashMap<&str, &str>) -> Answer,
) -> anyhow::Result<Exit> {
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
    for req in server.incoming_requests() {
        let (status, kind, body) = answer(&req, local, &mut api);
        let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], kind.as_bytes())
            .expect("a valid header");
        let nosniff =
            tiny_http::Header::from_bytes(&b"X-Content-Type-Options"[..], &b"nosniff"[..])
                .expect("a valid header");
        let respond = |reader: Box<dyn std::io::Read>, len: Option<usize>| {
            let resp = tiny_http::Response::new(
                tiny_http::StatusCode(status),
                vec![header, nosniff],
                reader,
                len,
                None,
            );
            // A client that went away is no reason to stop.
            let _ = req.respond(resp);
        };
        let page = match body {
            Body::Bytes(v) => {
                let len = v.len();
                respond(Box::new(std::io::Cursor::new(v)), Some(len));
                continue;
            }
            Body::Page => true,
            Body::Data => false,
        };
        // The page and its data are serialized as they are sent, on
        // another thread, a few blocks ahead: never held whole.
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel(SENT_AHEAD);
            s.spawn(move || {
                let mut w = std::io::BufWriter::with_capacity(SENT_BLOCK, Blocks(tx));
                let _ = if page {
                    rv::write_page(&mut w, doc.title(), doc)
                } else {
                    serde_json::to_writer(&mut w, doc).map_err(std::io::Error::from)
                }
                .and_then(|()| w.flush());
            });
            respond(
                Box::new(Received(rx, std::io::Cursor::new(Vec::new()))),
                None,
            );
        });
    }
    Ok(Exit::Ok)
}

/// Bytes of a page or its data handed from the thread serializing it to
/// the one sending it at a time, and how many may wait to be sent.
const SENT_BLOCK: usize = 64 << 10;
const SENT_AHEAD: usize = 4;

/// The serializing end: each block written is handed over; a client gone
/// (the receiving end dropped) ends the serialization with an error.
struct Blocks(std::sync::mpsc::SyncSender<Vec<u8>>);

impl std::io::Write for Blocks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(buf.to_vec())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The sending end: the blocks as one stream, ended when the serializing
/// end is done.
struct Received(std::sync::mpsc::Receiver<Vec<u8>>, std::io::Cursor<Vec<u8>>);

impl std::io::Read for Received {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.1.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            match self.0.recv() {
                Ok(block) => self.1 = std::io::Cursor::new(block),
                Err(_) => return Ok(0),
            }
        }
    }
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

pub(super) type Answer = (u16, &'static str, Vec<u8>);

pub(super) fn text(status: u16, msg: &str) -> Answer {
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

/// What a request is answered with: the page, its data, or bytes made
/// for it.
enum Body {
    Page,
    Data,
    Bytes(Vec<u8>),
}

fn answer(
    req: &tiny_http::Request,
    local: SocketAddr,
    api: &mut impl FnMut(&str, &HashMap<&str, &str>) -> Answer,
) -> (u16, &'static str, Body) {
    let made = |(status, kind, body): Answer| (status, kind, Body::Bytes(body));
    if !matches!(
        req.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    ) {
        return made(text(405, "only GET"));
    }
    if local.ip().is_loopback() {
        let host = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("Host"))
            .map(|h| h.value.as_str());
        if !loopback_host(host, local) {
            return made(text(
                403,
                "this server answers requests to the loopback address only",
            ));
        }
    }
    let url = req.url();
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let q: HashMap<&str, &str> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    match path {
        "/" | "/index.html" => (200, "text/html; charset=utf-8", Body::Page),
        "/api/data" => (200, "application/json", Body::Data),
        _ => made(api(path, &q)),
    }
}

/// What a server keeps from one scrub to the next: each device's layout of
/// the last scrub, replayed on from there when the next one steps forward,
/// and the stacks' entries already written.
#[derive(Default)]
pub(super) struct Scratch {
    layouts: HashMap<i64, checkpoints::Scratch>,
    stacks: rv::StackTexts,
}

/// A snapshot's states, zoomed series and what-if tables.
pub(super) fn snapshot_api(
    snap: &Snapshot,
    v: &Loaded,
    scratch: &mut Scratch,
    path: &str,
    q: &HashMap<&str, &str>,
    file: &str,
) -> Answer {
    let int = |k: &str| q.get(k).and_then(|x| x.parse::<i64>().ok());
    let device = |d: Option<i64>| d.filter(|d| v.series.contains_key(d));
    // A device's series and the events `from..=to` a window asks for (the
    // whole trace by default).
    let range = |d: i64| {
        let s = &v.series[&d];
        (
            s,
            int("from").unwrap_or(-1),
            int("to").unwrap_or(s.len() as i64),
        )
    };
    match path {
        "/api/state" => {
            let (Some(d), Some(e)) = (device(int("device")), int("event")) else {
                return text(400, "/api/state?device=D&event=E (E = -1 for the start)");
            };
            let n = snap.trace_of(d).len() as i64;
            if e < -1 || e >= n.max(0) && !(n == 0 && e == -1) {
                return text(400, &format!("device {d}: event {e} is not in 0..{n}"));
            }
            let at = (e >= 0).then_some(e as usize);
            let st = v.checkpoints[&d].state_at_in(scratch.layouts.entry(d).or_default(), at);
            let state = rv::StateJson {
                style: &v.style,
                snap,
                state: &st,
                stacks: rv::KeptStacks::Texts(&scratch.stacks),
            };
            (
                200,
                "application/json",
                serde_json::to_vec(&state).expect("a state serializes"),
            )
        }
        "/api/series" => {
            let Some(d) = device(int("device")) else {
                return text(400, "/api/series?device=D&from=E&to=E[&points=N]");
            };
            let (s, from, to) = range(d);
            let points = int("points").unwrap_or(2000).clamp(2, 20_000) as usize;
            json(&v.zooms[&d].window(s, from, to, points))
        }
        "/api/whatif" => {
            let Some(d) = device(int("device")) else {
                return text(400, "/api/whatif?device=D");
            };
            if !crate::sim::trace::simulable_devices(snap).contains(&d) {
                return text(400, &format!("device {d} has no allocations in its trace"));
            }
            match what_if_table(&v.style, file, snap, d) {
                Ok(t) => (200, "text/plain; charset=utf-8", t.into_bytes()),
                Err(e) => text(500, &e),
            }
        }
        "/api/bands" => {
            let Some(d) = device(int("device")) else {
                return text(400, "/api/bands?device=D&from=E&to=E");
            };
            let (s, from, to) = range(d);
            json(&rv::bands::window_of(snap, s, &v.lifetimes[&d], from, to))
        }
        _ => text(
            404,
            "not found: this server serves / and /api/{data,state,series,whatif,bands}",
        ),
    }
}
