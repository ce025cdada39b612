#!/usr/bin/env python3
"""Runs every command with its main flags on every input in ../shared/real and
fixtures/, and stores what each printed and wrote, so that two builds can be
compared byte for byte (a refactoring must leave them identical; a deliberate
change shows up as exactly the files it touches).

    python3 scripts/outputs.py run OUTDIR [--bin target/release/fragscope]
    python3 scripts/outputs.py compare OLDDIR NEWDIR

`run` writes OUTDIR/<input>/<case> per command: its stdout, then its stderr
and exit code, then every file it wrote (-o). Temporary, real-file and
checkout paths are replaced by `$TMP`, `$REAL` and `$ROOT` so that runs in
different folders compare equal. `compare` lists the
cases that differ, are missing or are new, and exits 1 when any does.
"""
import argparse, concurrent.futures as cf, hashlib, os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REAL = os.path.abspath(os.path.join(ROOT, "..", "shared", "real"))
FIXTURES = os.path.join(ROOT, "fixtures")

# (case name, arguments; FILE is the input, OUT/ names a file in the case's
# temporary folder). Every command, with the flags that change what it shows.
SNAPSHOT_CASES = [
    ("stats", ["stats", "FILE"]),
    ("stats.json", ["stats", "--json", "FILE"]),
    ("stats.bytes", ["stats", "--bytes", "FILE"]),
    ("convert.json", ["convert", "FILE", "-o", "OUT/x.json"]),
    ("convert.msgpack", ["convert", "FILE", "-o", "OUT/x.msgpack"]),
    ("culprits", ["culprits", "FILE"]),
    ("culprits.stack", ["culprits", "--stack", "FILE"]),
    ("culprits.segment", ["culprits", "--group-by", "segment", "FILE"]),
    ("culprits.json", ["culprits", "--json", "FILE"]),
    ("culprits.peak", ["culprits", "--at", "peak", "FILE"]),
    ("flamegraph", ["flamegraph", "FILE", "-o", "OUT/x.svg"]),
    ("flamegraph.stranded", ["flamegraph", "--weight", "stranded", "FILE", "-o", "OUT/x.svg"]),
    ("check", ["check", "--no-config", "FILE"]),
    ("check.json", ["check", "--no-config", "--format", "json", "FILE"]),
    ("check.github", ["check", "--no-config", "--format", "github", "FILE"]),
    ("check.junit", ["check", "--no-config", "--format", "junit", "FILE"]),
    ("check.rules", ["check", "--no-config", "--max-fragmentation", "0.3", "--min-largest-gap", "64MiB",
                     "--max-peak-reserved", "8GiB", "FILE"]),
    ("check.baseline", ["check", "--no-config", "--baseline", "FILE", "--max-regression", "peak_reserved=5%", "FILE"]),
    ("diff", ["diff", "FILE", "FILE"]),
    ("diff.json", ["diff", "--json", "FILE", "FILE"]),
    ("simulate", ["simulate", "FILE"]),
    ("simulate.json", ["simulate", "--json", "FILE"]),
    ("simulate.conf", ["simulate", "--conf", "max_split_size_mb:128", "FILE"]),
    ("plot.timeline", ["plot", "timeline", "FILE", "-o", "OUT/x.svg"]),
    ("plot.fragmentation", ["plot", "fragmentation", "FILE", "-o", "OUT/x.svg"]),
    ("plot.segments", ["plot", "segments", "FILE", "-o", "OUT/x.svg"]),
    ("plot.gaps", ["plot", "gaps", "FILE", "-o", "OUT/x.svg"]),
    ("plot.sites", ["plot", "sites", "FILE", "-o", "OUT/x.svg"]),
    ("report.html", ["report", "FILE", "-o", "OUT/x.html"]),
    ("report.md", ["report", "FILE", "-o", "OUT/x.md"]),
    ("report.svg", ["report", "FILE", "-o", "OUT/x.svg"]),
    ("report.markdown", ["report", "--markdown", "--no-what-if", "FILE"]),
    ("timeline", ["timeline", "FILE"]),
    ("timeline.csv", ["timeline", "--csv", "FILE"]),
    ("timeline.json", ["timeline", "--json", "--max-points", "500", "FILE"]),
    ("timeline.at-peak", ["timeline", "--at", "peak", "FILE"]),
    ("events", ["events", "FILE"]),
    ("events.csv", ["events", "--csv", "FILE"]),
    ("events.json", ["events", "--json", "FILE"]),
    ("oom", ["oom", "FILE"]),
    ("oom.json", ["oom", "--json", "FILE"]),
    ("view.html", ["view", "FILE", "-o", "OUT/v.html"]),
    ("view.json", ["view", "FILE", "-o", "OUT/v.json"]),
]
TEXT_CASES = [
    ("explain", ["explain", "FILE"]),
    ("explain.json", ["explain", "--json", "FILE"]),
]


def inputs():
    files = []
    for d in (REAL, FIXTURES):
        if not os.path.isdir(d):
            print(f"note: {d} is absent; its files are left out", file=sys.stderr)
            continue
        for root, _, names in os.walk(d):
            for n in sorted(names):
                if n.endswith((".md", ".py")) or n == "expected.json":
                    continue
                files.append(os.path.join(root, n))
    return sorted(files)


def run_case(binary, path, case, args, outdir):
    with tempfile.TemporaryDirectory() as tmp:
        argv = [binary] + [a.replace("FILE", path).replace("OUT/", tmp + "/") for a in args]
        env = dict(os.environ, NO_COLOR="1", COLUMNS="120")
        env.pop("GITHUB_STEP_SUMMARY", None)
        p = subprocess.run(argv, capture_output=True, env=env, cwd=tmp, timeout=600)
        parts = [p.stdout, b"\n--- stderr\n", p.stderr, f"\n--- exit {p.returncode}\n".encode()]
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), "rb") as f:
                data = f.read()
            parts.append(f"--- file {name} ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()})\n".encode())
            if not name.endswith(".msgpack"):
                parts.append(data)
        blob = (b"".join(parts).replace(tmp.encode(), b"$TMP").replace(REAL.encode(), b"$REAL")
                .replace(ROOT.encode(), b"$ROOT"))
    with open(os.path.join(outdir, case), "wb") as f:
        f.write(blob)


def cmd_run(a):
    binary = os.path.abspath(a.bin)
    if os.path.exists(a.outdir):
        shutil.rmtree(a.outdir)
    jobs = []
    for path in inputs():
        if path.startswith(REAL + os.sep):
            key = "real__" + os.path.relpath(path, REAL)
        else:
            key = os.path.relpath(path, ROOT)
        d = os.path.join(a.outdir, key.replace(os.sep, "__"))
        os.makedirs(d, exist_ok=True)
        cases = TEXT_CASES if path.endswith(".txt") else SNAPSHOT_CASES
        for case, args in cases:
            jobs.append((path, case, args, d))
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [ex.submit(run_case, binary, p, c, args, d) for p, c, args, d in jobs]
        for f in futs:
            f.result()
    print(f"{len(jobs)} cases of {len(set(j[0] for j in jobs))} inputs written to {a.outdir}")


def cmd_compare(a):
    def listing(d):
        out = {}
        for root, _, names in os.walk(d):
            for n in names:
                p = os.path.join(root, n)
                out[os.path.relpath(p, d)] = p
        return out
    old, new = listing(a.old), listing(a.new)
    bad = 0
    for k in sorted(set(old) | set(new)):
        if k not in new:
            print(f"missing: {k}")
            bad += 1
        elif k not in old:
            print(f"new:     {k}")
            bad += 1
        elif open(old[k], "rb").read() != open(new[k], "rb").read():
            print(f"differs: {k}")
            bad += 1
    print(f"{len(set(old) & set(new))} cases compared, {bad} differ, are missing or new")
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("outdir")
    r.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "fragscope"))
    r.add_argument("--jobs", type=int, default=2)
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    a = ap.parse_args()
    {"run": cmd_run, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
