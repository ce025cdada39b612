#!/usr/bin/env python3
"""End-to-end benchmark of fragscope against Python's own pickle.load.

Generates synthetic snapshots with `fragscope synth` (kept under
target/bench-inputs, never committed), then, for each size, runs in turn

  * fragscope stats FILE
  * fragscope report FILE            (when the command exists)
  * python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' FILE

under /usr/bin/time -v, interleaved, several times, and reports medians of
wall time, CPU time (user+sys) and peak RSS, with the ratios fragscope/Python
taken per round (so a noisy machine affects both sides of a ratio alike).
The stage figures (decoder MB/s, replay events/s) come from the
`stage_times` example, run --stage-runs times a round (medians of all). Last, 8 rank files: one `stats` call (both cores)
against one call per file in sequence and against as many one-thread
processes at once as there are cores (the machine's own ceiling), and the
output of the parallel call against the same call on one thread.

Prints the Markdown tables that docs/perf.md holds.

    scripts/bench.py                       # 100 MB .. 1 GB, 3 rounds
    scripts/bench.py --sizes 100,250 --rounds 5
    scripts/bench.py --real ../shared/real/some.pickle

Without --real, the largest pickle in ../shared/real (next to the crate)
is measured too when that folder exists.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY_LOAD = 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))'
# Bytes of pickle per trace event in `fragscope synth` output (measured on
# seed 1; the size check below reports the real figure).
BYTES_PER_EVENT = 148


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def timed(cmd, stdout=subprocess.DEVNULL, env=None):
    """Runs cmd under /usr/bin/time -v: (wall s, cpu s, max RSS bytes), or
    None when it fails."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        r = subprocess.run(
            ["/usr/bin/time", "-v", "-o", t.name] + cmd,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
        )
        if r.returncode != 0:
            # A failing command is a finding, not the end of the run.
            last = (r.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            print(f"FAILED (exit {r.returncode}): {' '.join(cmd)}: {last}", file=sys.stderr)
            return None
        text = t.read()
    def field(name):
        m = re.search(r"^\s*" + re.escape(name) + r": (.*)$", text, re.M)
        return m.group(1).strip()
    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(p) for p in wall.split(":")]
    secs = 0.0
    for p in parts:
        secs = secs * 60 + p
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    rss = int(field("Maximum resident set size (kbytes)")) * 1024
    return secs, cpu, rss


def mib(b):
    return b / (1 << 20)


def has_command(exe, name):
    r = subprocess.run([exe, name, "--help"], capture_output=True)
    return r.returncode == 0


def generate(exe, out_dir, size_mb, seed):
    path = os.path.join(out_dir, f"synth-{size_mb}MB-s{seed}.pickle")
    if not os.path.exists(path):
        events = size_mb * (1 << 20) // BYTES_PER_EVENT
        print(f"generating {path} ({events} events)", file=sys.stderr)
        sh([exe, "synth", "--events", str(events), "--seed", str(seed), "-o", path],
           stdout=subprocess.DEVNULL)
    return path


def stage_times(example, path):
    r = subprocess.run([example, path], capture_output=True, text=True)
    vals = dict(kv.split("=") for kv in r.stdout.split())
    out = {k: float(v) for k, v in vals.items()}
    if r.returncode != 0:
        print(f"FAILED: stage_times {path}: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return out


def wall_of_processes(cmds, env):
    """Wall seconds of running every command at once, to the last one's end."""
    t0 = time.monotonic()
    ps = [subprocess.Popen(c, stdout=subprocess.DEVNULL, env=env) for c in cmds]
    for p in ps:
        p.wait()
    return time.monotonic() - t0


def largest_real():
    d = os.path.join(ROOT, "..", "shared", "real")
    if not os.path.isdir(d):
        return []
    p = [os.path.join(d, n) for n in os.listdir(d) if n.endswith((".pickle", ".pkl"))]
    return [max(p, key=os.path.getsize)] if p else []


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,250,500,1000", help="sizes in MB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--real", action="append", default=[], help="also measure these files")
    ap.add_argument("--no-real", action="store_true", help="skip the largest real file")
    ap.add_argument("--stage-runs", type=int, default=3,
                    help="stage_times runs per round (a phase of a tenth of a second varies "
                         "a lot on a shared machine; they are cheap beside Python's)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rank-size", type=int, default=50, help="MB per rank file")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "target", "bench-inputs"))
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()

    if not a.no_build:
        sh(["cargo", "build", "--release", "--quiet", "--bin", "fragscope",
            "--example", "stage_times"], cwd=ROOT)
    exe = os.path.join(ROOT, "target", "release", "fragscope")
    example = os.path.join(ROOT, "target", "release", "examples", "stage_times")
    os.makedirs(a.out_dir, exist_ok=True)
    report = has_command(exe, "report")
    files = [generate(exe, a.out_dir, int(s), 1) for s in a.sizes.split(",") if s.strip()]
    real = a.real or ([] if a.no_real else largest_real())
    files += real

    html_out = os.path.join(a.out_dir, "report.html")
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start",
          file=sys.stderr)
    rows = []
    for f in files:
        size = os.path.getsize(f)
        res = {"stats": [], "report": [], "report_nw": [], "python": []}
        ratios = {"stats": [], "report": [], "report_nw": [], "stats_cpu": []}
        failed = set()
        stages = []
        for r in range(a.rounds):
            print(f"{os.path.basename(f)}: round {r + 1}/{a.rounds}", file=sys.stderr)
            st = timed([exe, "stats", f])
            rp = timed([exe, "report", f, "-o", html_out]) if report else None
            nw = timed([exe, "report", "--no-what-if", f, "-o", html_out]) if report else None
            py = timed([sys.executable, "-c", PY_LOAD, f])
            if report and rp is None:
                failed.add("report")
            for k, v in (("stats", st), ("report", rp), ("report_nw", nw)):
                if v and py:
                    res[k].append(v)
                    ratios[k].append(v[0] / py[0])
            if st and py:
                ratios["stats_cpu"].append(st[1] / py[1])
            if py:
                res["python"].append(py)
            for _ in range(max(a.stage_runs, 1)):
                stages.append(stage_times(example, f))
        # The median of each phase over the rounds (a single run of a phase
        # that takes a tenth of a second says little on a shared machine).
        stage = {k: median([s[k] for s in stages if k in s]) for k in stages[0]}
        rows.append((f, size, res, ratios, stage, failed))

    print()
    print("| input | size | events | fragscope stats | Python pickle.load | stats / Python (wall) | stats / Python (CPU) | report / Python | report --no-what-if / Python | peak RSS: stats | peak RSS: report | peak RSS: Python |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f, size, res, ratios, stage, failed in rows:
        st = [x[0] for x in res["stats"]]
        py = [x[0] for x in res["python"]]
        rss = lambda k: median([x[2] for x in res[k]])
        rep = (f"{median(ratios['report']):.2f}x" if res["report"] else
               "failed" if "report" in failed else "(no `report` yet)")
        rep_nw = f"{median(ratios['report_nw']):.2f}x" if res["report_nw"] else "—"
        rep_k = "report" if res["report"] else "report_nw"
        rep_rss = (f"{mib(rss(rep_k)):.0f} MiB ({rss(rep_k) / size:.2f}x file)"
                   + ("" if rep_k == "report" else " (--no-what-if)")
                   if res[rep_k] else "—")
        print(f"| {os.path.basename(f)} | {mib(size):.0f} MiB | {int(stage['events'])} "
              f"| {median(st):.2f} s | {median(py):.2f} s "
              f"| {median(ratios['stats']):.2f}x | {median(ratios['stats_cpu']):.2f}x | {rep} | {rep_nw} "
              f"| {mib(rss('stats')):.0f} MiB ({rss('stats') / size:.2f}x file) | {rep_rss} "
              f"| {mib(rss('python')):.0f} MiB ({rss('python') / size:.2f}x file) |")
    print()
    print(f"Stages (`stage_times`, one thread, median of {a.rounds * max(a.stage_runs, 1)} runs, "
          f"{max(a.stage_runs, 1)} a round; CPU seconds in brackets): decoder and replay "
          "throughput, and where `report` spends its time.")
    print()
    print("| input | decode | decoder | replay | replay rate | report: replay + moment | report: what-if model | report: HTML |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for f, size, res, ratios, stage, failed in rows:
        ev = stage["events"]
        print(f"| {os.path.basename(f)} | {stage['decode_s']:.2f} s ({stage['decode_cpu_s']:.2f}) "
              f"| {mib(size) / stage['decode_s']:.0f} MiB/s "
              f"| {stage['replay_s']:.2f} s ({stage['replay_cpu_s']:.2f}) "
              f"| {ev / max(stage['replay_s'], 1e-9) / 1e6:.2f} M events/s "
              f"| {stage.get('gather_s', float('nan')):.2f} s | {stage.get('what_if_s', float('nan')):.2f} s "
              f"| {stage.get('html_s', float('nan')):.3f} s |")
    print()
    print("Scale: time per 100 MiB and peak RSS per byte of input (flat = linear).")
    print()
    print("| input | size | bytes/event | stats s/100 MiB | report s/100 MiB | report --no-what-if s/100 MiB | Python s/100 MiB | stats RSS / size | report RSS / size | report --no-what-if RSS / size | Python RSS / size |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f, size, res, ratios, stage, failed in rows:
        per = lambda k: median([x[0] for x in res[k]]) / mib(size) * 100 if res[k] else float("nan")
        rss = lambda k: median([x[2] for x in res[k]]) / size if res[k] else float("nan")
        print(f"| {os.path.basename(f)} | {mib(size):.0f} MiB | {size / max(stage['events'], 1):.0f} "
              f"| {per('stats'):.2f} | {per('report'):.2f} | {per('report_nw'):.2f} | {per('python'):.2f} "
              f"| {rss('stats'):.2f} | {rss('report'):.2f} | {rss('report_nw'):.2f} | {rss('python'):.2f} |")

    # Several rank files: one call (rayon, all cores) against one per file.
    ranks = [generate(exe, a.out_dir, a.rank_size, 100 + i) for i in range(a.ranks)]
    par, seq, one, procs = [], [], [], []
    ncpu = os.cpu_count() or 1
    for r in range(a.rounds):
        par.append(timed([exe, "stats"] + ranks)[0])
        env1 = dict(os.environ, RAYON_NUM_THREADS="1")
        one.append(timed([exe, "stats"] + ranks, env=env1)[0])
        t = 0.0
        for f in ranks:
            t += timed([exe, "stats", f])[0]
        seq.append(t)
        # The machine's own ceiling: as many separate one-thread processes as
        # cores, the files dealt out between them. Where this is no faster
        # than the one call, what is left is the hardware's, not the code's.
        procs.append(wall_of_processes(
            [[exe, "stats"] + ranks[k::ncpu] for k in range(ncpu)], env1))
    out_par = subprocess.run([exe, "stats"] + ranks, check=True, capture_output=True).stdout
    out_one = subprocess.run([exe, "stats"] + ranks, check=True, capture_output=True,
                             env=dict(os.environ, RAYON_NUM_THREADS="1")).stdout
    print()
    print(f"| {a.ranks} rank files of {a.rank_size} MB | wall |")
    print("|---|---:|")
    print(f"| one `stats` call, {os.cpu_count()} threads | {median(par):.2f} s |")
    print(f"| one `stats` call, RAYON_NUM_THREADS=1 | {median(one):.2f} s |")
    print(f"| {a.ranks} `stats` calls in sequence | {median(seq):.2f} s |")
    print(f"| {ncpu} one-thread processes at once, the files dealt out | {median(procs):.2f} s |")
    print(f"| parallel / sequential calls | {median(par) / median(seq):.2f}x |")
    print(f"| {ncpu} processes at once / sequential calls (the machine's ceiling) "
          f"| {median(procs) / median(seq):.2f}x |")
    print(f"| parallel output = one-thread output | {'yes' if out_par == out_one else 'NO'} |")
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; medians of {a.rounds} rounds")


if __name__ == "__main__":
    if not shutil.which("/usr/bin/time"):
        sys.exit("needs /usr/bin/time (GNU time) for peak RSS")
    main()
