#!/usr/bin/env python3
"""Records the same programs under several PYTORCH_CUDA_ALLOC_CONF settings on
a real GPU, so that fragscope's what-if model can be held against what each
setting really did (docs/fidelity.md, "Under other settings, on a real GPU").

    python3 scripts/gpu/record.py --out DIR            # on a machine with a GPU
    python3 scripts/gpu/record.py --out DIR --dry-run  # anywhere: CPU, stubbed history

Each workload runs once per setting, each run in a fresh process (the
allocator reads PYTORCH_CUDA_ALLOC_CONF when CUDA starts), capped with
torch.cuda.set_per_process_memory_fraction so that out-of-memory errors
happen at a small, known capacity. The cap of a workload is fixed by its
design, or calibrated once: a first run under the defaults without a cap
gives its peaks, and the cap is set between its peak allocated and its peak
reserved (rounded down to 64 MiB).

Per run the script writes, into DIR/<workload>/:
  <setting>.pickle.gz      the snapshot at the end (_dump_snapshot, gzipped)
  <setting>.oom.pickle.gz  the snapshot at the first OOM, if any
  <setting>.json           versions, GPU, capacity and fraction, the OOM
                           messages, memory_stats(), memory_summary()
and DIR/manifest.json lists every run. With --large, it also records one
long run for timing (DIR/large/…), without the cap.

A program that fails is reported and the others go on; the script exits 1 if
any run failed.

Then copy DIR/<workload>/<setting>.pickle.gz and .json (the capped runs; the
uncapped calibration run is skipped by the test) into fixtures/gpu/<workload>/
and run `FRAGSCOPE_BLESS=1 cargo test --test it gpu_fidelity`: it writes the
cross-setting table into docs/fidelity.md, and without FRAGSCOPE_BLESS holds
the model to it.
"""

import argparse
import gzip
import json
import os
import pickle
import platform
import random
import subprocess
import sys
import time
import traceback

MIB = 1 << 20
GIB = 1 << 30

# Setting name (used in file names) -> PYTORCH_CUDA_ALLOC_CONF.
SETTINGS = {
    "defaults": "",
    "expandable": "expandable_segments:True",
    "max_split_128": "max_split_size_mb:128",
    "roundup_4": "roundup_power2_divisions:4",
    "gc_0.8": "garbage_collection_threshold:0.8",
}

MAX_ENTRIES = 2_000_000
# The device size a dry run's metadata names.
DRY_TOTAL = 80 * GIB


# ---------------------------------------------------------------- workloads
#
# Each workload takes (torch, ctx) and calls ctx.attempt(label, fn) around
# every unit of work that may run out of memory: an OOM there is recorded and
# the program goes on with the next unit, as a long job that skips a batch
# would. ctx.scale shrinks sizes for the dry run; ctx.device is "cuda" on a
# GPU.


def small_transformer(torch, ctx, layers, foreach):
    """A seeded encoder stack with embedding and output layer, and its AdamW
    (`foreach=None`: PyTorch's default); returns (model, optimizer, vocab, batch)."""
    nn = torch.nn
    torch.manual_seed(0)
    s = ctx.scale
    d, heads, ff, vocab, batch = 1024 // s, 16, 4096 // s, 8192 // s, 8
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
    model = nn.Sequential(
        nn.Embedding(vocab, d),
        nn.TransformerEncoder(layer, layers, enable_nested_tensor=False),
        nn.Linear(d, vocab),
    ).to(ctx.device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach), vocab, batch


def transformer_varlen(torch, ctx):
    """Training a small transformer on batches of varying sequence length:
    activations of many sizes come and go each step (the classic pattern of
    fragmentation in training)."""
    nn = torch.nn
    F = torch.nn.functional
    rng = random.Random(0)
    s = ctx.scale
    model, opt, vocab, batch = small_transformer(torch, ctx, layers=2, foreach=None)
    lengths = [rng.choice([128, 256, 384, 512, 768, 1024, 1536]) // s for _ in range(14)]
    ctx.params["lengths"] = lengths

    def step(length):
        x = torch.randint(0, vocab, (batch, length), device=ctx.device)
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=ctx.device)
        logits = model[2](model[1](model[0](x), mask=mask, is_causal=True))
        loss = F.cross_entropy(logits.reshape(-1, vocab), x.reshape(-1))
        loss.backward()
        opt.step()

    for i, length in enumerate(lengths):
        ctx.attempt(f"step {i} (length {length})", lambda: step(length))
        opt.zero_grad(set_to_none=True)


def gap_fragmented(torch, ctx):
    """'Plenty free, but no gap fits': one big segment carved into 128 MiB
    blocks, every other one freed, then one request larger than any gap
    though smaller than what is free in total. Then smaller requests, and a
    second round with other sizes."""
    s = ctx.scale
    u8 = torch.uint8

    def empty(n):
        return torch.empty(n // s, dtype=u8, device=ctx.device)

    def round_(big, block, count, request):
        held = {}

        def carve():
            b = empty(big)
            del b
            for i in range(count):
                held[i] = empty(block)
            for i in range(0, count, 2):
                del held[i]

        ctx.attempt(f"carve {count} x {block // MIB} MiB", carve)
        ctx.attempt(f"request {request / GIB:.2f} GiB", lambda: empty(request))
        ctx.attempt(f"request {request / 2 / GIB:.2f} GiB", lambda: empty(request // 2))
        held.clear()

    round_(6 * GIB, 128 * MIB, 40, 5 * GIB // 2)
    round_(5 * GIB, 96 * MIB, 48, 2 * GIB)


def kv_cache_decode(torch, ctx):
    """A decode loop whose key/value caches grow by a few tokens per step
    (torch.cat allocates the longer tensor before the shorter one is freed),
    for several sequences of different prompt and decode lengths."""
    torch.manual_seed(0)
    s = ctx.scale
    layers, heads, hd, batch = 4, 16, 128 // s, 16
    d = heads * hd
    dt = torch.float16 if ctx.device == "cuda" else torch.float32
    w_qkv = [torch.randn(d, 3 * d, device=ctx.device, dtype=dt) * 0.02 for _ in range(layers)]
    w_o = [torch.randn(d, d, device=ctx.device, dtype=dt) * 0.02 for _ in range(layers)]
    F = torch.nn.functional
    sequences = [(512 // s, 48), (1536 // s, 64), (256 // s, 80), (1024 // s, 64)]
    ctx.params["sequences"] = sequences
    chunk = 8

    def split(t, n):
        b = t.shape[0]
        return t.view(b, n, heads, hd).transpose(1, 2)

    def run(prompt, steps):
        x = torch.randn(batch, prompt, d, device=ctx.device, dtype=dt)
        caches = []
        for li in range(layers):
            q, k, v = (x @ w_qkv[li]).chunk(3, dim=-1)
            k, v = split(k, prompt).contiguous(), split(v, prompt).contiguous()
            caches.append([k, v])
        x = x[:, -chunk:, :].contiguous()
        for _ in range(steps):
            for li in range(layers):
                q, k, v = (x @ w_qkv[li]).chunk(3, dim=-1)
                kc, vc = caches[li]
                caches[li] = [torch.cat([kc, split(k, chunk)], dim=2),
                              torch.cat([vc, split(v, chunk)], dim=2)]
                del kc, vc
                o = F.scaled_dot_product_attention(split(q, chunk), *caches[li])
                x = o.transpose(1, 2).reshape(batch, chunk, d) @ w_o[li]
        del caches

    for i, (prompt, steps) in enumerate(sequences):
        ctx.attempt(f"sequence {i} (prompt {prompt}, {steps} steps)", lambda: run(prompt, steps))


def record_stream_pending(torch, ctx):
    """Cross-stream use: tensors made on the default stream are read on a
    side stream kept busy, marked with record_stream and freed at once, so
    their blocks stay pending until the side stream's work completes; the
    default stream meanwhile allocates more of mixed sizes."""
    torch.manual_seed(0)
    rng = random.Random(1)
    s = ctx.scale
    dev = ctx.device
    cuda = ctx.device == "cuda"
    side = torch.cuda.Stream() if cuda else None
    sizes = [rng.choice([3, 7, 24, 40, 96, 160, 200]) * MIB // s for _ in range(120)]
    ctx.params["sizes_mib"] = [x * s // MIB for x in sizes]
    keep = []

    def one(i, n):
        a = torch.empty(n // 4, dtype=torch.float32, device=dev)
        a.fill_(1.0)
        if cuda:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch.cuda._sleep(200_000)
                b = a * 2.0
            a.record_stream(side)
            b.record_stream(side)
        else:
            b = a * 2.0
        del a, b
        c = torch.empty(n // 8, dtype=torch.float32, device=dev)
        keep.append(c)
        if len(keep) > 12:
            keep.pop(rng.randrange(len(keep)))
        if cuda and i % 16 == 15:
            side.synchronize()

    for i, n in enumerate(sizes):
        ctx.attempt(f"iteration {i} ({n // MIB} MiB)", lambda: one(i, n))
    keep.clear()
    if cuda:
        torch.cuda.synchronize()


WORKLOADS = {
    "transformer_varlen": transformer_varlen,
    "gap_fragmented": gap_fragmented,
    "kv_cache_decode": kv_cache_decode,
    "record_stream_pending": record_stream_pending,
}

# A capacity fixed by the workload's design; the others are calibrated.
FIXED_CAPACITY = {"gap_fragmented": 8 * GIB}


# ---------------------------------------------------------------- one run


class DryOOM(Exception):
    """Stands in for torch.OutOfMemoryError in a dry run."""


class Ctx:
    def __init__(self, torch, device, scale, dump_oom, inject_oom):
        self.torch = torch
        self.device = device
        self.scale = scale
        self.dump_oom = dump_oom
        self.inject_oom = inject_oom
        self.attempts = 0
        self.ooms = []
        self.params = {}
        self.oom_types = tuple(
            t for t in (getattr(torch, "OutOfMemoryError", None),
                        getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None))
            if isinstance(t, type)
        ) + (DryOOM,)

    def attempt(self, label, fn):
        self.attempts += 1
        try:
            if self.inject_oom and self.attempts == 2:
                raise DryOOM("injected out-of-memory error (dry run)")
            fn()
        except (RuntimeError,) + self.oom_types as e:
            message = str(e)
            # A library's own allocation failing under the cap (cuBLAS's
            # workspace, say) is a RuntimeError, not an OutOfMemoryError.
            if not isinstance(e, self.oom_types) and not (
                    "out of memory" in message or "ALLOC_FAILED" in message):
                raise
            first = not self.ooms
            self.ooms.append({"attempt": self.attempts, "label": label, "message": message,
                              "kind": type(e).__name__})
            del e
            if first:
                self.dump_oom()


def child(args):
    """One workload under the PYTORCH_CUDA_ALLOC_CONF this process was
    started with."""
    import torch

    out = args.child_out
    name = args.child_name
    dry = args.dry_run
    device = "cpu" if dry else "cuda"
    meta = {
        "workload": args.workload,
        "setting": args.setting,
        "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "torch": torch.__version__,
        "cuda": getattr(torch.version, "cuda", None),
        "python": platform.python_version(),
        "dry_run": dry,
        "max_entries": MAX_ENTRIES,
    }

    def snapshot_to(path):
        if dry:
            snap = {"segments": [], "device_traces": [[]], "dry_run": True}
        else:
            snap = torch.cuda.memory._snapshot()
        opener = (lambda p: gzip.open(p, "wb", compresslevel=9)) if path.endswith(".gz") else (
            lambda p: open(p, "wb"))
        with opener(path + ".tmp") as f:
            pickle.dump(snap, f, protocol=4)
        os.replace(path + ".tmp", path)

    if not dry:
        torch.cuda.init()
        props = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info(0)
        meta["gpu"] = props.name
        meta["device_total"] = total
        meta["device_free_at_start"] = free
        meta["props_total_memory"] = props.total_memory
        try:
            meta["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as e:  # noqa: BLE001 - informative only
            meta["driver"] = f"unknown ({e})"
        if args.capacity:
            fraction = args.capacity / total
            torch.cuda.set_per_process_memory_fraction(fraction, 0)
            meta["capacity"] = args.capacity
            meta["memory_fraction"] = fraction
            # What the allocator computes from the fraction (C++: size_t(f * total)).
            meta["allowed_memory_maximum"] = int(fraction * float(total))
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
    else:
        # The same keys as on a GPU, for a device of DRY_TOTAL bytes, so that
        # a dry run's files exercise what reads them (never a recording).
        meta["capacity"] = args.capacity
        meta["device_total"] = DRY_TOTAL
        if args.capacity:
            meta["memory_fraction"] = args.capacity / DRY_TOTAL

    oom_path = os.path.join(out, f"{name}.oom.pickle.gz")
    ctx = Ctx(torch, device, args.scale, lambda: snapshot_to(oom_path), dry)
    t0 = time.time()
    # Whatever happens, the snapshot and what is known are written.
    failure = None
    try:
        WORKLOADS[args.workload](torch, ctx)
        if not dry:
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - recorded, then the run fails
        failure = traceback.format_exc()
        print(failure, file=sys.stderr, flush=True)
    meta["failure"] = failure
    meta["seconds"] = round(time.time() - t0, 3)
    meta["attempts"] = ctx.attempts
    meta["ooms"] = ctx.ooms
    meta["params"] = ctx.params
    ext = ".pickle" if args.workload == "large" else ".pickle.gz"
    snapshot_to(os.path.join(out, name + ext))
    if not dry:
        torch.cuda.memory._record_memory_history(enabled=None)
        stats = torch.cuda.memory_stats(0)
        meta["memory_stats"] = {k: v for k, v in stats.items()}
        meta["memory_summary"] = torch.cuda.memory_summary(0)
    write_json(os.path.join(out, f"{name}.json"), meta)
    if failure:
        sys.exit(1)


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------- driver


def run_child(args, workload, setting, conf, capacity, name, out, timeout, extra=()):
    env = dict(os.environ)
    env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--child",
           "--workload", workload, "--setting", setting, "--child-name", name,
           "--child-out", out, "--capacity", str(capacity or 0), "--scale", str(args.scale),
           *extra]
    if args.dry_run:
        cmd.append("--dry-run")
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, log = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, log = "timeout", f"timed out after {timeout} s\n{e.stdout or ''}{e.stderr or ''}"
    with open(os.path.join(out, f"{name}.log"), "w") as f:
        f.write(log if isinstance(log, str) else str(log))
    return {"workload": workload, "setting": setting, "conf": conf, "capacity": capacity,
            "rc": rc, "seconds": round(time.time() - t0, 1), "name": name}


def calibrated_capacity(meta_path):
    """Between the uncapped run's peak allocated and peak reserved, rounded
    down to 64 MiB, and above the peak allocated."""
    with open(meta_path) as f:
        m = json.load(f)
    st = m["memory_stats"]
    alloc = st["allocated_bytes.all.peak"]
    res = st["reserved_bytes.all.peak"]
    cap = (alloc + res) // 2 // (64 * MIB) * (64 * MIB)
    return max(cap, (alloc // (64 * MIB) + 1) * (64 * MIB))


def parallel(jobs, fn, items):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(fn, items))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu-recordings")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--jobs", type=int, default=4, help="runs at a time (each is capped)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per run")
    ap.add_argument("--dry-run", action="store_true",
                    help="run on the CPU with the memory history stubbed (checks the logic)")
    ap.add_argument("--scale", type=int, default=1, help="divide sizes (dry runs)")
    ap.add_argument("--large", type=int, default=0, metavar="STEPS",
                    help="also record one long uncapped transformer run of STEPS steps")
    # Internal: one run.
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--setting", help=argparse.SUPPRESS)
    ap.add_argument("--child-name", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--capacity", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--large-steps", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if args.workload == "large":
            WORKLOADS["large"] = lambda torch, ctx: large_run(torch, ctx, args.large_steps)
        child(args)
        return 0

    workloads = [w for w in args.workloads.split(",") if w]
    settings = [s for s in args.settings.split(",") if s]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    for s in settings:
        if s not in SETTINGS:
            ap.error(f"unknown setting {s!r}; known: {', '.join(SETTINGS)}")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    runs = []

    # 1. Calibration: uncapped, under the defaults, for workloads without a fixed cap.
    capacity = dict(FIXED_CAPACITY)
    to_calibrate = [w for w in workloads if w not in capacity]

    def calibrate(w):
        d = os.path.join(args.out, w)
        os.makedirs(d, exist_ok=True)
        r = run_child(args, w, "defaults", "", 0, "uncapped", d, args.timeout)
        print(f"[{time.time() - t0:6.1f}s] {w} uncapped: rc={r['rc']} ({r['seconds']} s)", flush=True)
        return r

    for r in parallel(args.jobs, calibrate, to_calibrate):
        runs.append(r)
        meta = os.path.join(args.out, r["workload"], "uncapped.json")
        if r["rc"] == 0 and os.path.exists(meta):
            capacity[r["workload"]] = (calibrated_capacity(meta) if not args.dry_run
                                       else 4 * GIB)
    for w in workloads:
        if w not in capacity:
            print(f"{w}: calibration failed; its settings are not run", flush=True)

    # 2. Every setting, capped.
    items = [(w, s) for w in workloads if w in capacity for s in settings]

    def one(item):
        w, s = item
        d = os.path.join(args.out, w)
        os.makedirs(d, exist_ok=True)
        r = run_child(args, w, s, SETTINGS[s], capacity[w], s, d, args.timeout)
        print(f"[{time.time() - t0:6.1f}s] {w} {s}: rc={r['rc']} ({r['seconds']} s)", flush=True)
        return r

    runs += parallel(args.jobs, one, items)

    # 3. Optionally, one long uncapped run for timing.
    if args.large:
        d = os.path.join(args.out, "large")
        os.makedirs(d, exist_ok=True)
        r = run_child(args, "large", "defaults", "", 0, "large", d, args.timeout * 2,
                      extra=["--large-steps", str(args.large)])
        print(f"[{time.time() - t0:6.1f}s] large: rc={r['rc']} ({r['seconds']} s)", flush=True)
        runs.append(r)

    write_json(os.path.join(args.out, "manifest.json"),
               {"capacity": capacity, "settings": {s: SETTINGS[s] for s in settings},
                "workloads": workloads, "runs": runs, "seconds": round(time.time() - t0, 1)})
    failed = [r for r in runs if r["rc"] != 0]
    for r in failed:
        print(f"FAILED: {r['workload']} {r['setting']} rc={r['rc']}; log:", flush=True)
        with open(os.path.join(args.out, r["workload"], f"{r['name']}.log")) as f:
            print(f.read()[-3000:], flush=True)
    print(f"{len(runs) - len(failed)} of {len(runs)} runs ok in {time.time() - t0:.1f} s", flush=True)
    return 1 if failed else 0


def large_run(torch, ctx, steps):
    """The transformer workload for many steps (a long history to time)."""
    F = torch.nn.functional
    rng = random.Random(2)
    s = ctx.scale
    model, opt, vocab, batch = small_transformer(torch, ctx, layers=4, foreach=False)
    for i in range(steps):
        length = rng.choice([128, 256, 384, 512, 768]) // s
        x = torch.randint(0, vocab, (batch, length), device=ctx.device)
        loss = F.cross_entropy(model(x).reshape(-1, vocab), x.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:  # noqa: BLE001 - the driver reports and fails
        traceback.print_exc()
        sys.exit(1)
