#!/usr/bin/env bash
# Reruns fragscope's fuzz targets (cargo-fuzz, libFuzzer), one after the
# other at the lowest CPU priority, each for a time budget.
#
#   scripts/fuzz.sh [-t SECONDS] [-m SEED_MAX_BYTES] [TARGET...]
#
# Defaults: every target of `cargo fuzz list`, 600 s each, seeds up to
# 64 KiB (larger ones slow every execution down). Needs a nightly toolchain
# and cargo-fuzz (`rustup toolchain install nightly && cargo install
# cargo-fuzz`).
#
# Corpora live in fuzz/corpus/TARGET (ignored by git). Each run seeds them
# afresh from fuzz/seeds/ (synthetic, committed), fixtures/ (when present),
# ../shared/real (third-party files: copied at run time, never committed),
# fuzz/regressions/TARGET (inputs that once broke an invariant) and, for the
# JSON and loader targets, JSON/MessagePack conversions of the small real
# pickles. Logs and crash artifacts go to fuzz/artifacts/TARGET.
#
# Prints one summary line per target (executions, coverage, corpus size) and
# exits 1 when any target found an input that breaks an invariant, crashes,
# hangs (120 s) or exceeds 2 GB. Replay one with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-...`; after
# the fix, add a reduced copy (never a real file) to fuzz/regressions/TARGET
# so that tests/it/fuzz_seeds.rs keeps it fixed.
set -euo pipefail

secs=600
seed_max=$((64 * 1024))
while getopts "t:m:h" o; do
    case $o in
        t) secs=$OPTARG ;;
        m) seed_max=$OPTARG ;;
        *) sed -n '2,24p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
real=$root/../shared/real

command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 2; }

nice -n 19 cargo +nightly fuzz build
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# JSON and MessagePack forms of the small real snapshots.
conv=$(mktemp -d)
trap 'rm -rf "$conv"' EXIT
# FRAGSCOPE_BIN names an already-built binary to convert with.
if [ -d "$real" ]; then
    bin=${FRAGSCOPE_BIN:-}
    if [ -z "$bin" ]; then
        nice -n 19 cargo build --quiet
        bin=./target/debug/fragscope
    fi
    for f in "$real"/*.pickle "$real"/*.pkl; do
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -le "$seed_max" ] || continue
        b=$(basename "$f")
        "$bin" convert "$f" -o "$conv/$b.json" 2>/dev/null || true
        "$bin" convert "$f" -o "$conv/$b.msgpack" 2>/dev/null || true
    done
fi

# Small excerpts of the real profiler traces (the whole files are 1-54 MB of
# JSON, too slow to mutate): 60 operator and 60 memory events of each, and
# the first 1500 rows of the memory timeline, each under the seed size limit.
if [ -d "$real" ] && command -v python3 >/dev/null; then
    python3 - "$real" "$conv" <<'PY'
import gzip, json, os, sys
real, out = sys.argv[1], sys.argv[2]
for n in sorted(os.listdir(real)):
    if not n.endswith(".json.gz"):
        continue
    v = json.load(gzip.open(os.path.join(real, n)))
    if isinstance(v, dict) and isinstance(v.get("traceEvents"), list):
        ev = v["traceEvents"]
        mem = [e for e in ev if isinstance(e, dict) and e.get("name") == "[memory]"][:60]
        ops = [e for e in ev if isinstance(e, dict) and e.get("ph") == "X"][:60]
        v["traceEvents"] = ops + mem
    elif isinstance(v, list):
        v = v[:1500]
    with open(os.path.join(out, "excerpt-" + n[:-3]), "w") as f:
        json.dump(v, f)
PY
fi

seed() { # seed TARGET FILE...
    local dir=fuzz/corpus/$1
    shift
    for f in "$@"; do
        [ -f "$f" ] || continue
        local n
        n=$(stat -c %s "$f")
        [ "$n" -gt 0 ] && [ "$n" -le "$seed_max" ] || continue
        cp -n "$f" "$dir/seed-$(basename "$f")"
    done
}

failed=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    fixtures=()
    [ -d fixtures ] && mapfile -t fixtures < <(find fixtures -type f | sort)
    case $t in
        json)
            dict=fuzz/dicts/json.dict
            seed "$t" fuzz/seeds/*.json "$conv"/*.pickle.json "$conv"/*.pkl.json \
                $(printf '%s\n' "${fixtures[@]}" | grep -E '\.json$')
            ;;
        profiler)
            dict=fuzz/dicts/json.dict
            seed "$t" fuzz/seeds/chrome_trace_min.json fuzz/seeds/memory_timeline_min.json \
                "$conv"/excerpt-*.json
            ;;
        check_config)
            dict=fuzz/dicts/toml.dict
            seed "$t" fuzz/seeds/*.toml
            [ -d fixtures ] && seed "$t" $(find fixtures -name '*.toml' | sort)
            ;;
        pickle)
            dict=fuzz/dicts/pickle.dict
            seed "$t" fuzz/seeds/*.pickle "$real"/*.pickle "$real"/*.pkl \
                $(printf '%s\n' "${fixtures[@]}" | grep -E '\.(pickle|pkl)$')
            ;;
        replay)
            # Snapshots only, in every form the loader reads (the JSON ones
            # mutate into new layouts and traces most easily).
            dict=fuzz/dicts/json.dict
            seed "$t" fuzz/seeds/*.pickle fuzz/seeds/snapshot.json* \
                fuzz/seeds/legacy_segment_list.json fuzz/seeds/memory_viz.html \
                "$real"/*.pickle "$real"/*.pkl "$conv"/*.pickle.* "$conv"/*.pkl.* \
                $(printf '%s\n' "${fixtures[@]}" | grep -E '\.(pickle|pkl|json)$')
            ;;
        *)
            dict=fuzz/dicts/pickle.dict
            seed "$t" fuzz/seeds/* "$real"/* "$conv"/* "${fixtures[@]}"
            ;;
    esac
    [ -d "fuzz/regressions/$t" ] && seed "$t" fuzz/regressions/"$t"/*
    log=fuzz/artifacts/$t/fuzz.log
    echo "fuzz.sh: $t for ${secs}s ($(ls "fuzz/corpus/$t" | wc -l) inputs in the corpus)" >&2
    set +e
    nice -n 19 cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -dict="$dict" -timeout=120 -report_slow_units=120 \
        -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" > "$log" 2>&1
    rc=$?
    set -e
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    found=$(ls "fuzz/artifacts/$t" | grep -cE '^(crash|leak|timeout|oom)-' || true)
    summary+=("$t: exit $rc, ${execs:-?} executions in ${secs}s, $found finding(s); last: ${last:-none}")
    if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
        failed=1
    fi
done
printf '%s\n' "${summary[@]}"
exit $failed
