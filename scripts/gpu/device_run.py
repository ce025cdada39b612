#!/usr/bin/env python3
"""One session on a GPU machine, end to end:

1. record every workload under every setting (scripts/gpu/record.py);
2. pack the recordings into OUT/recordings.tar.NN, parts of at most 15 MiB;
3. if time allows, record one long uncapped run and time `fragscope stats`
   and `fragscope report` on it beside Python's pickle.load, each in a fresh
   process, peak RSS from wait4 (OUT/large_timing.json).

    OUT=/some/dir python3 scripts/gpu/device_run.py [--bin PATH] [--budget SECONDS]

Step 3 is skipped when less than its share of --budget is left, so that the
recordings always come back.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PART = 15 << 20


def sh(cmd, log):
    print("$", " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        print(f"cannot run {cmd[0]}: {e}", flush=True)
        return 127
    with open(log, "a") as f:
        f.write(p.stdout)
    print(p.stdout[-4000:], flush=True)
    return p.returncode


def pack(src, out):
    """Writes src as a tar split into parts of PART bytes."""
    tmp = os.path.join("/tmp", "recordings.tar")
    with tarfile.open(tmp, "w") as t:
        t.add(src, arcname="recordings")
    n = 0
    with open(tmp, "rb") as f:
        while True:
            chunk = f.read(PART)
            if not chunk:
                break
            with open(os.path.join(out, f"recordings.tar.{n:02d}"), "wb") as g:
                g.write(chunk)
            n += 1
    print(f"packed {os.path.getsize(tmp)} bytes into {n} part(s)", flush=True)


def measure(cmd):
    """Wall seconds and peak RSS (KiB, from wait4) of one fresh process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")[-500:]
    p.stderr.close()
    return {"cmd": cmd, "rc": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 3),
            "max_rss_kib": ru.ru_maxrss, "stderr_tail": err}


def time_large(path, binary, out, rounds):
    load = [sys.executable, "-c", "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))", path]
    cmds = {
        "pickle.load": load,
        "stats": [binary, "stats", path],
        "report": [binary, "report", path, "-o", "/tmp/large-report.html"],
        "stats (taskset -c 0)": ["taskset", "-c", "0", binary, "stats", path],
        "report (taskset -c 0)": ["taskset", "-c", "0", binary, "report", path, "-o",
                                  "/tmp/large-report.html"],
    }
    res = {"file": os.path.basename(path), "bytes": os.path.getsize(path),
           "nproc": os.cpu_count(), "rounds": []}
    for r in range(rounds):
        row = {}
        for name, cmd in cmds.items():
            row[name] = measure(cmd)
            print(f"round {r} {name}: {row[name]['wall_s']} s, {row[name]['max_rss_kib']} KiB, "
                  f"rc {row[name]['rc']}", flush=True)
        res["rounds"].append(row)
        with open(os.path.join(out, "large_timing.json"), "w") as f:
            json.dump(res, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=".gpubin/fragscope")
    ap.add_argument("--budget", type=float, default=480, help="seconds this script may take")
    ap.add_argument("--large-steps", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    out = os.environ.get("OUT") or "/tmp/gpu-out"
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "device_run.log")
    rec = "/tmp/gpu-rec"
    extra = ["--dry-run", "--scale", "8"] if args.dry_run else []
    sh(["nvidia-smi"], log)
    rc = sh([sys.executable, os.path.join(HERE, "record.py"), "--out", rec, "--jobs", "4",
             "--timeout", "150"] + extra, log)
    pack(rec, out)
    left = args.budget - (time.time() - t0)
    print(f"recordings: rc {rc}; {left:.0f} s of the budget left", flush=True)
    if left < 200:
        print("not enough time left for the long run", flush=True)
        return rc
    large = "/tmp/gpu-large"
    rc2 = sh([sys.executable, os.path.join(HERE, "record.py"), "--out", large, "--workloads", "",
              "--large", str(args.large_steps), "--timeout", "120"] + extra, log)
    path = os.path.join(large, "large", "large.pickle")
    if rc2 != 0 or not os.path.exists(path):
        print("the long run failed", flush=True)
        return rc or 1
    with open(os.path.join(large, "large", "large.json")) as f:
        meta = json.load(f)
    with open(os.path.join(out, "large.json"), "w") as f:
        json.dump({k: v for k, v in meta.items() if k != "memory_summary"}, f, indent=1)
    left = args.budget - (time.time() - t0)
    rounds = max(1, min(args.rounds, int(left // 60)))
    print(f"timing {path} ({os.path.getsize(path)} bytes), {rounds} round(s)", flush=True)
    if os.path.exists(args.bin):
        time_large(path, os.path.abspath(args.bin), out, rounds)
    else:
        print(f"no binary at {args.bin}: timing skipped", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
