#!/usr/bin/env python3
"""Draws docs/perf-scale.svg from the "Scale" table of docs/perf.md: seconds per
100 MiB and peak RSS per byte of input against the input's size, for fragscope
stats, fragscope report and Python's pickle.load. Flat lines mean cost linear in
the input. Reads the table that scripts/bench.py printed; measures nothing.

    scripts/perf_chart.py                  # docs/perf.md -> docs/perf-scale.svg
    scripts/perf_chart.py TABLE.md OUT.svg
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "perf.md")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "perf-scale.svg")

# (column in the Scale table, label, colour)
TIME = [("stats s/100 MiB", "fragscope stats", "#3465c4"),
        ("report s/100 MiB", "fragscope report", "#d6272b"),
        ("Python s/100 MiB", "Python pickle.load", "#464646")]
RSS = [("stats RSS / size", "fragscope stats", "#3465c4"),
       ("report RSS / size", "fragscope report", "#d6272b"),
       ("Python RSS / size", "Python pickle.load", "#464646")]


def scale_table(text):
    """Rows of the Markdown table whose header has 'bytes/event' (synthetic
    inputs only: their sizes span the range)."""
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if l.startswith("|") and "bytes/event" in l:
            head = [c.strip() for c in l.strip("|").split("|")]
            rows = []
            for r in lines[i + 2:]:
                if not r.startswith("|"):
                    break
                cells = [c.strip() for c in r.strip("|").split("|")]
                if cells[0].startswith("synth-"):
                    rows.append(dict(zip(head, cells)))
            return rows
    sys.exit(f"{SRC}: no table with a 'bytes/event' column")


def mib(s):
    return float(re.match(r"([\d.]+)", s).group(1))


def panel(x0, y0, w, h, rows, series, title, ylabel):
    sizes = [mib(r["size"]) for r in rows]
    vals = [[float(r[c]) for r in rows] for c, _, _ in series]
    ymax = max(max(v) for v in vals) * 1.15
    xmin, xmax = 0.0, max(sizes) * 1.05
    X = lambda v: x0 + 60 + (v - xmin) / (xmax - xmin) * (w - 80)
    Y = lambda v: y0 + h - 40 - v / ymax * (h - 80)
    out = [f'<text x="{x0 + w / 2}" y="{y0 + 22}" text-anchor="middle" font-size="17">{title}</text>']
    out.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(xmax)}" y2="{Y(0)}" stroke="#999"/>')
    out.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(0)}" y2="{Y(ymax)}" stroke="#999"/>')
    for k in range(6):
        v = ymax / 1.15 * k / 5
        out.append(f'<line x1="{X(0)}" y1="{Y(v):.1f}" x2="{X(xmax)}" y2="{Y(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{X(0) - 6}" y="{Y(v) + 4:.1f}" text-anchor="end" font-size="12">{v:.1f}</text>')
    for s in sizes:
        out.append(f'<text x="{X(s):.1f}" y="{Y(0) + 18}" text-anchor="middle" font-size="12">{s:.0f}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h - 4}" text-anchor="middle" font-size="13">input size (MiB)</text>')
    out.append(f'<text x="{x0 + 16}" y="{y0 + h / 2}" text-anchor="middle" font-size="13" '
               f'transform="rotate(-90 {x0 + 16} {y0 + h / 2})">{ylabel}</text>')
    for (c, label, colour), v in zip(series, vals):
        pts = " ".join(f"{X(s):.1f},{Y(y):.1f}" for s, y in zip(sizes, v))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2.5"/>')
        for s, y in zip(sizes, v):
            out.append(f'<circle cx="{X(s):.1f}" cy="{Y(y):.1f}" r="3.5" fill="{colour}"/>')
    return out


def main():
    rows = scale_table(open(SRC).read())
    if len(rows) < 2:
        sys.exit(f"{SRC}: the Scale table needs two synthetic sizes or more")
    w, h = 520, 340
    body = ['<rect width="100%" height="100%" fill="white"/>']
    body += panel(0, 0, w, h, rows, TIME, "Wall time per 100 MiB of input", "seconds")
    body += panel(w, 0, w, h, rows, RSS, "Peak RSS per byte of input", "× file size")
    for k, (_, label, colour) in enumerate(TIME):
        x = 80 + k * 300
        body.append(f'<rect x="{x}" y="{h + 8}" width="22" height="4" fill="{colour}"/>')
        body.append(f'<text x="{x + 30}" y="{h + 14}" font-size="13">{label}</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 24}" '
           f'font-family="sans-serif">\n' + "\n".join(body) + "\n</svg>\n")
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        f.write(svg)
    os.replace(tmp, OUT)
    print(f"wrote {OUT} ({len(rows)} sizes)")


if __name__ == "__main__":
    main()
