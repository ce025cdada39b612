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

--matrix runs instead every shape of `fragscope synth --shape` (narrow,
many-sites, fragmented, expandable, multi-device) at every size (default
100MB,1GB), and on each file every command of MATRIX_COMMANDS (stats,
stats --json, report -o x.html, check, simulate, simulate --json,
timeline --json, convert --to json, events --csv, culprits, oom, diff,
flamegraph, view -o x.html), Python's pickle.load of the
same file in the same round, and the stages (`stage_times`: the decoder
alone, counting each trace entry as `stats` does, and decoding into the
whole model, each in MiB/s; replay events/s). Long outputs go to /dev/null through a pipe-less stdout
(`-o -` where a command writes a file), so they cost what writing costs,
not disk. One Markdown table per shape, with the machine and its load:

    scripts/bench.py --matrix                                  # 5 shapes x 100MB,1GB, 3 rounds
    scripts/bench.py --matrix --sizes 100MB,250MB --rounds 1   # a quick run
    scripts/bench.py --matrix --shapes fragmented --out-md /tmp/matrix.md
    scripts/bench.py --matrix --shapes py --sizes 100MB   # the shapes of scripts/make_snapshot.py

--shapes also takes the shapes of scripts/make_snapshot.py (PY_SHAPES:
py-training, py-shallow, py-deep, py-pressure, py-ring, py-ranks, py-ooms, py-nostack,
py-streams, py-verydeep, py-dense;
`py` for all of them): files written by Python's own pickler from an allocator
model and a workload that share no code with `fragscope synth`.

--baseline BIN runs every command of the matrix with a second binary too
(an older build), in the same round, and adds its wall time and the ratio
new / old to the tables: a before-and-after measured side by side.

Each file's event count is found by two small calibration runs (bytes per
event and the fixed part, i.e. the segments) and corrected once if the file
misses its size by more than 5 %. Inputs are kept under --out-dir
(target/bench-inputs; about 5.5 GB at the default sizes) for later runs;
delete them when `fragscope synth` changes.
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


def timed(cmd, stdout=subprocess.DEVNULL, env=None, ok=(0,)):
    """Runs cmd under /usr/bin/time -v: (wall s, cpu s, max RSS bytes), or
    None when it fails (exits with a code not in `ok`: check and diff exit 1
    on a failed rule or a worse run)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        r = subprocess.run(
            ["/usr/bin/time", "-v", "-o", t.name] + cmd,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
        )
        if r.returncode not in ok:
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


def warm(path):
    """Reads `path` through once, so that the command timed next finds it
    in the page cache, as Python's `pickle.load` beside it does. Without
    it the first command on a file paid for reading it from the disk: this
    kind of virtual machine hands cold page-cache pages back to its host
    within minutes (the kernel's DAMON reclaim), so a file generated or read
    earlier is often no longer cached."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


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


def stage_times(example, path, pin=()):
    r = subprocess.run(list(pin) + [example, path], capture_output=True, text=True)
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


# ---- the shape matrix (--matrix) --------------------------------------------

MATRIX_SHAPES = ["narrow", "many-sites", "fragmented", "expandable", "multi-device"]
# Shapes written by scripts/make_snapshot.py (Python's own pickler, a model of
# the allocator of its own, no code shared with `fragscope synth`): its
# arguments besides --events, --seed and -o.
PY_SHAPES = {
    "py-training": [],
    "py-shallow": ["--depth", "2-12", "--sites", "200", "--streams", "16", "--side-rate", "0.97"],
    "py-deep": ["--depth", "30-300", "--sites", "5000", "--limit-gb", "24", "--side-rate", "0.8"],
    "py-pressure": ["--devices", "4", "--limit-gb", "16", "--side-rate", "0.9", "--depth", "10-60"],
    "py-ring": ["--depth", "5-30", "--sites", "3000", "--streams", "4", "--keep", "0.83"],
    "py-ranks": ["--devices", "8", "--busy", "8", "--depth", "8-40"],
    # A program that catches its OOMs and goes on: an `oom` at most steps.
    "py-ooms": ["--devices", "4", "--limit-gb", "16", "--side-rate", "0.9", "--depth", "10-60",
                "--no-recover"],
    # py-shallow recorded without stack traces: the fewest bytes an event.
    "py-nostack": ["--depth", "2-12", "--sites", "200", "--streams", "16", "--side-rate", "0.97",
                   "--no-stacks"],
    # A program on 200 streams: a tenth of its events are segment events.
    "py-streams": ["--streams", "200", "--sites", "500", "--depth", "5-20"],
    # 20 000 call sites of 200-600 frames, nearly each allocation its own stack.
    "py-verydeep": ["--depth", "200-600", "--sites", "20000"],
    # 400 call sites of 33 frames, each site's frames list one object that the
    # pickler writes once: about 77 bytes an event, the most events a byte of
    # any shape with stacks.
    "py-dense": ["--depth", "33-33", "--sites", "400", "--shared-lists"],
}
ALL_SHAPES = MATRIX_SHAPES + list(PY_SHAPES)
# (label, arguments with {f} the input and {d} a scratch folder, exit codes
# that are a success, the issue-24 target as a fraction of pickle.load).
MATRIX_COMMANDS = [
    ("stats", ["stats", "{f}"], (0,), 0.05),
    ("stats --json", ["stats", "--json", "{f}"], (0,), 0.25),
    ("report -o x.html", ["report", "{f}", "-o", "{d}/x.html"], (0,), 0.2),
    ("check", ["check", "{f}"], (0, 1), 0.25),
    ("simulate", ["simulate", "{f}"], (0,), 0.25),
    ("simulate --json", ["simulate", "--json", "{f}"], (0,), 0.25),
    ("timeline --json", ["timeline", "--json", "{f}"], (0,), 0.25),
    ("convert --to json", ["convert", "{f}", "--to", "json", "-o", "-"], (0,), 0.25),
    ("events --csv", ["events", "--csv", "{f}"], (0,), 0.25),
    ("culprits", ["culprits", "{f}"], (0,), 0.25),
    ("oom", ["oom", "{f}"], (0,), 0.25),
    ("diff FILE FILE", ["diff", "{f}", "{f}"], (0, 1), 0.25),
    ("flamegraph -o x.svg", ["flamegraph", "{f}", "-o", "{d}/x.svg"], (0,), 0.25),
    ("view -o x.html", ["view", "{f}", "-o", "{d}/v.html"], (0,), 0.25),
]


def parse_mb(text):
    """'100', '100MB', '1GB', '1.5GB' -> MB (of 2**20 bytes, as the file names say)."""
    t = text.strip().upper()
    for unit, mult in (("GB", 1000), ("G", 1000), ("MB", 1), ("M", 1)):
        if t.endswith(unit):
            return int(round(float(t[: -len(unit)]) * mult))
    return int(t)


def fmt_size(mb):
    return f"{mb // 1000} GB" if mb >= 1000 and mb % 1000 == 0 else f"{mb} MB"


def shape_command(exe, shape, events, seed, path):
    """The command that writes `shape` with `events` events to `path`."""
    if shape in PY_SHAPES:
        return ([sys.executable, os.path.join(ROOT, "scripts", "make_snapshot.py")]
                + PY_SHAPES[shape] + ["--events", str(events), "--seed", str(seed), "-o", path])
    return [exe, "synth", "--shape", shape, "--events", str(events), "--seed", str(seed), "-o", path]


def shape_label(shape, events, seed):
    """How the docs name the command that made a file."""
    if shape in PY_SHAPES:
        return " ".join(["scripts/make_snapshot.py"] + PY_SHAPES[shape]
                        + ["--seed", str(seed), "--events", str(events)])
    return f"fragscope synth --shape {shape} --seed {seed} --events {events}"


def synth_shape(exe, shape, events, seed, path):
    r = subprocess.run(shape_command(exe, shape, events, seed, path),
                       check=True, capture_output=True, text=True)
    return os.path.getsize(path), r.stdout.strip()


def generate_shape(exe, out_dir, shape, size_mb, seed):
    """The file of `shape` nearest `size_mb` MB, generated once; returns
    (path, events, what synth said of it)."""
    path = os.path.join(out_dir, f"matrix-{shape}-{size_mb}MB-s{seed}.pickle")
    meta = path + ".txt"
    if os.path.exists(path) and os.path.exists(meta):
        events, said = open(meta).read().split("\n", 1)
        return path, int(events), said.strip()
    target = size_mb << 20
    # Two calibration files: bytes per event, and the part that does not
    # grow with the trace (segments, blocks and their stacks).
    cal = path + ".cal"
    n1, n2 = 20_000, 100_000
    s1, _ = synth_shape(exe, shape, n1, seed, cal)
    s2, _ = synth_shape(exe, shape, n2, seed, cal)
    os.remove(cal)
    per = max((s2 - s1) / (n2 - n1), 1.0)
    fixed = max(s1 - per * n1, 0.0)
    events = max(int((target - fixed) / per), 1000)
    print(f"generating {path} ({events} events)", file=sys.stderr)
    size, said = synth_shape(exe, shape, events, seed, path)
    if abs(size / target - 1) > 0.05:
        events = max(int(events * (target - fixed) / max(size - fixed, 1)), 1000)
        print(f"  {mib(size):.0f} MiB: again with {events} events", file=sys.stderr)
        size, said = synth_shape(exe, shape, events, seed, path)
    with open(meta, "w") as m:
        m.write(f"{events}\n{said}\n")
    return path, events, said


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / (1 << 20):.0f} GiB"
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {mem} RAM, Python {sys.version.split()[0]}"


def run_matrix(a, exe, example):
    shapes = [x.strip() for x in a.shapes.split(",") if x.strip()]
    shapes = [y for x in shapes for y in (list(PY_SHAPES) if x == "py" else [x])]
    for sh in shapes:
        if sh not in ALL_SHAPES:
            sys.exit(f"--shapes: unknown shape {sh!r} (known: {', '.join(ALL_SHAPES)})")
    sizes = [parse_mb(x) for x in (a.sizes or "100MB,1GB").split(",") if x.strip()]
    rounds = a.rounds
    labels = [label for label, *_ in MATRIX_COMMANDS]
    wanted = [x.strip() for x in a.commands.split(",")] if a.commands else labels
    for w in wanted:
        if w not in labels:
            sys.exit(f"--commands: unknown command {w!r} (known: {', '.join(labels)})")
    commands = [c for c in MATRIX_COMMANDS if c[0] in wanted]
    # Every timed process, pickle.load included, on the same CPUs.
    pin = ["taskset", "-c", a.cpus] if a.cpus else []
    scratch = tempfile.mkdtemp(prefix="fragscope-bench-")
    out = []
    say = out.append
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "?"
    say(f"Shape matrix: `{' '.join(['scripts/bench.py'] + sys.argv[1:])}`, "
        f"started {started}, commit {commit}; {machine()}; load average "
        f"{os.getloadavg()[0]:.2f} at the start"
        + (f"; every command, `pickle.load` and `stage_times` pinned to CPU(s) {a.cpus} "
           f"(`taskset -c {a.cpus}`)" if a.cpus else "")
        + f". Medians of {rounds} "
        f"round{'s' if rounds != 1 else ''}; each ratio is "
        "taken within one round, against Python's `pickle.load` of the same file in that round; "
        "the file is read through once before each command, so that every one finds it in the "
        "page cache.")
    say("")
    for shape in shapes:
        files = [generate_shape(exe, a.out_dir, shape, mb, a.seed) + (mb,) for mb in sizes]
        load0 = os.getloadavg()[0]
        rows = []
        for path, events, said, mb in files:
            size = os.path.getsize(path)
            res = {label: [] for label, *_ in commands}
            ratio = {label: [] for label, *_ in commands}
            py = []
            base = {label: [] for label, *_ in commands}
            stages = []
            for r in range(rounds):
                print(f"{os.path.basename(path)}: round {r + 1}/{rounds}", file=sys.stderr)
                this = {}
                for label, args, ok, _ in commands:
                    cmd = [exe] + [x.format(f=path, d=scratch) for x in args]
                    warm(path)
                    this[label] = timed(pin + cmd, ok=ok)
                    if a.baseline:
                        warm(path)
                        old = timed(pin + [a.baseline] + cmd[1:], ok=ok)
                        if old and this[label]:
                            base[label].append(this[label][0] / old[0])
                warm(path)
                p = timed(pin + [sys.executable, "-c", PY_LOAD, path])
                if p:
                    py.append(p)
                for label, v in this.items():
                    if v:
                        res[label].append(v)
                        if p:
                            ratio[label].append(v[0] / p[0])
                for _ in range(max(a.stage_runs, 1)):
                    warm(path)
                    stages.append(stage_times(example, path, pin))
            stage = {k: median([s[k] for s in stages if k in s]) for k in stages[0]} if stages else {}
            rows.append((path, events, said, mb, size, res, ratio, py, stage, base))
        load1 = os.getloadavg()[0]
        say(f"### {shape}")
        say("")
        for path, events, said, mb, size, *_ in rows:
            # The generator's summary without its file name and size.
            said = said.split(" bytes), ", 1)[-1].split(".pickle: ", 1)[-1]
            say(f"* {fmt_size(mb)}: `{shape_label(shape, events, a.seed)}` ({said})")
        say(f"* load average {load0:.2f} before this shape's runs, {load1:.2f} after")
        say("")
        extra = " new / old |" if a.baseline else ""
        say("| size | command | wall | / pickle.load | target | peak RSS | RSS / file | s per 100 MiB |" + extra)
        say("|---|---|---:|---:|---|---:|---:|---:|" + ("---:|" if a.baseline else ""))
        for path, events, said, mb, size, res, ratio, py, stage, base in rows:
            pw = median([x[0] for x in py])
            prss = median([x[2] for x in py])
            say(f"| {mib(size):.0f} MiB | Python `pickle.load` | {pw:.2f} s | 1.00x | | "
                f"{mib(prss):.0f} MiB | {prss / size:.2f}x | {pw / mib(size) * 100:.2f} |"
                + (" |" if a.baseline else ""))
            for label, _, _, target in commands:
                if not res[label]:
                    say(f"| {mib(size):.0f} MiB | `{label}` | failed | | | | | |" + (" |" if a.baseline else ""))
                    continue
                w = median([x[0] for x in res[label]])
                rss = median([x[2] for x in res[label]])
                rt = median(ratio[label])
                met = "yes" if rt <= target else "no"
                rss_met = "" if rss <= size else " (over the file)"
                say(f"| {mib(size):.0f} MiB | `{label}` | {w:.2f} s | {rt:.3f}x | ≤ {target}x: {met} | "
                    f"{mib(rss):.0f} MiB | {rss / size:.2f}x{rss_met} | {w / mib(size) * 100:.2f} |"
                    + (f" {median(base[label]):.2f}x |" if a.baseline else ""))
        say("")
        say("| size | events | decoder alone (`stats`) | decoder alone | decode into the model | into the model | replay | replay rate |")
        say("|---|---:|---:|---:|---:|---:|---:|---:|")
        for path, events, said, mb, size, res, ratio, py, stage, _ in rows:
            if "decode_s" not in stage:
                say(f"| {mib(size):.0f} MiB | | failed | | | | | |")
                continue
            ev = stage.get("events", 0)
            cs = stage.get("count_s", float("nan"))
            say(f"| {mib(size):.0f} MiB | {int(ev)} | {cs:.2f} s "
                f"| {mib(size) / max(cs, 1e-9):.0f} MiB/s "
                f"| {stage['decode_s']:.2f} s "
                f"| {mib(size) / max(stage['decode_s'], 1e-9):.0f} MiB/s "
                f"| {stage.get('replay_s', float('nan')):.2f} s "
                f"| {ev / max(stage.get('replay_s', 0), 1e-9) / 1e6:.2f} M events/s |")
        say("")
    shutil.rmtree(scratch, ignore_errors=True)
    text = "\n".join(out) + "\n"
    print()
    print(text, end="")
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(text)
        print(f"tables written to {a.out_md}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=None,
                    help="sizes in MB (100, 250MB, 1GB); default 100,250,500,1000, "
                         "or 100MB,1GB with --matrix")
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
    ap.add_argument("--matrix", action="store_true",
                    help="every shape of `fragscope synth --shape` at every size, every command")
    ap.add_argument("--shapes", default=",".join(MATRIX_SHAPES),
                    help="with --matrix: the shapes, comma-separated: those of `fragscope "
                         "synth --shape` and, written by scripts/make_snapshot.py, "
                         + ", ".join(PY_SHAPES) + " (or `py` for all of these)")
    ap.add_argument("--seed", type=int, default=1, help="with --matrix: synth's seed")
    ap.add_argument("--baseline", default=None,
                    help="with --matrix: an older fragscope binary, run beside the new one")
    ap.add_argument("--bin", default=None,
                    help="the fragscope binary to measure (default: build target/release)")
    ap.add_argument("--out-md", default=None,
                    help="with --matrix: also write the tables to this Markdown file")
    ap.add_argument("--cpus", default=None,
                    help="with --matrix: run every timed process on these CPUs "
                         "(`taskset -c CPUS`, e.g. 0 for one core)")
    ap.add_argument("--commands", default=None,
                    help="with --matrix: only these commands of the matrix, comma-separated "
                         "by their labels (e.g. 'report -o x.html,simulate')")
    a = ap.parse_args()

    if not a.no_build:
        sh(["cargo", "build", "--release", "--quiet", "--bin", "fragscope",
            "--example", "stage_times"], cwd=ROOT)
    exe = a.bin or os.path.join(ROOT, "target", "release", "fragscope")
    example = os.path.join(ROOT, "target", "release", "examples", "stage_times")
    os.makedirs(a.out_dir, exist_ok=True)
    if a.matrix:
        run_matrix(a, exe, example)
        return
    report = has_command(exe, "report")
    sizes = a.sizes or "100,250,500,1000"
    files = [generate(exe, a.out_dir, parse_mb(s), 1) for s in sizes.split(",") if s.strip()]
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
            warm(f)
            st = timed([exe, "stats", f])
            warm(f)
            rp = timed([exe, "report", f, "-o", html_out]) if report else None
            warm(f)
            nw = timed([exe, "report", "--no-what-if", f, "-o", html_out]) if report else None
            warm(f)
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
