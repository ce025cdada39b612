#!/usr/bin/env python3
"""A memory snapshot written by Python's own pickler from a small model of the
caching allocator, independent of `fragscope synth`: for checking fragscope's
speed and memory on files shaped unlike synth's.

    python3 scripts/make_snapshot.py --events 2000000 --seed 3 -o target/bench-inputs/py-3.pickle
    python3 scripts/make_snapshot.py --events 1000000 --streams 3 --sites 2000 \
        --depth 20-200 --ring 600000 --devices 2 -o /tmp/py.pickle

The model: PyTorch's size rounding, small (2 MiB) and large (20 MiB, or the request
rounded to 2 MiB) segments, best-fit reuse of cached blocks per pool and stream,
splitting and merging, a memory limit that frees cached segments and then records
`oom` (on which the training loop drops its step, empties the cache and lowers
its batch size), `empty_cache()` now and then, and frees completed late for blocks used on
another stream. The workload: a training loop (parameters, optimizer state, one
activation set per layer whose sizes follow a random sequence length, gradients,
temporaries) with random side allocations of log-uniform sizes and lifetimes.
Each allocation site has its own stack of C++ and Python frames; frames are dicts
shared between stacks, so the pickler writes each once and refers to it after, as
PyTorch's snapshots do. `--ring N` keeps the last N events of each device's trace,
as a full ring buffer does (the final segments are always whole); `--keep F` keeps
the last fraction F of each.
"""
import argparse
import bisect
import pickle
import random

KB = 1024
MB = 1024 * KB
SMALL = 1 * MB
SMALL_SEG = 2 * MB
LARGE_SEG = 20 * MB
MIN_LARGE = 10 * MB
ROUND_LARGE = 2 * MB


def round_size(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


def segment_size(rounded):
    if rounded <= SMALL:
        return SMALL_SEG
    if rounded < MIN_LARGE:
        return LARGE_SEG
    return (rounded + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class Block:
    __slots__ = ("addr", "size", "req", "state", "seg", "prev", "next", "frames")

    def __init__(self, addr, size, seg):
        self.addr, self.size, self.seg = addr, size, seg
        self.req, self.state, self.prev, self.next, self.frames = 0, "inactive", None, None, []


class Segment:
    __slots__ = ("addr", "size", "stream", "small", "first", "frames")


class Device:
    def __init__(self, index, limit, rng, clock, shared_lists=False):
        self.index, self.limit, self.rng, self.clock = index, limit, rng, clock
        self.shared_lists = shared_lists
        self.trace = []
        self.segments = {}
        self.free = {}  # (small, stream) -> sorted [(size, addr)]
        self.by_addr = {}  # free block addr -> Block
        self.reserved = 0
        self.next_addr = 0x7F0000000000 + index * (1 << 40)

    def event(self, action, addr, size, stream, frames, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": stream,
             "time_us": self.clock.tick(), "compile_context": "N/A", "user_metadata": ""}
        e.update(extra)
        if frames is not None:
            e["frames"] = frames if self.shared_lists else list(frames)
        self.trace.append(e)

    def _cache(self, b):
        key = (b.seg.small, b.seg.stream)
        bisect.insort(self.free.setdefault(key, []), (b.size, b.addr))
        self.by_addr[b.addr] = b

    def _uncache(self, b):
        lst = self.free[(b.seg.small, b.seg.stream)]
        del lst[bisect.bisect_left(lst, (b.size, b.addr))]
        del self.by_addr[b.addr]

    def _new_segment(self, size, stream, small, frames):
        if self.reserved + size > self.limit:
            self.release_cached(frames)
            if self.reserved + size > self.limit:
                return None
        s = Segment()
        s.addr, s.size, s.stream, s.small, s.frames = self.next_addr, size, stream, small, frames
        # Addresses of freed segments are not reused here, but gaps between
        # them are left as the driver would leave them.
        self.next_addr += size + self.rng.choice((0, 0, 2 * MB, 64 * MB))
        b = Block(s.addr, size, s)
        s.first = b
        self.segments[s.addr] = s
        self.reserved += size
        self.event("segment_alloc", s.addr, size, stream, frames)
        self._cache(b)
        return s

    def malloc(self, size, stream, frames):
        rounded = round_size(size)
        small = rounded <= SMALL
        lst = self.free.get((small, stream), [])
        i = bisect.bisect_left(lst, (rounded, 0))
        if i == len(lst):
            if self._new_segment(segment_size(rounded), stream, small, frames) is None:
                self.event("oom", 0, rounded, stream, frames,
                           device_free=self.rng.randrange(0, 512 * MB))
                del self.trace[-1]["addr"]
                return None
            lst = self.free[(small, stream)]
            i = bisect.bisect_left(lst, (rounded, 0))
        _, addr = lst[i]
        b = self.by_addr[addr]
        self._uncache(b)
        rest = b.size - rounded
        if (small and rest >= 512) or (not small and rest > SMALL):
            r = Block(b.addr + rounded, rest, b.seg)
            r.prev, r.next = b, b.next
            if b.next:
                b.next.prev = r
            b.next, b.size = r, rounded
            self._cache(r)
        b.state, b.req, b.frames = "active_allocated", size, frames
        self.event("alloc", b.addr, size, stream, frames)
        return b

    def free_block(self, b, frames, late=False):
        self.event("free_requested", b.addr, b.req, b.seg.stream, frames)
        if late:
            b.state = "active_pending_free"
            return
        self.complete(b, frames)

    def complete(self, b, frames):
        self.event("free_completed", b.addr, b.req, b.seg.stream, frames)
        b.state, b.frames = "inactive", []
        for n in (b.prev, b.next):
            if n is not None and n.state == "inactive" and n.addr in self.by_addr:
                self._uncache(n)
                if n is b.prev:
                    n.size += b.size
                    n.next = b.next
                    if b.next:
                        b.next.prev = n
                    if b.seg.first is b:
                        b.seg.first = n
                    b = n
                else:
                    b.size += n.size
                    b.next = n.next
                    if n.next:
                        n.next.prev = b
        self._cache(b)

    def release_cached(self, frames):
        for s in list(self.segments.values()):
            b = s.first
            if b.prev is None and b.next is None and b.addr in self.by_addr:
                self._uncache(b)
                del self.segments[s.addr]
                self.reserved -= s.size
                self.event("segment_free", s.addr, s.size, s.stream, frames)

    def final_segments(self):
        out = []
        for addr in sorted(self.segments):
            s = self.segments[addr]
            blocks, b = [], s.first
            while b is not None:
                blocks.append({"address": b.addr, "size": b.size,
                               "requested_size": b.req if b.state != "inactive" else 0,
                               "state": b.state, "frames": b.frames})
                b = b.next
            active = [x for x in blocks if x["state"] != "inactive"]
            out.append({
                "device": self.index, "address": s.addr, "total_size": s.size,
                "allocated_size": sum(x["size"] for x in blocks if x["state"] == "active_allocated"),
                "active_size": sum(x["size"] for x in active),
                "requested_size": sum(x["requested_size"] for x in active),
                "stream": s.stream, "segment_type": "small" if s.small else "large",
                "segment_pool_id": (0, 0), "is_expandable": False,
                "frames": s.frames, "blocks": blocks,
            })
        return out


class Clock:
    def __init__(self, rng):
        self.t, self.rng = 1_780_000_000_000_000 + rng.randrange(10**9), rng

    def tick(self):
        self.t += self.rng.choice((0, 1, 1, 2, 5, 40))
        return self.t


def make_stacks(rng, sites, depth):
    """`sites` stacks, innermost frame first, of shared frame dicts."""
    lo, hi = depth
    cpp = [{"name": f"at::native::{rng.choice(['add', 'mm', 'bmm', 'cat', 'softmax', 'gelu', 'layer_norm', 'copy_', 'empty', 'sdpa'])}_kernel_{i}(at::Tensor const&, c10::Scalar const&)",
            "filename": rng.choice(["??", "", "RegisterCUDA_0.cpp", "VariableType_2.cpp", "Functions.cpp"]),
            "line": 0} for i in range(400)]
    head = [{"name": "torch::unwind::unwind()", "filename": "??", "line": 0},
            {"name": "torch::CapturedTraceback::gather(bool, bool, bool)", "filename": "??", "line": 0},
            {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
             "filename": "CUDACachingAllocator.cpp", "line": 0}]
    mods = [f"/opt/conda/lib/python3.{rng.choice([10, 11, 12])}/site-packages/{p}"
            for p in ("torch/nn/modules/module.py", "torch/nn/modules/linear.py", "torch/nn/functional.py",
                      "torch/autograd/graph.py", "torch/optim/adamw.py", "torch/_tensor.py",
                      "transformers/models/llama/modeling_llama.py", "accelerate/accelerator.py")]
    py = [{"name": rng.choice(["forward", "_call_impl", "_wrapped_call_impl", "backward", "step", "_single_tensor_adamw", "apply", "<lambda>", "attention"]),
           "filename": rng.choice(mods + [f"/home/user/project/model/block_{i % 17}.py"]), "line": rng.randrange(1, 3000)}
          for i in range(600)]
    tail = [{"name": n, "filename": "??", "line": 0}
            for n in ("_PyEval_EvalFrameDefault", "PyEval_EvalCode", "Py_RunMain", "__libc_start_main", "_start")]
    main = {"name": "<module>", "filename": "/home/user/project/train.py", "line": 311}
    stacks = []
    for _ in range(sites):
        d = rng.randint(lo, hi)
        body = []
        n_cpp = rng.randint(3, max(3, d // 3))
        body += rng.sample(cpp, min(n_cpp, len(cpp)))
        while len(body) < d - len(head) - len(tail) - 1:
            body.append(rng.choice(py))
            if rng.random() < 0.3:
                body.append(rng.choice(cpp))
        stacks.append(head + body + tail + [main])
    return stacks


def workload(dev, rng, stacks, events, streams, side_rate, recover=True):
    hidden = rng.choice((1024, 2048, 4096, 5120))
    # Parameters and optimizer state take 60 bytes per hidden² a layer:
    # at most two fifths of the device.
    layers = max(2, min(rng.randint(8, 48), int(0.4 * dev.limit / (60 * hidden * hidden))))
    side_log2 = max(12.0, min(30.0, (dev.limit // 64).bit_length() - 1))
    site = lambda k: stacks[k % len(stacks)]
    params = []
    for i in range(layers):
        for j, mult in enumerate((4, 4, 8, 8, 1, 1)):
            b = dev.malloc(hidden * hidden * mult // 2 if j < 4 else hidden * 2, 0, site(i * 7 + j))
            if b:
                params.append(b)
    opt_state = []
    side = []  # (expires_at, block, late)
    side_bytes = 0
    step = 0
    max_batch = 16
    while len(dev.trace) < events:
        step += 1
        seq = rng.choice((128, 256, 384, 512, 640, 1024, 2048))
        batch = rng.randint(1, max_batch)
        acts = []
        oom = False
        for i in range(layers):
            for j in range(rng.randint(3, 9)):
                n = batch * seq * hidden * rng.choice((2, 2, 4, 8)) // rng.choice((1, 2, 4))
                b = dev.malloc(n, 0, site(1000 + i * 13 + j))
                if b is None:
                    oom = True
                    break
                acts.append(b)
            if oom:
                break
            for _ in range(rng.randint(1, 4)):  # temporaries
                b = dev.malloc(rng.randint(1, batch * seq * 64), 0, site(5000 + rng.randrange(97)))
                if b:
                    dev.free_block(b, b.frames)
            # Side allocations: random sizes and lifetimes, some on other streams.
            # (At most a quarter of the device; a failed one is given up.)
            while rng.random() < side_rate and (side_bytes < dev.limit // 4 or not recover):
                s = rng.choice(streams)
                b = dev.malloc(int(2 ** rng.uniform(9, side_log2)), s, site(9000 + rng.randrange(3000)))
                if b is None:
                    if recover:
                        break
                    continue
                side_bytes += b.size
                side.append((len(dev.trace) + int(2 ** rng.uniform(2, 16)), b, s != 0 and rng.random() < 0.5))
        if oom:
            # The training script catches the OOM: drops the step, empties
            # the cache and lowers its batch size.
            for b in reversed(acts):
                dev.free_block(b, b.frames)
            dev.release_cached(site(7001))
            if recover:
                max_batch = max(1, batch * 3 // 4)
            continue
        rng.shuffle(acts[len(acts) // 2:])
        for b in reversed(acts):
            if rng.random() < 0.2:  # a gradient before the activation goes
                g = dev.malloc(b.req, 0, site(2000 + rng.randrange(400)))
                if g:
                    dev.free_block(g, g.frames)
            dev.free_block(b, b.frames)
        if step == 1:
            for p in params:
                for _ in range(2):
                    b = dev.malloc(p.req * 2, 0, site(3000 + rng.randrange(50)))
                    if b:
                        opt_state.append(b)
        still, pending = [], []
        for exp, b, late in side:
            if exp <= len(dev.trace):
                side_bytes -= b.size
                dev.free_block(b, b.frames, late=late)
                if late:
                    pending.append(b)
            else:
                still.append((exp, b, late))
        side = still
        for b in pending:  # the other stream's events are reaped by a later malloc
            dev.complete(b, None)
        if rng.random() < 0.05:
            dev.release_cached(site(7000))
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="events of each busy device's trace")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sites", type=int, default=600, help="distinct allocation stacks")
    ap.add_argument("--depth", default="20-120", help="stack depth range, LO-HI")
    ap.add_argument("--streams", type=int, default=2, help="streams (0 and pointer values)")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--busy", type=int, default=1,
                    help="devices with --events events each (the others have a twentieth)")
    ap.add_argument("--side-rate", type=float, default=0.6, help="chance of each further side allocation")
    ap.add_argument("--limit-gb", type=float, default=70.0, help="the device's memory")
    ap.add_argument("--no-recover", action="store_true",
                    help="a script that keeps its batch size after an OOM and retries its side "
                         "allocations: a trace that runs into the device's limit over and over")
    ap.add_argument("--ring", type=int, default=0, help="keep the last N events of each trace")
    ap.add_argument("--keep", type=float, default=1.0, help="keep the last fraction of each trace")
    ap.add_argument("--no-stacks", action="store_true",
                    help="a recording without stack traces: every frames list empty, the same "
                         "run otherwise (about 77 bytes an event at the py-shallow shape)")
    ap.add_argument("--shared-lists", action="store_true",
                    help="each call site's frames list one object, named by every event of the "
                         "site (a writer that keeps a list per site): the pickler writes each list "
                         "once and refers to it after, about 77 bytes an event at the py-dense shape")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lo, hi = (int(x) for x in a.depth.split("-"))
    stacks = make_stacks(rng, a.sites, (lo, hi))
    streams = [0] + [0x5600_0000_0000 + rng.randrange(1 << 30) * 16 for _ in range(a.streams - 1)]
    clock = Clock(rng)
    segments, traces = [], []
    for d in range(a.devices):
        dev = Device(d, int(a.limit_gb * (1 << 30)), rng, clock, a.shared_lists)
        workload(dev, rng, stacks, a.events if d < a.busy else a.events // 20, streams, a.side_rate,
                 recover=not a.no_recover)
        trace = dev.trace[-a.ring:] if a.ring else dev.trace
        if a.keep < 1.0:
            trace = trace[len(trace) - int(len(trace) * a.keep):]
        segments += dev.final_segments()
        traces.append(trace)
    if a.no_stacks:
        for e in (e for t in traces for e in t):
            e["frames"] = []
        for seg in segments:
            seg["frames"] = []
            for b in seg["blocks"]:
                b["frames"] = []
    snap = {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False}}
    with open(a.out, "wb") as f:
        pickle.dump(snap, f)
    n = sum(len(t) for t in traces)
    print(f"{a.out}: {n} events, {len(segments)} segments, {a.sites} stacks")


if __name__ == "__main__":
    main()
