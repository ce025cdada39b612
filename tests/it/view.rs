//! `fragscope view`: the data API's JSON (golden), the self-contained page,
//! the server's answers (loopback only unless `--bind`, nothing outside its
//! data), and the page itself in a real headless Chromium driven over
//! WebDriver (skipped with a note when chromium or chromedriver is absent,
//! failed under `CI=true`).

use crate::golden;
use crate::util::{self, fixture, run};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OOM_FIXTURE: &str = "view_oom_two_devices.pickle";

pub(crate) fn data_of(file: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data.json");
    let mut args = vec!["view", file, "-o", out.to_str().unwrap()];
    args.extend(extra);
    run(&args).expect_code(0);
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

// ---- the data API ------------------------------------------------------

#[test]
fn data_api_golden() {
    for (fixture_name, golden_name) in [
        ("expandable_oom_proto5.pickle", "view-expandable-oom.json"),
        ("pools_pending_proto4.pickle", "view-pools-pending.json"),
        ("gap_fragmented_moment.json", "view-gap-fragmented.json"),
        ("cpu_only_trace.json.gz", "view-cpu-only-trace.json"),
        ("gpu_memory_trace.json", "view-gpu-memory-trace.json"),
        (
            "memory_timeline_after.raw.json",
            "view-memory-timeline.json",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("data.json");
        run(["view", &fixture(fixture_name), "-o", out.to_str().unwrap()]).expect_code(0);
        golden::check(golden_name, &std::fs::read(&out).unwrap());
        assert!(util::leftovers(dir.path()).is_empty());
    }
}

/// The figures of the data are those `timeline --json` and `report` print.
#[test]
fn data_matches_timeline_and_report() {
    let file = fixture(OOM_FIXTURE);
    let d = data_of(&file, &["--max-points", "64"]);
    let tl: Value =
        serde_json::from_str(&run(["timeline", "--json", &file]).expect_code(0).stdout()).unwrap();
    let dev0 = &d["devices"][0];
    let tdev = &tl["devices"][0];
    // Key moments: same labels, events and figures.
    let km = dev0["key_moments"].as_array().unwrap();
    let tkm = tdev["key_moments"].as_array().unwrap();
    assert_eq!(km.len(), tkm.len());
    for (a, b) in km.iter().zip(tkm) {
        assert_eq!(a["label"], b["label"]);
        assert_eq!(a["event"].as_i64().unwrap(), b["at"].as_i64().unwrap_or(-1));
        assert_eq!(a["figures"]["reserved"], b["sample"]["reserved"]);
        assert_eq!(a["figures"]["largest_gap"], b["sample"]["largest_free_gap"]);
        // The segment map at the moment holds what the figures say.
        let st = &a["state"];
        let reserved: u64 = st["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["size"].as_u64().unwrap())
            .sum();
        assert_eq!(
            reserved,
            b["sample"]["reserved"].as_u64().unwrap(),
            "{}",
            a["label"]
        );
        let text = fragscope::core::units::fmt_binary(reserved);
        assert_eq!(a["figures"]["reserved_text"], json!(text));
    }
    // The finest level is the whole series; every level keeps the peaks.
    let samples = tdev["samples"].as_array().unwrap();
    let levels = dev0["levels"].as_array().unwrap();
    assert!(levels.len() >= 2, "a coarse level and the whole series");
    let last = levels.last().unwrap();
    assert_eq!(last["full"], json!(true));
    assert_eq!(last["points"].as_u64().unwrap() as usize, samples.len());
    let peak = samples
        .iter()
        .map(|s| s["reserved"].as_u64().unwrap())
        .max()
        .unwrap();
    for l in levels {
        let m = l["reserved"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .max();
        assert_eq!(m, Some(peak));
    }
    assert!(levels[0]["points"].as_u64().unwrap() <= 64);
    // The OOM: its verdict line is report's.
    let oom = &dev0["ooms"][0];
    let verdict: Vec<String> = serde_json::from_value(d["verdict"].clone()).unwrap();
    let line = oom["verdict"][0].as_str().unwrap();
    assert!(verdict.iter().any(|v| v == line));
    assert!(
        line.starts_with("Device 0: out of memory at event "),
        "{line}"
    );
    let oom_moment = km.iter().find(|k| k["label"] == "oom #1").unwrap();
    assert_eq!(oom_moment["state"]["failed_request"], oom["request"]);
    // The untraced device shows its recorded state only.
    let dev1 = &d["devices"][1];
    assert_eq!(dev1["traced"], json!(false));
    assert_eq!(dev1["key_moments"][0]["label"], json!("recorded state"));
}

/// A long trace: the levels stay within the budget and keep every peak.
#[test]
fn levels_are_bounded_and_keep_peaks() {
    let dir = tempfile::tempdir().unwrap();
    let snap = long_trace(dir.path());
    let d = data_of(snap.to_str().unwrap(), &["--max-points", "500"]);
    let levels = d["devices"][0]["levels"].as_array().unwrap();
    let counts: Vec<u64> = levels
        .iter()
        .map(|l| l["points"].as_u64().unwrap())
        .collect();
    // 500, 4000, 32000, then the whole series.
    assert_eq!(counts.len(), 4, "{counts:?}");
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
    assert!(
        counts[0] <= 500 && counts[1] <= 4000 && counts[2] <= 32000,
        "{counts:?}"
    );
    let maxima: Vec<u64> = levels
        .iter()
        .map(|l| {
            l["reserved"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .max()
                .unwrap()
        })
        .collect();
    assert!(maxima.windows(2).all(|w| w[0] == w[1]), "{maxima:?}");
    let km = d["devices"][0]["key_moments"].as_array().unwrap();
    let peak = km.iter().find(|k| k["label"] == "peak reserved").unwrap();
    assert_eq!(json!(maxima[0]), peak["figures"]["reserved"]);
}

#[test]
fn page_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("page.html");
    let file = fixture(OOM_FIXTURE);
    run(["view", &file, "-o", out.to_str().unwrap()]).expect_code(0);
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(util::leftovers(dir.path()).is_empty());
    // Nothing loaded from elsewhere: no source, no stylesheet link, no
    // network address.
    for bad in [
        "src=",
        "<link rel=\"stylesheet\"",
        "http://",
        "https://",
        "//cdn",
        "{{",
    ] {
        assert!(!page.contains(bad), "the page holds {bad:?}");
    }
    let start = page
        .find("<script id=\"fragscope-data\" type=\"application/json\">")
        .unwrap();
    let rest = &page[start..];
    let body = &rest[rest.find('>').unwrap() + 1..rest.find("</script>").unwrap()];
    let embedded: Value = serde_json::from_str(body).unwrap();
    assert_eq!(embedded, data_of(&file, &[]));
    assert_eq!(embedded["served"], json!(false));
}

#[test]
fn bad_inputs_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pickle");
    std::fs::write(&junk, b"\x80\x04not a pickle").unwrap();
    let j = junk.to_str().unwrap();
    let r = run(["view", j, "-o", dir.path().join("p.html").to_str().unwrap()]);
    r.expect_code(2);
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
    assert!(r.stderr().contains(j));
    let r = run([
        "view",
        &fixture(OOM_FIXTURE),
        "-o",
        dir.path().join("p.txt").to_str().unwrap(),
    ]);
    r.expect_code(2);
    assert!(r.stderr().contains(".html"));
    // A trace of CPU memory alone: a page that says why there is no map.
    let d = data_of(&fixture("cpu_only_trace.json.gz"), &[]);
    assert_eq!(d["kind"], "profiler_trace");
    assert!(d["no_segment_map"].as_str().unwrap().contains("CPU"), "{d}");
}

// ---- the server --------------------------------------------------------

/// `fragscope view FILE --no-open …` running; stopped when dropped.
pub(crate) struct Server {
    child: Child,
    _stdout: BufReader<std::process::ChildStdout>,
    url: String,
    addr: SocketAddr,
}

impl Server {
    pub(crate) fn start(file: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(util::bin())
            .args(["view", file, "--no-open"])
            .args(extra)
            .env_remove("DISPLAY")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let url = line.trim().to_string();
        assert!(
            url.starts_with("http://") && url.ends_with('/'),
            "first line: {url:?}"
        );
        let addr: SocketAddr = url["http://".len()..url.len() - 1].parse().unwrap();
        Server {
            child,
            _stdout: stdout,
            url,
            addr,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange on `addr`: status and body.
fn http(
    addr: SocketAddr,
    method: &str,
    target: &str,
    host: &str,
    body: Option<&str>,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read the head, then as many bytes as it announces: a server may keep
    // the connection open whatever the request asked.
    let mut r = BufReader::new(s);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let mut body = Vec::new();
    if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    } else if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub(crate) fn get(srv: &Server, target: &str) -> (u16, String) {
    http(srv.addr, "GET", target, &srv.addr.to_string(), None)
}

/// The served page and its data are serialized as they are sent: the page
/// holds the data `/api/data` answers (with `<` written `\u003c`), the
/// same bytes on every request, and a client gone mid-way stops nothing.
#[test]
fn served_page_and_data_are_one_document() {
    let file = fixture(OOM_FIXTURE);
    let srv = Server::start(&file, &[]);
    let (code, data) = get(&srv, "/api/data");
    assert_eq!(code, 200);
    let (code, page) = get(&srv, "/");
    assert_eq!(code, 200);
    let open = "<script id=\"fragscope-data\" type=\"application/json\">";
    let start = page.find(open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    assert_eq!(page[start..end], data.replace('<', "\\u003c"));
    assert!(
        data.contains('<'),
        "a stack names <module>: the escape is tried"
    );
    // A client that reads a few bytes and goes.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    write!(s, "GET / HTTP/1.1\r\nHost: {}\r\n\r\n", srv.addr).unwrap();
    let _ = s.read(&mut [0; 16]).unwrap();
    drop(s);
    assert_eq!(get(&srv, "/api/data"), (200, data.clone()));
    assert_eq!(get(&srv, "/").1, page);
}

#[test]
fn server_serves_only_its_data() {
    let file = fixture(OOM_FIXTURE);
    let srv = Server::start(&file, &[]);
    assert!(srv.addr.ip().is_loopback(), "{}", srv.url);
    let (code, page) = get(&srv, "/");
    assert_eq!(code, 200);
    assert!(page.contains("fragscope-data"));
    for bad in [
        "/../Cargo.toml",
        "/etc/passwd",
        "/%2e%2e/Cargo.toml",
        "/api/../../Cargo.toml",
        "//etc/passwd",
        "/fixtures/view_oom_two_devices.pickle",
        "/api/",
        "/index.html/../Cargo.toml",
    ] {
        let (code, body) = get(&srv, bad);
        assert_eq!(code, 404, "{bad}: {body}");
        assert!(
            !body.contains("[package]") && !body.contains("root:"),
            "{bad}"
        );
    }
    // Another host name for this address (DNS rebinding) is refused.
    let (code, _) = http(srv.addr, "GET", "/", "attacker.example", None);
    assert_eq!(code, 403);
    let (code, _) = http(srv.addr, "POST", "/", &srv.addr.to_string(), Some("{}"));
    assert_eq!(code, 405);
    // The state after any event is the replay's: its segments sum to the
    // reserved bytes `timeline --json` gives after that event.
    let tl: Value =
        serde_json::from_str(&run(["timeline", "--json", &file]).expect_code(0).stdout()).unwrap();
    let samples = tl["devices"][0]["samples"].as_array().unwrap();
    for e in [0usize, 57, 200, 401] {
        let (code, body) = get(&srv, &format!("/api/state?device=0&event={e}"));
        assert_eq!(code, 200, "{body}");
        let st: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(st["event"], json!(e));
        let reserved: u64 = st["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["size"].as_u64().unwrap())
            .sum();
        assert_eq!(json!(reserved), samples[e + 1]["reserved"], "event {e}");
    }
    for bad in [
        "/api/state?device=0&event=402",
        "/api/state?device=7&event=1",
        "/api/state?device=0",
    ] {
        assert_eq!(get(&srv, bad).0, 400, "{bad}");
    }
    // A zoomed window: every event of it when it is short.
    let (code, body) = get(&srv, "/api/series?device=0&from=100&to=139&points=100");
    assert_eq!(code, 200);
    let w: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(w["full"], json!(true));
    let events: Vec<i64> = serde_json::from_value(w["event"].clone()).unwrap();
    assert_eq!(events, (100..=139).collect::<Vec<i64>>());
    assert_eq!(w["reserved"][0], samples[101]["reserved"]);
}

/// The address of this machine on its default route, when it has one.
fn non_loopback_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A segment map with each block's stack index replaced by the entry it
/// names in `stacks`, and no list of its own.
fn with_stacks_inline(state: &Value, stacks: &Value) -> Value {
    let mut st = state.clone();
    st.as_object_mut().unwrap().remove("stacks");
    for seg in st["segments"].as_array_mut().unwrap() {
        for b in seg["blocks"].as_array_mut().unwrap() {
            if let Some(i) = b[4].as_u64() {
                b[4] = stacks[i as usize].clone();
                assert!(b[4].is_object(), "stack index {i} outside its list");
            }
        }
    }
    st
}

/// A scrub names its stacks from texts kept across scrubs, in a list of
/// its own: whatever was asked before, each key moment's state is the one
/// the data document holds, made afresh there and naming the document's
/// one list of stacks.
#[test]
fn scrubs_in_any_order_give_the_data_documents_states() {
    let file = fixture(OOM_FIXTURE);
    let srv = Server::start(&file, &[]);
    let (_, body) = get(&srv, "/api/data");
    let data: Value = serde_json::from_str(&body).unwrap();
    let (mut asked, mut named) = (0, 0);
    for dev in data["devices"].as_array().unwrap() {
        let d = &dev["device"];
        let km = dev["key_moments"].as_array().unwrap();
        let events: Vec<&Value> = km.iter().map(|k| &k["event"]).collect();
        for e in events.iter().chain(events.iter().rev()) {
            let (code, body) = get(&srv, &format!("/api/state?device={d}&event={e}"));
            assert_eq!(code, 200, "{body}");
            let st: Value = serde_json::from_str(&body).unwrap();
            let want = km.iter().find(|k| &&k["event"] == e).unwrap();
            assert!(want["state"].get("stacks").is_none());
            assert_eq!(
                with_stacks_inline(&st, &st["stacks"]),
                with_stacks_inline(&want["state"], &data["stacks"]),
                "device {d}, event {e}"
            );
            asked += 1;
            named += st["stacks"].as_array().unwrap().len();
        }
    }
    assert!(
        asked >= 4 && named > 0,
        "{asked} scrubs naming {named} stacks"
    );
}

#[test]
fn server_is_loopback_only_unless_bound() {
    let file = fixture("expandable_oom_proto5.pickle");
    let Some(ip) = non_loopback_ip() else {
        eprintln!(
            "note: no address besides loopback on this machine; the reachability half of this test is skipped"
        );
        let srv = Server::start(&file, &[]);
        assert!(srv.addr.ip().is_loopback());
        return;
    };
    let srv = Server::start(&file, &[]);
    assert!(srv.addr.ip().is_loopback(), "{}", srv.url);
    let outside = SocketAddr::new(ip, srv.addr.port());
    assert!(
        TcpStream::connect_timeout(&outside, Duration::from_secs(2)).is_err(),
        "the default server answers on {outside}"
    );
    drop(srv);
    let srv = Server::start(&file, &["--bind", "0.0.0.0"]);
    let outside = SocketAddr::new(ip, srv.addr.port());
    let (code, _) = http(outside, "GET", "/", &outside.to_string(), None);
    assert_eq!(code, 200, "--bind 0.0.0.0 serves {outside}");
    // -o serves nothing, so --bind and --port make no sense with it.
    let dir = tempfile::tempdir().unwrap();
    let r = run([
        "view",
        &file,
        "--bind",
        "0.0.0.0",
        "-o",
        dir.path().join("p.html").to_str().unwrap(),
    ]);
    r.expect_code(2);
}

// ---- the page in a browser ---------------------------------------------

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless Chromium session over WebDriver; `None` (with a note) when
/// chromium or chromedriver is not installed, a failure under `CI=true`.
struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    fn start() -> Option<Browser> {
        if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{CHROMIUM} and {CHROMEDRIVER} are needed in CI (apt-get install -y chromium chromium-driver)"
            );
            eprintln!(
                "note: {CHROMIUM} or {CHROMEDRIVER} absent; browser test skipped (apt-get install -y chromium chromium-driver)"
            );
            return None;
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let t0 = Instant::now();
        while TcpStream::connect(addr).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1400,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        let mut b = Browser {
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let v = b.call("POST", "/session", Some(caps));
        b.session = v["sessionId"]
            .as_str()
            .expect("a WebDriver session")
            .to_string();
        Some(b)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string());
        let (code, text) = http(
            self.addr,
            method,
            path,
            &self.addr.to_string(),
            body.as_deref(),
        );
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: {code} {text}"));
        assert_eq!(code, 200, "{method} {path}: {v}");
        v["value"].clone()
    }
    fn cmd(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}/{what}", self.session), body)
    }
    fn open(&self, url: &str) {
        self.cmd("POST", "url", Some(json!({ "url": url })));
    }
    fn js(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }
    fn find(&self, css: &str) -> String {
        let v = self.cmd(
            "POST",
            "element",
            Some(json!({"using": "css selector", "value": css})),
        );
        v.as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }
    fn click(&self, css: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("element/{id}/click"), Some(json!({})));
    }
    fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.cmd(
            "POST",
            &format!("element/{id}/value"),
            Some(json!({ "text": text })),
        );
    }
    fn text(&self, css: &str) -> String {
        let id = self.find(css);
        self.cmd("GET", &format!("element/{id}/text"), None)
            .as_str()
            .unwrap()
            .to_string()
    }
    fn actions(&self, actions: Value) {
        self.cmd("POST", "actions", Some(json!({ "actions": actions })));
    }
    fn mouse_to(&self, x: f64, y: f64) {
        self.actions(json!([{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x.round() as i64, "y": y.round() as i64}]}]));
    }
    fn wheel(&self, x: f64, y: f64, dy: i64, times: usize) {
        let ticks: Vec<Value> = (0..times)
            .map(|_| json!({"type": "scroll", "x": x.round() as i64, "y": y.round() as i64, "deltaX": 0, "deltaY": dy, "duration": 0, "origin": "viewport"}))
            .collect();
        self.actions(json!([{"type": "wheel", "id": "wheel", "actions": ticks}]));
    }
    fn key(&self, key: &str) {
        self.actions(json!([{"type": "key", "id": "kb", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]));
    }
    /// Console messages at level SEVERE (errors, failed loads) since the
    /// last call.
    fn errors(&self) -> Vec<String> {
        let v = self.cmd("POST", "se/log", Some(json!({"type": "browser"})));
        v.as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or("").to_string())
            .collect()
    }
    fn wait_for(&self, what: &str, script: &str) -> Value {
        let t0 = Instant::now();
        loop {
            let v = self.js(script);
            if !v.is_null() && v != json!(false) {
                return v;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                "localhost",
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// Client coordinates of the middle of the first live block with a call
/// site in the shown segment map, with that block's site and size.
const FIND_BLOCK: &str = r#"
const V = window.fragscopeView, S = V.state, L = S.layout;
const c = document.getElementById('segmap');
c.scrollIntoView({block: 'center'});
const r = c.getBoundingClientRect();
for (const it of L.placed) {
  for (const b of it.seg.blocks) {
    if (b[3] !== 0 || b[4] == null) continue;
    const p0 = it.p0 + b[0] * it.scale, p1 = p0 + b[1] * it.scale;
    const row = Math.floor(p0 / L.w);
    if (p1 - p0 < 6 || Math.floor(p1 / L.w) !== row) continue;
    const x = p0 - row * L.w + (p1 - p0) / 2;
    return {x: r.left + x, y: r.top + row * 23 + 9, site: S.state.stacks[b[4]].site, size: V.fmtBytes(b[1])};
  }
}
return null;
"#;

/// Client coordinates of the middle of a band with a call site on the
/// memory timeline, with its site and size.
const FIND_BAND: &str = r#"
const V = window.fragscopeView, S = V.state, G = S.bandGeom;
const c = document.getElementById('timeline');
c.scrollIntoView({block: 'center'});
const r = c.getBoundingClientRect();
if (!G) return null;
let best = null;
for (const p of G.geom) {
  if (p.x1 - p.x0 < 3) continue;
  for (const [j, lo, hi] of p.col) {
    const b = G.win.bands[j];
    const h = G.yOf(lo) - G.yOf(hi);
    if (b[4] == null || h < 4 || (best && best.h >= h)) continue;
    best = {x: r.left + (p.x0 + p.x1) / 2, y: r.top + (G.yOf(lo) + G.yOf(hi)) / 2, h,
            site: G.stacks[b[4]].site, size: V.fmtBytes(b[2])};
  }
}
return best;
"#;

/// The pointer to `at` (`x`, `y`): the tooltip's text.
fn hover(b: &Browser, at: &Value) -> String {
    b.mouse_to(at["x"].as_f64().unwrap(), at["y"].as_f64().unwrap());
    b.wait_for(
        "the tooltip",
        "return !document.getElementById('tip').hidden",
    );
    b.text("#tip")
}

const PAGE_READY: &str =
    "return window.fragscopeView && window.fragscopeView.state.layout !== null";

/// What the issue asks of the page, on the OOM fixture, served or written
/// with `-o`: open on the OOM, hover a band and read its call site, pin it,
/// hover a block, search a call site and see bands and blocks highlighted,
/// scrub to the OOM and find the failed request beside the largest gap,
/// filter by pool and stream, select another device.
fn check_oom_page(b: &Browser, data: &Value, served: bool) {
    let how = if served { "served" } else { "-o" };
    b.wait_for("the page", PAGE_READY);
    assert_eq!(
        b.js("return window.fragscopeView.data.served"),
        json!(served)
    );
    // It opens on the OOM: the failed request and the verdict are shown.
    let oom = &data["devices"][0]["ooms"][0];
    let request = oom["request_text"].as_str().unwrap();
    assert_eq!(
        request,
        fragscope::core::units::fmt_binary(oom["request"].as_u64().unwrap())
    );
    b.click("button[data-moment='0']");
    assert_eq!(
        b.js("return document.getElementById('oom').hidden"),
        json!(true)
    );
    let oom_button = data["devices"][0]["key_moments"]
        .as_array()
        .unwrap()
        .iter()
        .position(|k| k["label"] == "oom #1")
        .unwrap();
    b.click(&format!("button[data-moment='{oom_button}']"));
    let failed = b.text("#failed-request");
    assert!(
        failed.contains(&format!("Failed request: {request}")),
        "{failed}"
    );
    let panel = b.text("#oom");
    assert!(
        panel.contains(oom["verdict"][0].as_str().unwrap()),
        "{panel}"
    );
    assert!(b.text("#state-label").contains("oom #1"));

    // Hover a band of the timeline: its call site and size; a click pins it.
    let band = b.js(FIND_BAND);
    assert!(!band.is_null(), "{how}: a band with a call site");
    let tip = hover(b, &band);
    assert!(
        tip.contains(band["site"].as_str().unwrap()),
        "{how}: {tip} / {band}"
    );
    assert!(
        tip.contains(band["size"].as_str().unwrap()),
        "{how}: {tip} / {band}"
    );
    assert!(
        tip.contains("allocated at") && tip.contains("freed"),
        "{how}: {tip}"
    );
    b.actions(
        json!([{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
        "actions": [{"type": "pointerDown", "button": 0}, {"type": "pointerUp", "button": 0}]}]),
    );
    b.wait_for(
        "a pinned band",
        "return window.fragscopeView.state.pinned !== null",
    );
    b.mouse_to(5.0, 5.0);
    assert_eq!(
        b.js("return document.getElementById('tip').hidden"),
        json!(false),
        "{how}: pinned"
    );
    b.key("\u{E00C}"); // Escape
    assert_eq!(
        b.js("return window.fragscopeView.state.pinned"),
        json!(null)
    );

    // Scrub to the OOM (the slider's last position is the OOM's event):
    // the failed request drawn at scale beside the largest free gap, the
    // culprits' blocks outlined.
    let oom = &data["devices"][0]["ooms"][0];
    b.click("button[data-moment='0']");
    b.js("document.getElementById('scrub').focus()");
    b.key("\u{E010}"); // End
    b.wait_for(
        "the OOM",
        "return document.getElementById('segmap').dataset.failed !== ''",
    );
    let failed = b.text("#failed-request");
    assert!(
        failed.contains(oom["request_text"].as_str().unwrap()),
        "{how}: {failed}"
    );
    let drawn = b.js("const d = document.getElementById('segmap').dataset; return [Number(d.failed), window.fragscopeView.fmtBytes(Number(d.gap)), Number(d.culprits)]");
    assert_eq!(drawn[0], oom["request"], "{how}");
    assert_eq!(drawn[1], oom["largest_gap_text"], "{how}");
    assert!(drawn[2].as_u64().unwrap() > 0, "{how}: culprits outlined");
    // Hover a block: its call site and size in the tooltip.
    let blk = b.js(FIND_BLOCK);
    assert!(!blk.is_null(), "a live block with a call site at the OOM");
    let tip = hover(b, &blk);
    assert!(tip.contains(blk["site"].as_str().unwrap()), "{tip} / {blk}");
    assert!(tip.contains(blk["size"].as_str().unwrap()), "{tip} / {blk}");

    // Search a call site: its blocks and its table row are highlighted.
    let site = data["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"].as_str().unwrap().contains(".py"))
        .unwrap()["site"]
        .as_str()
        .unwrap()
        .to_string();
    b.type_into("#search", &site);
    let n = b.wait_for("matches", "const n = Number(document.getElementById('match-count').dataset.blocks); return n > 0 ? n : null");
    assert!(n.as_u64().unwrap() > 0);
    let bands = b.js("return Number(document.getElementById('timeline').dataset.bandMatches)");
    assert!(
        bands.as_u64().unwrap() > 0,
        "{how}: bands of {site} highlighted"
    );
    let rows = b.js(
        "return [...document.querySelectorAll('#sites tr.match td.site')].map(t => t.textContent)",
    );
    assert!(
        rows.as_array().unwrap().iter().any(|r| r == &json!(site)),
        "{rows}"
    );

    // One pool and stream: the map and the table show only theirs.
    let place = b.js("const o = [...document.getElementById('place').options].map(o => o.value).filter(v => v); return o.length > 1 ? o[1] : null");
    assert!(!place.is_null(), "{how}: two places at the OOM");
    b.js(&format!("const s = document.getElementById('place'); s.value = {place}; s.dispatchEvent(new Event('change'));"));
    let shown = b.js("const S = window.fragscopeView.state; return [S.layout.placed.map(p => p.seg.place), [...document.querySelectorAll('#sites tbody tr')].length, S.state.segments.length]");
    let places = shown[0].as_array().unwrap();
    assert!(
        !places.is_empty() && places.iter().all(|p| p == &place),
        "{how}: {shown}"
    );
    assert!(
        (places.len() as u64) < shown[2].as_u64().unwrap(),
        "{how}: {shown}"
    );
    let rows = data["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["places"].as_array().unwrap().contains(&place))
        .count();
    assert_eq!(shown[1], json!(rows), "{how}");
    b.js("const s = document.getElementById('place'); s.value = ''; s.dispatchEvent(new Event('change'));");

    // Another device: its recorded state.
    b.click("#device option[value='1']");
    b.wait_for(
        "device 1",
        "return window.fragscopeView.state.dev.device === 1",
    );
    assert!(b.text("#state-label").contains("the recorded state"));
    assert_eq!(
        b.js("return document.querySelectorAll('#moments button').length"),
        json!(1)
    );
    assert_eq!(b.errors(), Vec::<String>::new());
}

fn oom_page(dir: &Path) -> (std::path::PathBuf, Value) {
    let page = dir.join("page.html");
    let file = fixture(OOM_FIXTURE);
    run([
        "view",
        &file,
        "--max-points",
        "32",
        "-o",
        page.to_str().unwrap(),
    ])
    .expect_code(0);
    (page, data_of(&file, &["--max-points", "32"]))
}

/// A long trace's page, zoomed with the wheel: finer levels of the series
/// and finer bands (a finer tier of the page, or a window fetched from the
/// server) come into view.
fn check_zoom(b: &Browser, served: bool) {
    b.wait_for("the page", PAGE_READY);
    b.js("document.getElementById('timeline').scrollIntoView({block: 'center'})");
    let vars = "const d = document.getElementById('detail').dataset, t = document.getElementById('timeline').dataset, S = window.fragscopeView.state; const v = [Number(d.level), Number(d.points), S.x1 - S.x0, Number(t.bandTier), Number(t.bandSpan)];";
    let before = b.js(&format!("{vars} return v"));
    let r = b.js("const r = document.getElementById('timeline').getBoundingClientRect(); return [r.left + r.width * 0.6, r.top + r.height / 2]");
    b.wheel(r[0].as_f64().unwrap(), r[1].as_f64().unwrap(), -100, 20);
    let tiers = b
        .js("return window.fragscopeView.state.dev.bands.tiers.length")
        .as_i64()
        .unwrap();
    // Served: a window fetched for the view; written: a finer tier.
    let want_tier = if served { tiers } else { 2 };
    let after = b.wait_for(
        "a zoomed view",
        &format!(
            "{vars} return v[2] < 20000 && v[3] >= {want_tier} && S.inflight === 0 ? v : null"
        ),
    );
    let density = |v: &Value| v[1].as_f64().unwrap() / v[2].as_f64().unwrap();
    assert!(
        density(&after) > density(&before) * 2.0,
        "{before} → {after}"
    );
    assert!(
        after[3].as_i64() > before[3].as_i64(),
        "finer bands: {before} → {after}"
    );
    assert!(
        after[4].as_f64().unwrap() < before[4].as_f64().unwrap() / 4.0,
        "{before} → {after}"
    );
    if !served {
        assert!(after[0].as_i64() > before[0].as_i64(), "{before} → {after}");
    }
}

fn long_trace(dir: &Path) -> std::path::PathBuf {
    let long = dir.join("long.pickle");
    run([
        "synth",
        "--events",
        "60000",
        "--seed",
        "2",
        "-o",
        long.to_str().unwrap(),
    ])
    .expect_code(0);
    long
}

#[test]
fn browser_standalone_page() {
    let Some(b) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (page, data) = oom_page(dir.path());
    b.open(&file_url(&page));
    check_oom_page(&b, &data, false);
    assert_eq!(b.errors(), Vec::<String>::new());

    // The formatter the page draws with is the terminal's.
    for n in [
        0u64,
        1023,
        1024,
        1152,
        1536,
        2_085_376,
        2_088_960,
        1 << 30,
        3 * (1 << 29) + 5,
        1 << 40,
        u32::MAX as u64 * 977,
    ] {
        let js = b.js(&format!("return window.fragscopeView.fmtBytes({n})"));
        assert_eq!(js, json!(fragscope::core::units::fmt_binary(n)), "{n}");
    }
    for x in [0.0, 0.0025, 0.274, 0.5, 0.99949, 0.0075, 1.0] {
        let js = b.js(&format!("return window.fragscopeView.fmtPct({x})"));
        assert_eq!(js, json!(fragscope::core::units::fmt_pct(x)), "{x}");
    }

    let long = long_trace(dir.path());
    run([
        "view",
        long.to_str().unwrap(),
        "--max-points",
        "500",
        "-o",
        page.to_str().unwrap(),
    ])
    .expect_code(0);
    b.open(&file_url(&page));
    check_zoom(&b, false);
    assert_eq!(b.errors(), Vec::<String>::new());
}

#[test]
fn browser_served_page() {
    let Some(b) = Browser::start() else { return };
    let file = fixture(OOM_FIXTURE);
    let srv = Server::start(&file, &["--max-points", "16"]);
    b.open(&srv.url);
    b.wait_for(
        "the page",
        "return window.fragscopeView && window.fragscopeView.state.layout !== null",
    );
    assert_eq!(b.js("return window.fragscopeView.data.served"), json!(true));
    // Scrub to an event that is no key moment: the server replays to it.
    b.click("button[data-moment='0']");
    b.js("document.getElementById('scrub').focus()");
    for _ in 0..3 {
        b.key("\u{E014}"); // ArrowRight
    }
    let label = b.wait_for("event 2", "const t = document.getElementById('state-label').textContent; return t.startsWith('event 2,') ? t : null");
    assert!(label.as_str().unwrap().starts_with("event 2,"), "{label}");
    let reserved =
        b.js("return window.fragscopeView.state.state.segments.reduce((s, x) => s + x.size, 0)");
    let (_, body) = get(&srv, "/api/state?device=0&event=2");
    let st: Value = serde_json::from_str(&body).unwrap();
    let want: u64 = st["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["size"].as_u64().unwrap())
        .sum();
    assert_eq!(reserved, json!(want));
    // Zoom in past the embedded levels: finer detail comes from the server.
    b.js("document.getElementById('timeline').scrollIntoView({block: 'center'})");
    let r = b.js("const r = document.getElementById('timeline').getBoundingClientRect(); return [r.left + r.width * 0.5, r.top + r.height / 2]");
    b.wheel(r[0].as_f64().unwrap(), r[1].as_f64().unwrap(), -100, 10);
    let fetched = b.wait_for(
        "fetched detail",
        "const d = document.getElementById('detail'); return d.textContent.includes('every event') || d.textContent.includes('fetched') ? d.textContent : null",
    );
    assert!(
        fetched.as_str().unwrap().contains("points for"),
        "{fetched}"
    );
    let levels = b.js("return window.fragscopeView.data.devices[0].levels.length");
    assert_eq!(levels, json!(2), "a served page carries two levels");
    assert_eq!(
        b.js("return Number(document.getElementById('detail').dataset.level)"),
        levels
    );
    assert_eq!(b.errors(), Vec::<String>::new());
    drop(srv);

    // The issue's list, served.
    let data = data_of(&file, &["--max-points", "32"]);
    let srv = Server::start(&file, &["--max-points", "32"]);
    b.open(&srv.url);
    check_oom_page(&b, &data, true);
    b.wait_for(
        "the server's answers",
        "return window.fragscopeView.state.inflight === 0",
    );
    assert_eq!(b.errors(), Vec::<String>::new());
    drop(srv);
    let dir = tempfile::tempdir().unwrap();
    let long = long_trace(dir.path());
    let srv = Server::start(long.to_str().unwrap(), &["--max-points", "500"]);
    b.open(&srv.url);
    check_zoom(&b, true);
    assert_eq!(b.errors(), Vec::<String>::new());
}

/// Every fixture snapshot and every real snapshot: the page opens, shows
/// each device and its key moments, and logs no error, written with -o and,
/// where a device has a trace (the served page then asks the server for
/// states, series and bands), served. Two browsers share the pages.
#[test]
fn browser_no_console_error_anywhere() {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(util::root().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.to_string_lossy().ends_with(".md"))
        .collect();
    if let Some(real) = util::real_dir() {
        files.extend(
            std::fs::read_dir(real)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| !p.to_string_lossy().ends_with(".md")),
        );
    }
    files.sort();
    let dir = tempfile::tempdir().unwrap();
    // The pages first (the binary, in parallel), then two browsers.
    let pages: Vec<(std::path::PathBuf, std::path::PathBuf, bool)> = std::thread::scope(|sc| {
        let jobs: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let page = dir.path().join(format!("page{i}.html"));
                sc.spawn(move || {
                    let name = util::name_of(f);
                    let r = run(["view", f.to_str().unwrap(), "-o", page.to_str().unwrap()]);
                    if r.code() != 0 {
                        // Not a snapshot (traces, exports, text): one clean line.
                        r.expect_code(2);
                        assert_eq!(r.stderr().lines().count(), 1, "{name}: {}", r.stderr());
                        return None;
                    }
                    let traced = std::fs::read_to_string(&page)
                        .unwrap()
                        .contains("\"traced\":true");
                    Some((f.clone(), page, traced))
                })
            })
            .collect();
        jobs.into_iter().filter_map(|j| j.join().unwrap()).collect()
    });
    let Some(first) = Browser::start() else {
        return;
    };
    let browsers = [first, Browser::start().unwrap()];
    let next = std::sync::atomic::AtomicUsize::new(0);
    let shown: usize = std::thread::scope(|sc| {
        let workers: Vec<_> = browsers
            .iter()
            .map(|b| {
                let (next, pages) = (&next, &pages);
                sc.spawn(move || {
                    let mut shown = 0;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some((f, page, traced)) = pages.get(i) else {
                            return shown;
                        };
                        shown += sweep(b, f, page, *traced);
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert!(shown >= 10 + pages.len(), "pages shown: {shown}");
}

/// One file's page, written and (when traced) served: every device and key
/// moment shown, a step back, and no console error. The number of pages.
fn sweep(b: &Browser, f: &Path, page: &Path, traced: bool) -> usize {
    let name = util::name_of(f);
    let mut shown = 0;
    for serve in [false, true] {
        if serve && !traced {
            continue;
        }
        let srv = serve.then(|| Server::start(f.to_str().unwrap(), &[]));
        b.open(
            &srv.as_ref()
                .map_or_else(|| file_url(page), |s| s.url.clone()),
        );
        b.wait_for(
            &name,
            "return document.readyState === 'complete' && window.fragscopeView !== undefined",
        );
        // Every device, every key moment, a step back with the arrow key:
        // one script, as a user's clicks would run them.
        b.js(r#"
const s = document.getElementById('device');
for (let d = 0; d < window.fragscopeView.data.devices.length; d++) {
  s.value = String(d);
  s.dispatchEvent(new Event('change'));
  for (const m of document.querySelectorAll('#moments button')) m.click();
  document.body.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowLeft', bubbles: true}));
}"#);
        b.wait_for(
            "the server's answers",
            "return window.fragscopeView.state.inflight === 0",
        );
        let errors = b.errors();
        assert!(
            errors.is_empty(),
            "{name} ({}): {errors:?}",
            if serve { "served" } else { "-o" }
        );
        shown += 1;
    }
    shown
}

/// The text of every cell of a table's body, row by row.
fn table_cells(b: &Browser, table: &str) -> Value {
    b.js(&format!(
        "return [...document.querySelectorAll('{table} tbody tr')].map(r => [...r.children].map(c => c.textContent))"
    ))
}

/// A profiler trace of GPU memory, written and served: the timeline and
/// the live bytes by operator, the sentence that says why there is no
/// segment map, the tooltip of the peak, and no console error.
#[test]
fn browser_gpu_trace_page() {
    let Some(b) = Browser::start() else { return };
    let file = fixture("gpu_memory_trace.json");
    let data = data_of(&file, &[]);
    let dev = &data["devices"][0];
    let peak = dev["key_moments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["label"] == "peak allocated")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("trace.html");
    run(["view", &file, "-o", page.to_str().unwrap()]).expect_code(0);
    for served in [false, true] {
        let srv = served.then(|| Server::start(&file, &[]));
        b.open(
            &srv.as_ref()
                .map_or_else(|| file_url(&page), |s| s.url.clone()),
        );
        b.wait_for(
            "the trace's page",
            "return window.fragscopeView && window.fragscopeView.state.series ? true : null",
        );
        let how = if served { "served" } else { "-o" };
        assert_eq!(b.text("#series-h"), "Memory timeline", "{how}");
        // The live bytes by operator: the data's rows, in its order.
        let ops = table_cells(&b, "#trace-ops");
        let want: Vec<Value> = dev["live_by_op"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| json!([o["op"], o["bytes_text"], o["events"].to_string()]))
            .collect();
        assert_eq!(ops, json!(want), "{how}");
        let note = b.text("#no-segment-map");
        assert!(
            note.contains(data["no_segment_map"].as_str().unwrap()),
            "{how}: {note}"
        );
        // Hover the peak of allocated memory: its operator and figures.
        let at = b.js(&format!(
            "const G = window.fragscopeView.state.series, c = document.getElementById('series');
             c.scrollIntoView({{block: 'center'}});
             const r = c.getBoundingClientRect(), i = G.L.event.indexOf({});
             return {{x: r.left + G.px(i), y: r.top + G.py(G.L.lines[G.L.lines.length - 1].y[i] / 2)}}",
            peak["event"]
        ));
        let tip = hover(&b, &at);
        for want in [
            peak["op"].as_str().unwrap(),
            peak["allocated_text"].as_str().unwrap(),
            peak["reserved_text"].as_str().unwrap(),
        ] {
            assert!(tip.contains(want), "{how}: {want} not in {tip}");
        }
        assert_eq!(b.errors(), Vec::<String>::new(), "{how}");
    }
}

/// A directory of ranks opens on the overview with its outlier flagged;
/// served, a rank opens (keyboard, then a click) on its own timeline, and
/// the way back leads to the overview. Written, the overview names the
/// command that opens each rank (it carries no rank's page).
#[test]
fn browser_rank_overview() {
    let Some(b) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ranks = dir.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    // Three alike ranks and one that reserves and fragments far more.
    for (i, f) in [
        "expandable_oom_proto5.pickle",
        "expandable_oom_proto5.pickle",
        "expandable_oom_proto5.pickle",
        OOM_FIXTURE,
    ]
    .iter()
    .enumerate()
    {
        std::fs::copy(fixture(f), ranks.join(format!("rank{i}.pickle"))).unwrap();
    }
    let dir_arg = ranks.to_str().unwrap();
    let data = data_of(dir_arg, &[]);
    let outliers: Vec<(usize, &Value)> = data["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, r)| !r["outlier"].is_null())
        .collect();
    assert_eq!(outliers.len(), 1, "{}", data["ranks"]);
    let (odd, row) = outliers[0];
    let overview = |how: &str| {
        b.wait_for(
            "the overview",
            "return document.getElementById('ranks') !== null",
        );
        let flagged = b.js(
            "return [...document.querySelectorAll('#ranks tbody tr')].map(r => r.classList.contains('outlier'))",
        );
        let why: Vec<Value> = table_cells(&b, "#ranks")
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_array().unwrap().last().unwrap().clone())
            .collect();
        let ranks = data["ranks"].as_array().unwrap();
        let want: Vec<bool> = ranks.iter().map(|r| !r["outlier"].is_null()).collect();
        assert_eq!(flagged, json!(want), "{how}");
        let want: Vec<&str> = ranks
            .iter()
            .map(|r| r["outlier"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(json!(why), json!(want), "{how}");
    };
    // Written: the overview, each rank with its command.
    let page = dir.path().join("ranks.html");
    run(["view", dir_arg, "-o", page.to_str().unwrap()]).expect_code(0);
    b.open(&file_url(&page));
    overview("-o");
    let cmd = b.text(&format!("#ranks tbody tr:nth-child({}) code", odd + 1));
    assert_eq!(
        cmd,
        format!("fragscope view {}", row["file"].as_str().unwrap())
    );
    assert_eq!(
        b.js("return document.querySelectorAll('#ranks a').length"),
        json!(0)
    );
    assert_eq!(b.errors(), Vec::<String>::new());

    // Served: into the outlier with the keyboard, back, into it with a click.
    let srv = Server::start(dir_arg, &[]);
    let rank_page = |how: &str| {
        b.wait_for(&format!("the rank's page ({how})"), PAGE_READY);
        assert_eq!(b.text("#file"), row["file"].as_str().unwrap(), "{how}");
        let drawn = b.js(
            "return [window.fragscopeView.state.dev.events, Number(document.getElementById('detail').dataset.points)]",
        );
        assert!(
            drawn[0].as_u64().unwrap() > 0 && drawn[1].as_u64().unwrap() > 1,
            "{how}: its timeline: {drawn}"
        );
    };
    b.open(&srv.url);
    overview("served");
    b.js("document.querySelector('#ranks tbody tr.outlier a').focus()");
    b.key("\u{E007}"); // Enter
    rank_page("keyboard");
    b.click("#to-ranks");
    overview("back");
    b.click("#ranks tbody tr.outlier a");
    rank_page("click");
    b.cmd("POST", "back", Some(json!({})));
    overview("history back");
    assert_eq!(b.errors(), Vec::<String>::new());
}

/// A page of several devices makes each device's key moments, bands and
/// call sites on another thread, a device ahead of the one written: each
/// device's key moments and call sites are those of its page alone, in
/// the devices' order.
#[test]
fn a_page_of_every_device_has_each_devices_own_moments() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("multi.pickle");
    let f = file.to_str().unwrap();
    run([
        "synth",
        "--shape",
        "multi-device",
        "--devices",
        "4",
        "--busy-devices",
        "2",
        "--events",
        "6000",
        "--seed",
        "4",
        "-o",
        f,
    ])
    .expect_code(0);
    let page = |device: Option<&str>| -> Value {
        let out = dir
            .path()
            .join(format!("v{}.json", device.unwrap_or("all")));
        let o = out.to_str().unwrap();
        let mut args = vec!["view", f, "-o", o];
        args.extend(device.map(|d| ["--device", d]).into_iter().flatten());
        run(args).expect_code(0);
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
    };
    let all = page(None);
    let devices = all["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 4);
    for (k, dev) in devices.iter().enumerate() {
        assert_eq!(dev["device"], json!(k));
        let alone = page(Some(&k.to_string()));
        let one = &alone["devices"][0];
        for key in ["key_moments", "sites", "ooms"] {
            let states = |doc: &Value, d: &Value| -> Value {
                let mut v = d[key].clone();
                if key == "key_moments" {
                    for m in v.as_array_mut().unwrap() {
                        m["state"] = with_stacks_inline(&m["state"], &doc["stacks"]);
                    }
                }
                v
            };
            assert_eq!(states(&all, dev), states(&alone, one), "device {k}: {key}");
        }
    }
}
