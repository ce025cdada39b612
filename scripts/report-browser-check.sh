#!/usr/bin/env bash
# Opens `fragscope report` HTML pages in headless Chromium with the network
# blocked, checks that every chart is in the rendered page, and writes a PNG
# screenshot of each page (whitespace below the page trimmed when ImageMagick
# is installed) for a person to look at.
#
#   scripts/report-browser-check.sh SNAPSHOT...
#
# Environment: FRAGSCOPE (binary, default target/debug/fragscope), OUT
# (output folder, default target/report-check), WIDTH (window width, default
# 1100), HEIGHT (window height, default 16000: taller than any report, the
# blank rest is trimmed), CROP (keep only the top CROP pixels, e.g. 2600 for
# README screenshots), CONVERT (ImageMagick's convert, found by default),
# REPORT_ARGS (more options for `fragscope report`, e.g. "--device 1").
#
# Needs Debian's `chromium` package (apt-get install -y chromium). Too slow
# for `cargo test`, so it is a script; run it after changing the report.
set -euo pipefail

FRAGSCOPE=${FRAGSCOPE:-target/debug/fragscope}
OUT=${OUT:-target/report-check}
WIDTH=${WIDTH:-1100}
HEIGHT=${HEIGHT:-16000}
CROP=${CROP:-}

if [ $# -eq 0 ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
if ! command -v chromium >/dev/null; then
    echo "chromium is not installed: apt-get install -y chromium" >&2
    exit 2
fi
if [ ! -x "$FRAGSCOPE" ]; then
    echo "$FRAGSCOPE not found: cargo build first, or set FRAGSCOPE" >&2
    exit 2
fi
# ImageMagick, when there is a real one (a `convert` early on PATH may be
# something else).
IM=${CONVERT:-}
if [ -z "$IM" ]; then
    for c in magick convert /usr/bin/convert; do
        if "$c" -version 2>/dev/null | grep -q '^Version: ImageMagick'; then
            IM=$c
            break
        fi
    done
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
status=0

for input in "$@"; do
    name=$(basename "$input")
    name=${name%.*}
    page="$OUT/$name.html"
    # shellcheck disable=SC2086
    "$FRAGSCOPE" report "$input" ${REPORT_ARGS:-} -o "$page"
    profile=$(mktemp -d)
    # A fresh profile, no background traffic, and every host unresolvable
    # behind a dead proxy: the page must render from the file alone.
    flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
        --disable-component-update --disable-sync --no-first-run
        --user-data-dir="$profile" --proxy-server=127.0.0.1:9
        --host-resolver-rules="MAP * ~NOTFOUND" --hide-scrollbars
        --force-device-scale-factor=1)
    chromium "${flags[@]}" --dump-dom "file://$page" >"$OUT/$name.dom.html" 2>/dev/null
    chromium "${flags[@]}" --window-size="$WIDTH,$HEIGHT" \
        --screenshot="$OUT/$name.png" "file://$page" >/dev/null 2>&1
    rm -rf "$profile"

    expected=$(grep -o '<svg role="img"' "$page" | wc -l)
    rendered=$(grep -o '<svg role="img"' "$OUT/$name.dom.html" | wc -l)
    if [ "$expected" -eq 0 ] || [ "$rendered" -ne "$expected" ]; then
        echo "FAIL $name: $rendered of $expected charts in the rendered page" >&2
        status=1
    fi
    if [ ! -s "$OUT/$name.png" ]; then
        echo "FAIL $name: no screenshot" >&2
        status=1
        continue
    fi
    if [ -n "$IM" ]; then
        # Keep the full width, cut the blank space under the page.
        box=$("$IM" "$OUT/$name.png" -trim -format '%@' info:)
        bottom=$(echo "$box" | sed -E 's/^[0-9]+x([0-9]+)\+[0-9]+\+([0-9]+)$/\1 \2/' | awk '{print $1 + $2 + 24}')
        if [ "$bottom" -ge "$HEIGHT" ]; then
            echo "warning $name: the page is taller than the window; raise HEIGHT to see all of it" >&2
        fi
        if [ -n "$CROP" ] && [ "$CROP" -lt "$bottom" ]; then
            bottom=$CROP
        fi
        "$IM" "$OUT/$name.png" -crop "${WIDTH}x${bottom}+0+0" +repage "$OUT/$name.png"
        colors=$("$IM" "$OUT/$name.png" -format '%k' info:)
        if [ "$colors" -lt 32 ]; then
            echo "FAIL $name: the screenshot is nearly blank ($colors colors)" >&2
            status=1
        fi
    fi
    echo "ok $name: $rendered charts, $(wc -c <"$page") bytes of HTML, screenshot $OUT/$name.png"
done
exit $status
