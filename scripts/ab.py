#!/usr/bin/env python3
"""Before and after on one file: each command with an older binary and a newer
one, in turn, under /usr/bin/time, with Python's `pickle.load` of the same file
in every round; prints a Markdown table of medians (wall, peak RSS, the newer
binary's ratio to pickle.load).

    scripts/ab.py FILE --old OLD_BIN [--new target/release/fragscope] [--rounds 3]
        [--commands 'stats;check;report -o {d}/x.html'] [--python-load json]

`--python-load json` takes Python's `json.load` of the file as the yardstick
(for a JSON snapshot or profiler trace) instead of `pickle.load`;
`--python-load json.gz` its `json.load` of the gunzipped stream.

`{d}` in a command is a scratch folder. Outputs go to /dev/null.
"""
import argparse, os, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ("stats;check;oom;events --csv;timeline --json;timeline;simulate;"
           "report -o {d}/x.html;view -o {d}/v.html")
PY_LOAD = {
    "pickle": 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))',
    "json": 'import json,sys; json.load(open(sys.argv[1],"rb"))',
    "json.gz": 'import gzip,json,sys; json.load(gzip.open(sys.argv[1]))',
}


def timed(argv):
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}\n{r.stderr}")
    w, m = r.stderr.strip().splitlines()[-1].split()
    return float(w), int(m) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(ROOT, "target", "release", "fragscope"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--commands", default=DEFAULT, help="';'-separated")
    ap.add_argument("--python-load", choices=sorted(PY_LOAD), default="pickle")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="fragscope-ab-")
    cmds = [c.strip().format(d=d).split() for c in a.commands.split(";") if c.strip()]
    runs, py = {}, []
    for _ in range(a.rounds):
        py.append(timed(["python3", "-c", PY_LOAD[a.python_load], a.file]))
        for c in cmds:
            for b in (a.old, a.new):
                runs.setdefault((" ".join(c), b), []).append(timed([b] + c + [a.file]))
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    pw = med(py, 0)
    load = {"pickle": "pickle.load", "json": "json.load", "json.gz": "json.load(gzip)"}[a.python_load]
    print(f"`{load}`: {pw:.2f} s, {med(py, 1):.0f} MiB (medians of {a.rounds} rounds)\n")
    print("| command | before: wall | before: peak RSS | after: wall | after: / " + load +
          " | after: peak RSS |")
    print("|---|---:|---:|---:|---:|---:|")
    for c in cmds:
        n = " ".join(c).replace(d, "DIR")
        o, x = runs[(" ".join(c), a.old)], runs[(" ".join(c), a.new)]
        print(f"| `{n}` | {med(o, 0):.2f} s | {med(o, 1):.0f} MiB | {med(x, 0):.2f} s "
              f"| {med(x, 0) / pw:.3f}x | {med(x, 1):.0f} MiB |")


if __name__ == "__main__":
    main()
