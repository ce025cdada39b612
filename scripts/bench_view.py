#!/usr/bin/env python3
"""Benchmark of `fragscope view` against Python's own pickle.load.

For each shape of `fragscope synth --shape` and each size (files generated
once under --out-dir as scripts/bench.py --matrix names them, never
committed), in one round:

  * python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' FILE
    under /usr/bin/time -v (wall, peak RSS);
  * `fragscope view FILE --no-open`: seconds from the start of the process
    to the whole first page (`GET /`), then --queries scrubs
    (`/api/state` at random events of the busiest device) and as many
    zooms (`/api/series` of random windows, 2000 points), each timed from
    request to the last byte of the answer (median and slowest), and the
    server's peak RSS after them all (`VmHWM` of /proc/PID/status), with
    `--baseline BIN` that of an older binary's server on the same file;
  * `fragscope view FILE -o page.html` under /usr/bin/time -v (wall, peak
    RSS) and the page's size;
  * the page opened in headless Chromium through chromedriver: seconds
    from the navigation to `window.fragscopeView` (the script ran on the
    whole data), the browser's memory as the summed proportional set size (PSS,
    /proc/PID/smaps_rollup) of every process chromedriver started, and the JavaScript heap in use.

Prints one Markdown table (the one in docs/perf.md), with the machine,
commit and the command line. Run it on an otherwise idle machine.

    scripts/bench_view.py                                  # 5 shapes x 1GB
    scripts/bench_view.py --shapes narrow --sizes 100MB    # a quick run
    scripts/bench_view.py --served-only --sizes 100MB \
        --shapes py-training,py-shallow,py-deep,py-pressure,py-ring,py-ranks,py-ooms,py-nostack,py-streams,py-verydeep

`--served-only` leaves out `-o page.html` and the browser (their cells
read "not run").
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (generate_shape, timed, machine, parse_mb)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def get(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    return time.perf_counter() - t0, body


def served(exe, path, queries, rng):
    """(first page s, [scrub s], [zoom s], page bytes, peak RSS bytes)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([exe, "view", path, "--no-open"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        url = p.stdout.readline().strip()
        _, page = get(url)
        first = time.perf_counter() - t0
        _, body = get(url + "api/data")
        devices = json.loads(body)["devices"]
        dev = max(devices, key=lambda d: d["events"])
        d, n = dev["device"], dev["events"]
        scrubs, zooms = [], []
        for _ in range(queries):
            e = rng.randrange(-1, max(n, 1))
            scrubs.append(get(f"{url}api/state?device={d}&event={e}")[0])
            width = max(int(n / 10 ** rng.uniform(0, 3)), 2)
            lo = rng.randrange(-1, max(n - width, 0))
            zooms.append(get(f"{url}api/series?device={d}&from={lo}&to={lo + width}&points=2000")[0])
        with open(f"/proc/{p.pid}/status") as f:
            hwm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
        return first, scrubs, zooms, len(page), hwm
    finally:
        p.terminate()
        p.wait()


def descendants(pid):
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(name))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        for c in kids.get(q, []):
            out.append(c)
            todo.append(c)
    return out


def pss(pid):
    """Proportional set size: shared pages split between the processes
    sharing them, so a sum over processes counts each page once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def wd(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["value"]


def in_browser(page):
    """(seconds to open, browser PSS bytes, JS heap bytes), or None."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        return None
    port = 9515 + os.getpid() % 1000
    driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    profile = tempfile.mkdtemp(prefix="bench-view-")
    try:
        for _ in range(300):
            try:
                wd(port, "GET", "/status")
                break
            except OSError:
                time.sleep(0.05)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--window-size=1400,900",
                     "--enable-precise-memory-info", f"--user-data-dir={profile}"]}}}}
        s = wd(port, "POST", "/session", caps)["sessionId"]
        wd(port, "POST", f"/session/{s}/url", {"url": "about:blank"})
        t0 = time.perf_counter()
        # Navigation returns once the document has loaded (its inline script run).
        wd(port, "POST", f"/session/{s}/url", {"url": "file://" + os.path.abspath(page)})
        while not wd(port, "POST", f"/session/{s}/execute/sync", {
                "script": "return document.readyState === 'complete' && window.fragscopeView !== undefined",
                "args": []}):
            time.sleep(0.01)
        opened = time.perf_counter() - t0
        # One frame after the script ran: what the page holds once drawn.
        wd(port, "POST", f"/session/{s}/execute/async", {
            "script": "requestAnimationFrame(() => arguments[0]())", "args": []})
        heap = wd(port, "POST", f"/session/{s}/execute/sync", {
            "script": "return performance.memory ? performance.memory.usedJSHeapSize : 0",
            "args": []})
        mem = sum(pss(p) for p in descendants(driver.pid))
        wd(port, "DELETE", f"/session/{s}")
        return opened, mem, heap
    finally:
        driver.terminate()
        driver.wait()
        shutil.rmtree(profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="narrow,many-sites,fragmented,expandable,multi-device")
    ap.add_argument("--sizes", default="1GB")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1, help="synth's seed")
    ap.add_argument("--out-dir", default=os.path.join(bench.ROOT, "target", "bench-inputs"))
    ap.add_argument("--bin", default=os.path.join(bench.ROOT, "target", "release", "fragscope"))
    ap.add_argument("--baseline", help="an older binary whose server's peak RSS is measured too")
    ap.add_argument("--served-only", action="store_true",
                    help="the server alone: no `-o page.html`, no browser")
    a = ap.parse_args()
    exe = a.bin
    rng = random.Random(a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    commit = subprocess.run(["git", "-C", bench.ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"`scripts/bench_view.py {' '.join(sys.argv[1:])}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"commit {commit}, {bench.machine()}, load {os.getloadavg()[0]:.2f}\n")
    print("| shape | file | events | `pickle.load` | first page | / pickle.load | scrub median (slowest) | "
          "zoom median (slowest) | server's peak RSS | / file | baseline's | `-o page.html` | "
          "/ pickle.load | page | peak RSS `-o` | opens in Chromium | browser memory (PSS) | JS heap |")
    print("|" + "---|" * 18)
    for shape in a.shapes.split(","):
        for size in a.sizes.split(","):
            path, events, _ = bench.generate_shape(exe, a.out_dir, shape, bench.parse_mb(size), a.seed)
            mb = os.path.getsize(path) / 2**20
            py = bench.timed(["python3", "-c", bench.PY_LOAD, path])
            state = rng.getstate()
            first, scrubs, zooms, _, hwm = served(exe, path, a.queries, rng)
            base = "not run"
            if a.baseline:
                # Asked the same scrubs and zooms as the newer binary was.
                base_rng = random.Random()
                base_rng.setstate(state)
                base = f"{served(a.baseline, path, a.queries, base_rng)[4] / 2**20:.0f} MiB"
            ms = lambda xs: f"{statistics.median(xs) * 1e3:.0f} ms ({max(xs) * 1e3:.0f})"
            written = ("not run",) * 7
            if not a.served_only:
                with tempfile.TemporaryDirectory() as tmp:
                    out = os.path.join(tmp, "page.html")
                    w = bench.timed([exe, "view", path, "-o", out])
                    size_b = os.path.getsize(out)
                    b = in_browser(out)
                br = ("n/a",) * 3 if b is None else (f"{b[0]:.2f} s", f"{b[1] / 2**20:.0f} MiB",
                                                     f"{b[2] / 2**20:.0f} MiB")
                written = (f"{w[0]:.2f} s", f"{w[0] / py[0]:.2f}x", f"{size_b / 2**20:.1f} MiB",
                           f"{w[2] / 2**20:.0f} MiB") + br
            print(f"| {shape} | {mb:.0f} MiB | {events} | {py[0]:.2f} s | {first:.2f} s | "
                  f"{first / py[0]:.2f}x | {ms(scrubs)} | {ms(zooms)} | {hwm / 2**20:.0f} MiB | "
                  f"{hwm / 2**20 / mb:.2f}x | {base} | " + " | ".join(written) + " |", flush=True)


if __name__ == "__main__":
    main()
