// fragscope view: draws the data fragscope computed (schema
// fragscope.view/1, docs/viewer.md). No figure is computed here; numbers
// drawn on the fly (axes, the cursor) are formatted by the terminal's rules.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("fragscope-data").textContent);
  const $ = (id) => document.getElementById(id);
  if (DATA.kind && DATA.kind !== "snapshot") {
    seriesPage();
    return;
  }

  // ---- formatting, as src/core/units.rs ---------------------------------

  // `{:.2}` of n / div, rounding an exact tie to even as Rust does.
  function fixed2(n, div) {
    const N = BigInt(n) * 100n;
    const D = BigInt(div);
    let q = N / D;
    const r2 = (N % D) * 2n;
    if (r2 > D || (r2 === D && q % 2n === 1n)) q += 1n;
    const s = q.toString().padStart(3, "0");
    return s.slice(0, -2) + "." + s.slice(-2);
  }
  function fmtBinary(n) {
    if (n < 1024) return n + " B";
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let k = 0;
    let div = 1024;
    while (k < 3 && n >= div * 1024) {
      div *= 1024;
      k += 1;
    }
    return fixed2(n, div) + " " + units[k];
  }
  function fmtBytes(n) {
    return DATA.exact_bytes ? String(n) : fmtBinary(n);
  }
  // `{:.1}%` of x * 100, ties to even.
  function fmtPct(x) {
    const v = x * 100;
    const t = v * 4;
    if (Number.isInteger(t) && t % 2 !== 0) {
      const d = Math.floor(v * 10);
      return ((d % 2 === 0 ? d : d + 1) / 10).toFixed(1) + "%";
    }
    return v.toFixed(1) + "%";
  }
  function fmtWhen(dev, event, t) {
    if (event < 0) return "start of the trace";
    if (t != null && dev.first_time_us != null) {
      return "event " + event + ", t=" + ((t - dev.first_time_us) / 1e6).toFixed(3) + " s";
    }
    return "event " + event;
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    return e;
  }
  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // ---- state ------------------------------------------------------------

  const S = {
    dev: null, // the device's data
    x0: -1, // visible window of events (inclusive)
    x1: 0,
    windowData: null, // finer detail fetched from the server
    cursor: null, // event under the mouse
    moment: 0, // index of the key moment shown (standalone)
    state: null, // the segment map shown
    stateEvent: -1,
    search: "",
    sort: { key: "stranded", dir: -1 },
    layout: null, // segment map geometry for hit tests
    fetchSeq: 0,
    inflight: 0, // requests to the server not yet answered
    bandData: null, // a window of bands fetched from the server
    bandGeom: null, // the bands drawn, for hit tests
    pinned: null, // the band whose details stay shown
    place: "", // the pool and stream the map and table show ("" = all)
  };
  // A request to the server, counted while it is out.
  function getJSON(url) {
    S.inflight += 1;
    return fetch(url)
      .then((r) => {
        if (!r.ok) throw new Error(url + ": " + r.status);
        return r.json();
      })
      .finally(() => {
        S.inflight -= 1;
      });
  }

  // ---- inputs without a segment map -------------------------------------
  // A profiler trace (allocated and reserved per device, live bytes by
  // operator) or a memory-timeline export (live bytes by category): the
  // series the report has of them, and why there is no segment map.

  function seriesPage() {
    $("file").textContent = DATA.file;
    $("format").textContent = DATA.format;
    for (const s of document.querySelectorAll("main > section")) {
      if (s.id !== "verdict-box") s.hidden = true;
    }
    for (const v of DATA.verdict) $("verdict").appendChild(el("li", {}, v));
    if (DATA.quality.length) {
      $("quality-box").hidden = false;
      for (const q of DATA.quality) $("quality").appendChild(el("li", {}, q));
    }
    window.fragscopeView = { fmtBytes: fmtBinary, fmtPct, data: DATA, state: { inflight: 0 } };
    if (DATA.kind === "ranks") {
      ranksPage();
      return;
    }
    const trace = DATA.kind === "profiler_trace";
    const sec = el("section", { id: "series-box", "aria-labelledby": "series-h" });
    sec.appendChild(el("h2", { id: "series-h" }, trace ? "Memory timeline" : "Memory timeline by category"));
    const legend = el("div", { class: "legend" });
    const canvas = el("canvas", { id: "series", class: "series", "aria-label": "memory over time" });
    const extra = el("div", { id: "series-extra" });
    const note = el("p", { id: "no-segment-map", class: "muted" }, "No segment map: " + DATA.no_segment_map);
    sec.append(legend, canvas, extra, note);
    $("verdict-box").after(sec);
    const sel = $("device");
    const devs = trace ? DATA.devices : [null];
    devs.forEach((d, i) => sel.appendChild(el("option", { value: String(i) }, d ? d.heading : "tensors by category")));
    const show = () => {
      const d = devs[Number(sel.value)];
      drawSeries(canvas, legend, d ? traceSeries(d, extra) : categorySeries(extra));
    };
    sel.value = String(Math.max(0, devs.findIndex((d) => d && d.ooms > 0)));
    sel.addEventListener("change", show);
    window.addEventListener("resize", show);
    show();
  }

  // A directory of ranks: `stats DIR`'s table; served, a row opens the
  // rank's own page (by its index), written, the command that does.
  function ranksPage() {
    $("device").closest("label").hidden = true;
    const sec = el("section", { id: "ranks-box", "aria-labelledby": "ranks-h" });
    sec.appendChild(el("h2", { id: "ranks-h" }, "Ranks"));
    sec.appendChild(el("p", { class: "muted" }, "Outliers: " + DATA.rule));
    const t = rowsTable("ranks", ["rank", "devices", "events", "OOMs", "peak reserved", "peak allocated",
      "worst fragmentation", "reserved at the end", "fragmentation at the end", "outlier"],
      DATA.ranks.map((r) => [r.file, r.devices, r.events, r.ooms, r.peak_reserved_text, r.peak_allocated_text,
        r.worst_fragmentation_text, r.end_reserved_text, r.fragmentation_text, r.outlier]));
    const rows = t.querySelectorAll("tbody tr");
    DATA.ranks.forEach((r, i) => {
      if (r.outlier) rows[i].classList.add("outlier");
      const cell = rows[i].firstChild;
      cell.textContent = "";
      if (DATA.served) {
        cell.appendChild(el("a", { href: "/rank?index=" + r.index }, r.file));
      } else {
        cell.appendChild(el("span", {}, r.file + " "));
        cell.appendChild(el("code", { class: "muted" }, "fragscope view " + r.file));
      }
    });
    sec.appendChild(t);
    $("verdict-box").after(sec);
  }

  function rowsTable(id, head, rows) {
    const t = el("table", { id });
    const tr = el("tr");
    for (const h of head) tr.appendChild(el("th", { scope: "col" }, h));
    t.appendChild(el("thead")).appendChild(tr);
    const body = el("tbody");
    for (const r of rows) {
      const row = el("tr");
      for (const c of r) row.appendChild(el("td", {}, c == null ? "" : String(c)));
      body.appendChild(row);
    }
    t.appendChild(body);
    return t;
  }

  function traceSeries(d, extra) {
    extra.textContent = "";
    extra.appendChild(rowsTable("trace-moments", ["moment", "event", "operator", "allocated", "reserved"],
      d.key_moments.map((k) => [k.label, k.event < 0 ? "start" : k.event, k.op, k.allocated_text, k.reserved_text])));
    if (d.live_by_op) {
      extra.appendChild(el("h3", {}, "Live bytes by operator at " + d.ops_moment + " (" + d.ops_when + ")"));
      extra.appendChild(rowsTable("trace-ops", ["operator", "live", "allocations"],
        d.live_by_op.map((o) => [o.op, o.bytes_text, o.events])));
    }
    const s = d.series;
    const lines = [{ name: "allocated", color: css("--allocated"), y: s.allocated }];
    if (d.reserved_known) lines.unshift({ name: "reserved", color: css("--reserved"), y: s.reserved });
    return { x: s.time_us, lines, stacked: false };
  }

  function categorySeries(extra) {
    extra.textContent = DATA.peak_text ? "Peak of live tensors: " + DATA.peak_text : "";
    const lines = DATA.categories
      .filter((c) => c.bytes.some((b) => b > 0))
      .map((c) => ({ name: c.name, color: c.color, y: c.bytes }));
    return { x: DATA.time_us, lines, stacked: true };
  }

  // Lines over time (stacked: areas on top of each other), bytes up.
  function drawSeries(canvas, legend, L) {
    legend.textContent = "";
    for (const s of L.lines) {
      const k = el("span", { class: "key" }, s.name);
      k.style.setProperty("--swatch", s.color);
      legend.appendChild(k);
    }
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 900;
    const h = 280;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    canvas.style.height = h + "px";
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const n = L.x.length;
    if (!n || !L.lines.length) return;
    // Time where known (null: before profiling), else the sample's index.
    const known = L.x.filter((t) => t != null);
    const t0 = known.length ? Math.min(...known) : 0;
    const t1 = known.length ? Math.max(...known) : n - 1;
    const xOf = (i) => (L.x[i] == null ? (known.length ? t0 : i) : L.x[i]);
    const tops = [];
    let acc = new Array(n).fill(0);
    for (const s of L.lines) {
      acc = L.stacked ? acc.map((a, i) => a + (s.y[i] || 0)) : s.y.map((v) => v || 0);
      tops.push(acc);
    }
    let ymax = 1;
    for (const t of tops) for (const v of t) if (v > ymax) ymax = v;
    const pad = { l: 78, r: 12, t: 10, b: 22 };
    const px = (i) => pad.l + ((xOf(i) - t0) / Math.max(t1 - t0, 1)) * (w - pad.l - pad.r);
    const py = (v) => h - pad.b - (v / ymax) * (h - pad.t - pad.b);
    g.fillStyle = css("--muted");
    g.font = "11px system-ui, sans-serif";
    g.fillText(fmtBytes(ymax), 4, pad.t + 10);
    g.fillText(fmtBytes(0), 4, h - pad.b);
    g.fillText(known.length ? ((t1 - t0) / 1e6).toFixed(3) + " s" : String(n - 1), w - pad.r - 60, h - 6);
    for (let k = tops.length - 1; k >= 0; k -= 1) {
      const top = tops[k];
      g.beginPath();
      for (let i = 0; i < n; i += 1) (i ? g.lineTo : g.moveTo).call(g, px(i), py(top[i]));
      if (L.stacked) {
        g.lineTo(px(n - 1), py(0));
        g.lineTo(px(0), py(0));
        g.closePath();
        g.fillStyle = L.lines[k].color;
        g.fill();
      } else {
        g.strokeStyle = L.lines[k].color;
        g.lineWidth = 1.5;
        g.stroke();
      }
    }
  }

  // ---- timeline ---------------------------------------------------------

  function lastEvent(dev) {
    return Math.max(dev.events - 1, 0);
  }
  // Points of a level between the window's ends.
  function inWindow(level, x0, x1) {
    const ev = level.event;
    let lo = 0;
    let hi = ev.length;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (ev[m] < x0) lo = m + 1;
      else hi = m;
    }
    let a = lo;
    lo = a;
    hi = ev.length;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (ev[m] <= x1) lo = m + 1;
      else hi = m;
    }
    return [Math.max(a - 1, 0), Math.min(lo + 1, ev.length)];
  }
  // The coarsest data with enough points in view: a level, or the window
  // the server sent.
  function pickData() {
    const dev = S.dev;
    const want = 1500;
    const levels = dev.levels;
    let pick = levels.length - 1;
    for (let i = 0; i < levels.length; i++) {
      const [a, b] = inWindow(levels[i], S.x0, S.x1);
      if (b - a >= want || levels[i].full) {
        pick = i;
        break;
      }
    }
    const level = levels[pick];
    const w = S.windowData;
    if (w && w.device === dev.device && w.x0 <= S.x0 && w.x1 >= S.x1 && !level.full) {
      const [a, b] = inWindow(w.data, S.x0, S.x1);
      const [c, d] = inWindow(level, S.x0, S.x1);
      if (b - a > d - c) return { data: w.data, name: "fetched", index: levels.length };
    }
    return { data: level, name: "level " + (pick + 1) + " of " + levels.length, index: pick };
  }

  function setupCanvas(c) {
    const r = c.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(Math.round(r.width), 50);
    const h = Math.max(Math.round(r.height), 30);
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    return { g, w, h };
  }
  const PAD = { l: 78, r: 12, t: 10, b: 22 };
  function xOf(e, w) {
    const span = Math.max(S.x1 - S.x0, 1e-9);
    return PAD.l + ((e - S.x0) / span) * (w - PAD.l - PAD.r);
  }
  function eventAt(px, w) {
    const span = S.x1 - S.x0;
    return S.x0 + ((px - PAD.l) / (w - PAD.l - PAD.r)) * span;
  }
  function niceStep(max, n) {
    const raw = max / n;
    const p = Math.pow(2, Math.ceil(Math.log2(Math.max(raw, 1))));
    return p;
  }

  function drawTimeline() {
    const dev = S.dev;
    const pick = pickData();
    const d = pick.data;
    const [a, b] = inWindow(d, S.x0, S.x1);
    S.shown = { name: pick.name, index: pick.index, points: b - a, span: S.x1 - S.x0 + 1 };
    const note = dev.events === 0
      ? "no trace: the recorded state only"
      : (b - a) + " points for " + Math.round(S.x1 - S.x0 + 1) + " events · " + (d.full ? "every event" : pick.name);
    $("detail").textContent = note;
    $("detail").dataset.points = String(b - a);
    $("detail").dataset.level = String(pick.index);

    // Memory chart.
    const c = setupCanvas($("timeline"));
    const { g, w, h } = c;
    let ymax = 1;
    for (let i = a; i < b; i++) ymax = Math.max(ymax, d.reserved[i]);
    const step = niceStep(ymax, 5);
    const top = Math.ceil(ymax / step) * step;
    const yOf = (v) => h - PAD.b - (v / top) * (h - PAD.t - PAD.b);
    axes(g, w, h, top, step, (v) => fmtBinary(v));
    g.save();
    g.beginPath();
    g.rect(PAD.l, PAD.t, w - PAD.l - PAD.r, h - PAD.t - PAD.b);
    g.clip();
    const xs = [];
    for (let i = a; i < b; i++) xs.push(xOf(d.event[i], w));
    // Allocated as a filled area; downsampled, its top is the bucket's
    // maximum (the minimum and maximum alternate, which would fill stripes).
    const top3 = (i) => d.full ? d.allocated[i]
      : Math.max(d.allocated[i], d.allocated[Math.max(i - 1, 0)], d.allocated[Math.min(i + 1, d.allocated.length - 1)]);
    if (!drawBands(g, w, yOf)) {
      g.beginPath();
      g.moveTo(xs[0], yOf(0));
      for (let i = a; i < b; i++) g.lineTo(xs[i - a], yOf(top3(i)));
      g.lineTo(xs[b - a - 1], yOf(0));
      g.closePath();
      g.fillStyle = css("--allocated");
      g.globalAlpha = 0.55;
      g.fill();
      g.globalAlpha = 1;
    }
    const line = (key, color, width) => {
      g.beginPath();
      for (let i = a; i < b; i++) {
        const x = xs[i - a];
        const y = yOf(d[key][i]);
        if (i === a) g.moveTo(x, y);
        else g.lineTo(x, y);
      }
      g.strokeStyle = color;
      g.lineWidth = width;
      g.stroke();
    };
    line("reserved", css("--reserved"), 1.8);
    line("free", css("--free"), 1.2);
    line("largest_gap", css("--gap"), 1.2);
    // OOM marks.
    g.strokeStyle = css("--oom");
    g.setLineDash([4, 3]);
    for (const o of dev.ooms) {
      const x = xOf(o.event, w);
      g.beginPath();
      g.moveTo(x, PAD.t);
      g.lineTo(x, h - PAD.b);
      g.stroke();
    }
    g.setLineDash([]);
    cursorLine(g, w, h);
    g.restore();
    if (dev.events === 0) {
      g.fillStyle = css("--muted");
      g.font = "13px system-ui, sans-serif";
      g.textAlign = "center";
      g.fillText("No allocator trace was recorded for this device: only its recorded state is known (below).", (PAD.l + w - PAD.r) / 2, (PAD.t + h - PAD.b) / 2);
      g.textAlign = "left";
    } else {
      xAxis(g, w, h);
    }

    // Fragmentation chart.
    const f = setupCanvas($("frag"));
    const fy = (v) => f.h - PAD.b - v * (f.h - PAD.t - PAD.b);
    axes(f.g, f.w, f.h, 1, 0.5, (v) => fmtPct(v));
    f.g.save();
    f.g.beginPath();
    f.g.rect(PAD.l, PAD.t, f.w - PAD.l - PAD.r, f.h - PAD.t - PAD.b);
    f.g.clip();
    f.g.beginPath();
    for (let i = a; i < b; i++) {
      const x = xs[i - a];
      const y = fy(d.fragmentation[i]);
      if (i === a) f.g.moveTo(x, y);
      else f.g.lineTo(x, y);
    }
    f.g.strokeStyle = css("--frag");
    f.g.lineWidth = 1.4;
    f.g.stroke();
    cursorLine(f.g, f.w, f.h);
    f.g.restore();
    f.g.font = "11px system-ui, sans-serif";
    // On a patch of the background: the line may pass under the label.
    f.g.fillStyle = css("--bg");
    f.g.fillRect(PAD.l + 2, f.h - PAD.b - 15, f.g.measureText("fragmentation").width + 4, 13);
    f.g.fillStyle = css("--muted");
    f.g.fillText("fragmentation", PAD.l + 4, f.h - PAD.b - 4);
    readout(d, a, b);
  }

  function axes(g, w, h, top, step, label) {
    g.strokeStyle = css("--line");
    g.fillStyle = css("--muted");
    g.font = "11px system-ui, sans-serif";
    g.lineWidth = 1;
    g.textAlign = "right";
    g.textBaseline = "middle";
    for (let v = 0; v <= top + 1e-9; v += step) {
      const y = h - PAD.b - (v / top) * (h - PAD.t - PAD.b);
      g.beginPath();
      g.moveTo(PAD.l, Math.round(y) + 0.5);
      g.lineTo(w - PAD.r, Math.round(y) + 0.5);
      g.stroke();
      g.fillText(label(v), PAD.l - 6, y);
    }
    g.textAlign = "left";
    g.textBaseline = "alphabetic";
  }
  function xAxis(g, w, h) {
    const span = S.x1 - S.x0;
    const n = Math.max(Math.floor((w - PAD.l - PAD.r) / 110), 2);
    let step = Math.pow(10, Math.floor(Math.log10(Math.max(span / n, 1))));
    while (span / step > n) step *= span / step > n * 4 ? 5 : 2;
    g.fillStyle = css("--muted");
    g.font = "11px system-ui, sans-serif";
    g.textAlign = "center";
    for (let e = Math.ceil(S.x0 / step) * step; e <= S.x1; e += step) {
      g.fillText(e < 0 ? "start" : String(Math.round(e)), xOf(e, w), h - 6);
    }
    g.textAlign = "left";
  }
  function cursorLine(g, w, h) {
    if (S.cursor == null) return;
    const x = xOf(S.cursor, w);
    g.strokeStyle = css("--cursor");
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(Math.round(x) + 0.5, PAD.t);
    g.lineTo(Math.round(x) + 0.5, h - PAD.b);
    g.stroke();
  }
  function readout(d, a, b) {
    const r = $("readout");
    if (S.cursor == null || b <= a) {
      r.textContent = "\u00a0";
      return;
    }
    // The point nearest the cursor.
    let best = a;
    for (let i = a; i < b; i++) {
      if (Math.abs(d.event[i] - S.cursor) < Math.abs(d.event[best] - S.cursor)) best = i;
    }
    r.textContent = fmtWhen(S.dev, d.event[best], d.time_us[best]) +
      " · reserved " + fmtBytes(d.reserved[best]) +
      " · allocated " + fmtBytes(d.allocated[best]) +
      " · free " + fmtBytes(d.free[best]) +
      " · largest gap " + fmtBytes(d.largest_gap[best]) +
      " · fragmentation " + fmtPct(d.fragmentation[best]) +
      (d.full ? "" : " (bucket min/max)");
  }

  function setWindow(x0, x1) {
    const lo = -1;
    const hi = lastEvent(S.dev);
    const minSpan = Math.min(8, hi - lo);
    let span = Math.max(x1 - x0, minSpan);
    span = Math.min(span, hi - lo);
    x0 = Math.max(lo, Math.min(x0, hi - span));
    S.x0 = x0;
    S.x1 = x0 + span;
    drawTimeline();
    if (DATA.served) fetchWindow();
  }
  function zoom(factor, at) {
    const x0 = at - (at - S.x0) * factor;
    const x1 = at + (S.x1 - at) * factor;
    setWindow(x0, x1);
  }
  let fetchTimer = null;
  function fetchWindow() {
    clearTimeout(fetchTimer);
    const pick = pickData();
    if (pick.data.full || pick.name === "fetched") return;
    fetchTimer = setTimeout(() => {
      const dev = S.dev;
      const x0 = Math.floor(S.x0);
      const x1 = Math.ceil(S.x1);
      const seq = ++S.fetchSeq;
      getJSON("/api/series?device=" + dev.device + "&from=" + x0 + "&to=" + x1 + "&points=2000")
        .then((data) => {
          if (seq !== S.fetchSeq || dev !== S.dev) return;
          S.windowData = { device: dev.device, x0, x1, data };
          drawTimeline();
        })
        .catch((e) => console.warn("fragscope: finer detail unavailable:", e.message));
    }, 120);
  }

  function setupTimelineEvents() {
    const c = $("timeline");
    let drag = null;
    const local = (ev, canvas) => ev.clientX - canvas.getBoundingClientRect().left;
    for (const canvas of [c, $("frag")]) {
      canvas.addEventListener("mousemove", (ev) => {
        const w = canvas.getBoundingClientRect().width;
        if (drag) {
          const dx = local(ev, c) - drag.px;
          const per = (drag.x1 - drag.x0) / (w - PAD.l - PAD.r);
          if (Math.abs(dx) > 2) drag.moved = true;
          setWindow(drag.x0 - dx * per, drag.x1 - dx * per);
        }
        S.cursor = Math.max(S.x0, Math.min(S.x1, eventAt(local(ev, canvas), w)));
        drawTimeline();
      });
      canvas.addEventListener("mouseleave", () => {
        S.cursor = null;
        drawTimeline();
      });
      canvas.addEventListener("wheel", (ev) => {
        ev.preventDefault();
        const w = canvas.getBoundingClientRect().width;
        const at = eventAt(local(ev, canvas), w);
        zoom(ev.deltaY > 0 ? 1.25 : 0.8, at);
      }, { passive: false });
    }
    c.addEventListener("mousedown", (ev) => {
      drag = { px: local(ev, c), x0: S.x0, x1: S.x1, moved: false };
    });
    window.addEventListener("mouseup", (ev) => {
      if (drag && !drag.moved && ev.target === c) {
        const w = c.getBoundingClientRect().width;
        showEvent(Math.round(eventAt(local(ev, c), w)));
      }
      drag = null;
    });
    c.addEventListener("keydown", (ev) => {
      const span = S.x1 - S.x0;
      const mid = (S.x0 + S.x1) / 2;
      if (ev.key === "+" || ev.key === "=") zoom(0.8, mid);
      else if (ev.key === "-") zoom(1.25, mid);
      else if (ev.key === "ArrowLeft" && ev.shiftKey) setWindow(S.x0 - span / 4, S.x1 - span / 4);
      else if (ev.key === "ArrowRight" && ev.shiftKey) setWindow(S.x0 + span / 4, S.x1 + span / 4);
      else return;
      ev.preventDefault();
      ev.stopPropagation();
    });
    $("reset").addEventListener("click", () => setWindow(-1, lastEvent(S.dev)));
  }

  // ---- allocator state --------------------------------------------------

  function momentButtons() {
    const box = $("moments");
    box.textContent = "";
    S.dev.key_moments.forEach((k, i) => {
      const b = el("button", { type: "button", "data-moment": String(i), "aria-pressed": "false" }, k.label);
      b.title = k.when + " · reserved " + k.figures.reserved_text + ", allocated " + k.figures.allocated_text;
      if (k.label.startsWith("oom")) b.classList.add("oom-moment");
      b.addEventListener("click", () => showMoment(i));
      box.appendChild(b);
    });
  }
  function setupScrub() {
    const s = $("scrub");
    if (DATA.served) {
      s.min = "-1";
      s.max = String(lastEvent(S.dev));
      $("scrub-note").textContent = S.dev.events ? "any event (arrow keys)" : "";
    } else {
      s.min = "0";
      s.max = String(S.dev.key_moments.length - 1);
      $("scrub-note").textContent = "key moments (the served view scrubs every event)";
    }
    s.disabled = S.dev.events === 0;
  }
  function showMoment(i) {
    const k = S.dev.key_moments[i];
    S.moment = i;
    if (!DATA.served) $("scrub").value = String(i);
    else $("scrub").value = String(k.event);
    setState(k.state, k.label);
  }
  // An event: the server replays to it; a standalone page shows the
  // nearest key moment.
  function showEvent(e) {
    const dev = S.dev;
    e = Math.max(-1, Math.min(lastEvent(dev), e));
    if (!DATA.served || dev.events === 0) {
      let best = 0;
      dev.key_moments.forEach((k, i) => {
        if (Math.abs(k.event - e) < Math.abs(dev.key_moments[best].event - e)) best = i;
      });
      showMoment(best);
      return;
    }
    const known = dev.key_moments.findIndex((k) => k.event === e);
    if (known >= 0) {
      showMoment(known);
      return;
    }
    $("scrub").value = String(e);
    const seq = ++S.stateSeq;
    getJSON("/api/state?device=" + dev.device + "&event=" + e)
      .then((st) => {
        if (seq === S.stateSeq && dev === S.dev) setState(st, null);
      })
      .catch((err) => console.warn("fragscope: state unavailable:", err.message));
  }
  S.stateSeq = 0;
  function step(dir) {
    if (DATA.served && S.dev.events > 0) showEvent(S.stateEvent + dir);
    else showMoment(Math.max(0, Math.min(S.dev.key_moments.length - 1, S.moment + dir)));
  }

  function setState(st, label) {
    S.state = st;
    S.stateEvent = st.event;
    addPlaces(st);
    const dev = S.dev;
    const names = dev.key_moments.filter((k) => k.event === st.event).map((k) => k.label);
    const when = dev.events === 0 ? "the recorded state" : fmtWhen(dev, st.event, st.time_us);
    $("state-label").textContent = when + (names.length ? " · " + names.join(", ") : label ? " · " + label : "");
    for (const b of $("moments").children) {
      const k = dev.key_moments[Number(b.dataset.moment)];
      b.setAttribute("aria-pressed", String(k.event === st.event && (!label || k.label === label || names.includes(k.label))));
    }
    oomPanel(st);
    drawMap();
    S.cursor = st.event;
    drawTimeline();
  }

  function oomPanel(st) {
    const box = $("oom");
    box.textContent = "";
    const o = S.dev.ooms.find((x) => x.event === st.event);
    if (st.failed_request == null && !o) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    box.appendChild(el("h3", {}, "Out of memory: the request that failed"));
    const req = el("p", { id: "failed-request" });
    req.textContent = "Failed request: " + (st.failed_request_text || (o && o.request_text)) +
      (o && o.largest_gap_text ? " · largest free gap " + o.largest_gap_text : "") +
      (o && o.device_free_text ? " · free on the device " + o.device_free_text : "");
    box.appendChild(req);
    if (o) {
      for (const v of o.verdict) box.appendChild(el("p", { class: "verdict-line" }, v));
      if (o.details.length) {
        const ul = el("ul");
        for (const x of o.details) ul.appendChild(el("li", {}, x));
        box.appendChild(ul);
      }
      if (o.suggestions.length) {
        box.appendChild(el("strong", {}, "What to try"));
        const ul = el("ul");
        for (const s of o.suggestions) {
          const li = el("li", s.applies ? {} : { class: "skip" });
          li.appendChild(el("code", {}, s.what));
          li.appendChild(document.createTextNode((s.applies ? ": " : " (skip): ") + s.why));
          ul.appendChild(li);
        }
        box.appendChild(ul);
      }
    }
    box.appendChild(whatIf(S.dev));
  }

  // The what-if table as `fragscope simulate` prints it: asked of the
  // server, carried by a written page, or the command that prints it.
  function whatIf(dev) {
    const w = dev.what_if || {};
    const div = el("div", { id: "what-if" });
    const btn = el("button", { type: "button", id: "what-if-button" }, "What if: other allocator settings");
    const out = el("pre", { id: "what-if-table", class: "what-if", hidden: "" });
    btn.addEventListener("click", () => {
      btn.disabled = true;
      out.hidden = false;
      if (w.table != null) {
        out.textContent = w.table;
      } else if (w.request != null && DATA.served) {
        out.textContent = "running the what-if model…";
        S.inflight += 1;
        fetch(w.request)
          .then((r) => r.text().then((t) => (r.ok ? t : Promise.reject(new Error(t)))))
          .then((t) => { out.textContent = t; })
          .catch((e) => { out.textContent = String(e.message || e); })
          .finally(() => { S.inflight -= 1; });
      } else {
        out.textContent = w.how != null && w.how.startsWith("fragscope ")
          ? "Not in this page; this prints it:\n  " + w.how
          : (w.how || "no what-if model for this device");
      }
    });
    div.appendChild(btn);
    div.appendChild(out);
    return div;
  }

  const ROW_H = 18;
  const ROW_GAP = 5;
  const SEG_GAP = 3;
  const MIN_SEG = 6;
  // Segments laid end to end along rows, as one wrapped line of pixels:
  // a segment wider than a row continues on the next one.
  function mapLayout(st, w) {
    const segs = st.segments;
    const total = segs.reduce((s, x) => s + x.size, 0) || 1;
    const rows = Math.max(4, Math.min(36, Math.ceil(segs.length / 3)));
    const room = Math.max(w * rows - segs.length * (SEG_GAP + MIN_SEG), w);
    const bpp = total / room;
    let p = 0;
    const placed = segs.map((s) => {
      const len = Math.max(MIN_SEG, s.size / bpp);
      const item = { seg: s, p0: p, p1: p + len, scale: len / s.size };
      p += len + SEG_GAP;
      return item;
    });
    return { placed, w, bpp, rows: Math.max(1, Math.ceil(p / w)) };
  }
  function spans(p0, p1, w) {
    const out = [];
    while (p1 - p0 > 0.01) {
      const row = Math.floor(p0 / w);
      const x0 = p0 - row * w;
      const x1 = Math.min(w, x0 + (p1 - p0));
      out.push([row, x0, x1]);
      p0 += x1 - x0;
    }
    return out;
  }
  function matches(st, seg, blk) {
    const q = S.search;
    if (!q || blk[3] === 2) return false;
    if (seg.address.toLowerCase().includes(q)) return true;
    const sk = blk[4] == null ? null : st.stacks[blk[4]];
    if (!sk) return false;
    if (sk.site.toLowerCase().includes(q)) return true;
    return sk.frames.some((f) => f.toLowerCase().includes(q));
  }
  function drawMap() {
    const lg = S.state.largest_gap;
    const gapBlk = lg ? S.state.segments[lg[0]].blocks[lg[1]] : null;
    const st = inPlace(S.state);
    const c = $("segmap");
    const w0 = Math.round(c.parentElement.getBoundingClientRect().width);
    const L = mapLayout(st, w0);
    const fail = st.failed_request != null ? Math.max(2, st.failed_request / L.bpp) : 0;
    const gapLen = fail && gapBlk ? Math.max(2, gapBlk[1] / L.bpp) : 0;
    const failRows = fail ? Math.ceil(fail / w0) + 1 + (gapLen ? Math.ceil(gapLen / w0) + 1 : 0) : 0;
    const height = (L.rows + failRows) * (ROW_H + ROW_GAP) + 4;
    // The report's culprits: its call sites whose blocks strand free bytes.
    const culprit = new Set(S.dev.sites.filter((x) => x.stranded > 0).map((x) => x.site));
    const outlined = [];
    c.style.height = height + "px";
    const { g, w } = setupCanvas(c);
    S.layout = L;
    const col = {
      alloc: css("--b-alloc"),
      waste: css("--b-waste"),
      pending: css("--b-pending"),
      free: css("--b-free"),
      edge: css("--b-edge"),
      match: css("--b-match"),
    };
    const rect = (row, x0, x1, color) => {
      g.fillStyle = color;
      g.fillRect(x0, row * (ROW_H + ROW_GAP), Math.max(x1 - x0, 1), ROW_H);
    };
    let nmatch = 0;
    const hits = [];
    for (const it of L.placed) {
      const s = it.seg;
      for (const blk of s.blocks) {
        const [off, size, req, state] = blk;
        const b0 = it.p0 + off * it.scale;
        const b1 = b0 + size * it.scale;
        for (const [row, x0, x1] of spans(b0, b1, w)) {
          if (state === 2) rect(row, x0, x1, col.free);
          else if (state === 1) rect(row, x0, x1, col.pending);
          else {
            rect(row, x0, x1, col.waste);
            const used = req == null ? 1 : req / size;
            rect(row, x0, x0 + (x1 - x0) * used, col.alloc);
          }
        }
        if (matches(st, s, blk)) {
          nmatch += 1;
          hits.push([b0, b1]);
        }
        if (blk[4] != null && blk[3] !== 2 && culprit.has(st.stacks[blk[4]].site)) outlined.push([b0, b1, css("--b-culprit"), [3, 2]]);
        if (fail && blk === gapBlk) outlined.push([b0, b1, css("--gap"), []]);
      }
      // Segment outline.
      g.strokeStyle = col.edge;
      g.lineWidth = 1;
      for (const [row, x0, x1] of spans(it.p0, it.p1, w)) {
        g.strokeRect(x0 + 0.5, row * (ROW_H + ROW_GAP) + 0.5, Math.max(x1 - x0 - 1, 1), ROW_H - 1);
      }
    }
    g.lineWidth = 1.5;
    for (const [b0, b1, color, dash] of outlined) {
      g.strokeStyle = color;
      g.setLineDash(dash);
      for (const [row, x0, x1] of spans(b0, b1, w)) {
        g.strokeRect(x0 + 1, row * (ROW_H + ROW_GAP) + 1.5, Math.max(x1 - x0 - 2, 2), ROW_H - 3);
      }
    }
    g.setLineDash([]);
    c.dataset.culprits = String(outlined.filter((o) => o[3].length).length);
    g.strokeStyle = col.match;
    g.lineWidth = 2.5;
    for (const [b0, b1] of hits) {
      for (const [row, x0, x1] of spans(b0, b1, w)) {
        g.strokeRect(x0 + 1, row * (ROW_H + ROW_GAP) + 1, Math.max(x1 - x0 - 2, 2), ROW_H - 2);
      }
    }
    if (fail) {
      const base = (L.rows + 1) * (ROW_H + ROW_GAP);
      g.fillStyle = css("--oom");
      g.font = "12px system-ui, sans-serif";
      g.fillText("the failed request, at the same scale: " + (st.failed_request_text || fmtBytes(st.failed_request)), 0, base - 6);
      for (const [row, x0, x1] of spans(0, fail, w)) {
        g.fillRect(x0, base + row * (ROW_H + ROW_GAP), Math.max(x1 - x0, 2), ROW_H);
      }
      failedBesideGap(g, w, base + Math.ceil(fail / w) * (ROW_H + ROW_GAP), gapBlk, gapLen);
    }
    c.dataset.failed = st.failed_request == null ? "" : String(st.failed_request);
    c.dataset.gap = fail && gapBlk ? String(gapBlk[1]) : "";
    if (!st.segments.length) {
      g.fillStyle = css("--muted");
      g.font = "13px system-ui, sans-serif";
      g.fillText("No segment is reserved at this moment.", 4, 14);
    }
    const mc = $("match-count");
    mc.textContent = S.search ? nmatch + " block" + (nmatch === 1 ? "" : "s") + " match in this state" : "";
    mc.dataset.blocks = String(nmatch);
    const k = S.dev.key_moments.find((x) => x.event === st.event);
    $("state-figures").textContent = st.segments.length + " segments" +
      (k ? " · reserved " + k.figures.reserved_text + " · allocated " + k.figures.allocated_text +
        " · largest free gap " + k.figures.largest_gap_text + " · fragmentation " + k.figures.fragmentation_text : "");
  }
  // Below the failed request, the largest free block at the same scale.
  function failedBesideGap(g, w, top, gapBlk, len) {
    if (!gapBlk) return;
    const base = top + ROW_H + ROW_GAP;
    g.fillStyle = css("--gap");
    g.font = "12px system-ui, sans-serif";
    g.fillText("the largest free gap, at the same scale: " + fmtBytes(gapBlk[1]), 0, base - 6);
    for (const [row, x0, x1] of spans(0, len, w)) {
      g.fillRect(x0, base + row * (ROW_H + ROW_GAP), Math.max(x1 - x0, 2), ROW_H);
    }
  }
  // The block under a point of the map.
  function blockAt(px, py) {
    const L = S.layout;
    if (!L) return null;
    const row = Math.floor(py / (ROW_H + ROW_GAP));
    if (py - row * (ROW_H + ROW_GAP) > ROW_H) return null;
    const p = row * L.w + px;
    let lo = 0;
    let hi = L.placed.length;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (L.placed[m].p1 <= p) lo = m + 1;
      else hi = m;
    }
    const it = L.placed[lo];
    if (!it || p < it.p0) return null;
    const off = (p - it.p0) / it.scale;
    for (const blk of it.seg.blocks) {
      if (off >= blk[0] && off < blk[0] + blk[1]) return { seg: it.seg, blk };
    }
    return null;
  }
  function setupMapEvents() {
    const c = $("segmap");
    const tip = $("tip");
    c.addEventListener("mousemove", (ev) => {
      const r = c.getBoundingClientRect();
      const hit = blockAt(ev.clientX - r.left, ev.clientY - r.top);
      if (!hit) {
        tip.hidden = true;
        return;
      }
      tooltip(hit);
      placeTip(ev);
    });
    c.addEventListener("mouseleave", () => {
      tip.hidden = true;
    });
  }
  const STATES = ["allocated", "pending free", "free"];
  function tooltip(hit) {
    const tip = $("tip");
    const { seg, blk } = hit;
    const [off, size, req, state, stack, born] = blk;
    const sk = stack == null ? null : S.state.stacks[stack];
    tip.textContent = "";
    tip.appendChild(el("div", { class: "site" }, state === 2 ? "free block" : sk ? sk.site : "(no stack recorded)"));
    const dl = el("dl");
    const row = (k, v) => {
      dl.appendChild(el("dt", {}, k));
      dl.appendChild(el("dd", {}, v));
    };
    row("state", STATES[state]);
    row("size", fmtBytes(size));
    if (state !== 2 && req != null) {
      row("requested", fmtBytes(req));
      if (size > req) row("rounding waste", fmtBytes(size - req));
    }
    row("segment", seg.address + " (" + fmtBytes(seg.size) + (seg.expandable ? ", expandable" : "") + ", stream " + seg.stream + ")");
    row("offset", fmtBytes(off));
    if (born != null) row("allocated at", "event " + born);
    else if (state !== 2) row("allocated at", "before the trace");
    tip.appendChild(dl);
    if (sk && sk.frames.length) {
      const ul = el("ul", { class: "stack" });
      for (const f of sk.frames.slice(0, 14)) ul.appendChild(el("li", {}, f));
      if (sk.frames.length > 14) ul.appendChild(el("li", {}, "… " + (sk.frames.length - 14) + " more frames"));
      tip.appendChild(ul);
    }
  }

  // ---- allocation bands -------------------------------------------------

  // The finest band window that holds the view: one fetched from the
  // server, else one of the tiers the page carries.
  function bandWindow() {
    const B = S.dev.bands;
    if (!B || !B.tiers.length) return null;
    const f = S.bandData;
    let best = null;
    B.tiers.forEach((tier, t) => {
      for (const win of tier) {
        if (win.from <= Math.floor(S.x0) && win.to >= Math.ceil(S.x1) - 1) {
          best = { win, stacks: B.stacks, tier: t };
          break;
        }
      }
    });
    if (!best) best = { win: B.tiers[0][0], stacks: B.stacks, tier: 0 };
    if (f && f.device === S.dev.device && f.data.from <= S.x0 && f.data.to >= S.x1 - 1 &&
        f.data.to - f.data.from < best.win.to - best.win.from) {
      return { win: f.data, stacks: f.data.stacks, tier: B.tiers.length };
    }
    return best;
  }
  function bandLive(b, e) {
    return b[0] <= e && (b[1] == null || e < b[1]);
  }
  const BAND_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759", "#bab0ac", "#ff9da7"];
  function bandMatches(stacks, b) {
    const q = S.search;
    if (!q) return false;
    if (b[6].toLowerCase().includes(q)) return true;
    const sk = b[4] == null ? null : stacks[b[4]];
    return !!sk && (sk.site.toLowerCase().includes(q) || sk.frames.some((f) => f.toLowerCase().includes(q)));
  }
  // Stacks the window's bands over its aggregate, each point's figures
  // holding until the next point; returns false when there is none.
  function drawBands(g, w, yOf) {
    const pick = bandWindow();
    const c = $("timeline");
    if (!pick || !pick.win.event.length) {
      delete c.dataset.bandTier;
      return false;
    }
    const { win, stacks } = pick;
    const ev = win.event;
    const right = w - PAD.r;
    const x = (i) => (i + 1 < ev.length ? xOf(ev[i + 1], w) : right);
    const geom = [];
    let nmatch = 0;
    const matched = win.bands.map((b) => {
      const m = bandMatches(stacks, b);
      if (m) nmatch += 1;
      return m;
    });
    for (let i = 0; i < ev.length; i++) {
      // Whole pixels: neighbouring columns leave no seam between them.
      const x0 = Math.floor(xOf(ev[i], w));
      const x1 = Math.max(Math.ceil(x(i)), x0 + 1);
      if (x1 < PAD.l || x0 > right) continue;
      let base = win.rest[i];
      g.fillStyle = css("--band-rest");
      g.fillRect(x0, yOf(base), Math.max(x1 - x0, 0.5), yOf(0) - yOf(base));
      const col = [];
      win.bands.forEach((b, j) => {
        if (!bandLive(b, ev[i])) return;
        const top = base + b[2];
        const dim = S.search && !matched[j];
        g.globalAlpha = dim ? 0.25 : 1;
        g.fillStyle = matched[j] ? css("--b-match") : BAND_COLORS[j % BAND_COLORS.length];
        g.fillRect(x0, yOf(top), Math.max(x1 - x0, 0.5), Math.max(yOf(base) - yOf(top), 0.5));
        if (S.pinned && S.pinned.band === b) {
          g.globalAlpha = 1;
          g.strokeStyle = css("--cursor");
          g.lineWidth = 1.5;
          g.strokeRect(x0, yOf(top), Math.max(x1 - x0, 0.5), yOf(base) - yOf(top));
        }
        col.push([j, base, top]);
        base = top;
      });
      g.globalAlpha = 1;
      geom.push({ x0, x1, col, rest: win.rest[i] });
    }
    S.bandGeom = { geom, win, stacks, yOf };
    c.dataset.bandTier = String(pick.tier);
    c.dataset.bandSpan = String(win.to - win.from + 1);
    c.dataset.bands = String(win.bands.length);
    c.dataset.bandMatches = String(nmatch);
    if (DATA.served) fetchBands(pick);
    return true;
  }
  let bandTimer = null;
  // Served: a window of bands for a view much narrower than the finest
  // window at hand.
  function fetchBands(pick) {
    const span = S.x1 - S.x0;
    const have = pick.win.to - pick.win.from;
    if (have <= span * 4 || have < 64) return;
    const want = [Math.floor(S.x0 - span / 2), Math.ceil(S.x1 + span / 2)];
    if (S.bandWant && S.bandWant[0] === want[0] && S.bandWant[1] === want[1]) return;
    S.bandWant = want;
    clearTimeout(bandTimer);
    bandTimer = setTimeout(() => {
      const dev = S.dev;
      getJSON("/api/bands?device=" + dev.device + "&from=" + want[0] + "&to=" + want[1])
        .then((data) => {
          if (dev !== S.dev) return;
          S.bandData = { device: dev.device, data };
          drawTimeline();
        })
        .catch((e) => console.warn("fragscope: finer bands unavailable:", e.message));
    }, 150);
  }
  // The band under a point of the timeline.
  function bandAt(px, py) {
    const G = S.bandGeom;
    if (!G) return null;
    const col = G.geom.find((p) => px >= p.x0 && px < Math.max(p.x1, p.x0 + 0.5));
    if (!col) return null;
    for (const [j, lo, hi] of col.col) {
      if (py <= G.yOf(lo) && py >= G.yOf(hi) - 0.5) return { band: G.win.bands[j], stacks: G.stacks };
    }
    return null;
  }
  function bandTooltip(hit) {
    const tip = $("tip");
    const [alloc, end, size, req, stack, freed, addr, stream] = hit.band;
    const sk = stack == null ? null : hit.stacks[stack];
    tip.textContent = "";
    tip.appendChild(el("div", { class: "site" }, sk ? sk.site : "(no stack recorded)"));
    const dl = el("dl");
    const row = (k, v) => {
      dl.appendChild(el("dt", {}, k));
      dl.appendChild(el("dd", {}, v));
    };
    row("size", fmtBytes(size));
    row("requested", fmtBytes(req));
    if (size > req) row("rounding waste", fmtBytes(size - req));
    row("allocated at", alloc < 0 ? "before the trace" : "event " + alloc);
    if (end == null) row("freed", "still allocated at the end");
    else if (freed != null && freed !== end) row("freed", "requested at event " + end + ", completed at event " + freed);
    else row("freed", "at event " + end);
    row("address", addr + " · stream " + stream);
    tip.appendChild(dl);
    if (sk && sk.frames.length) {
      const ul = el("ul", { class: "stack" });
      for (const f of sk.frames) ul.appendChild(el("li", {}, f));
      tip.appendChild(ul);
    }
    tip.classList.toggle("pinned", !!S.pinned);
    if (S.pinned) tip.appendChild(el("div", { class: "muted pin-note" }, "pinned · click elsewhere or Esc to unpin"));
  }
  function placeTip(ev) {
    const tip = $("tip");
    tip.hidden = false;
    const tw = tip.offsetWidth;
    const th = tip.offsetHeight;
    let x = ev.clientX + 14;
    let y = ev.clientY + 14;
    if (x + tw > window.innerWidth - 4) x = Math.max(4, ev.clientX - tw - 14);
    if (y + th > window.innerHeight - 4) y = Math.max(4, ev.clientY - th - 14);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function setupBandEvents() {
    const c = $("timeline");
    const tip = $("tip");
    const local = (ev) => {
      const r = c.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    };
    c.addEventListener("mousemove", (ev) => {
      if (S.pinned) return;
      const hit = bandAt(...local(ev));
      if (!hit) {
        tip.hidden = true;
        return;
      }
      bandTooltip(hit);
      placeTip(ev);
    });
    c.addEventListener("mouseleave", () => {
      if (!S.pinned) tip.hidden = true;
    });
    c.addEventListener("click", (ev) => {
      const hit = bandAt(...local(ev));
      S.pinned = hit && (!S.pinned || S.pinned.band !== hit.band) ? hit : null;
      if (S.pinned) {
        bandTooltip(hit);
        placeTip(ev);
      } else tip.hidden = true;
      drawTimeline();
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && S.pinned) {
        S.pinned = null;
        tip.hidden = true;
        drawTimeline();
      }
    });
  }

  // ---- pools and streams ------------------------------------------------

  // The places (pool and stream) of the device's segments.
  function setupPlaces() {
    const sel = $("place");
    sel.textContent = "";
    sel.appendChild(el("option", { value: "" }, "every pool and stream"));
    S.place = "";
    const seen = new Set();
    for (const k of S.dev.key_moments) for (const s of k.state.segments) seen.add(s.place);
    for (const p of [...seen].sort()) sel.appendChild(el("option", { value: p }, p));
    sel.disabled = seen.size < 2;
  }
  function addPlaces(st) {
    const sel = $("place");
    const have = new Set([...sel.options].map((o) => o.value));
    for (const s of st.segments) {
      if (!have.has(s.place)) {
        sel.appendChild(el("option", { value: s.place }, s.place));
        have.add(s.place);
      }
    }
    sel.disabled = have.size < 3;
  }
  // The state with the segments of the chosen place only.
  function inPlace(st) {
    if (!S.place) return st;
    return Object.assign({}, st, { segments: st.segments.filter((s) => s.place === S.place) });
  }

  // ---- call sites -------------------------------------------------------

  function drawSites() {
    const dev = S.dev;
    $("sites-when").textContent = dev.sites.length
      ? "at " + dev.sites_when + " (" + dev.sites_moment + ")"
      : "no live block at " + dev.sites_when;
    const { key, dir } = S.sort;
    const rows = dev.sites.slice().sort((a, b) => {
      const x = a[key];
      const y = b[key];
      if (typeof x === "string") return dir * x.localeCompare(y);
      return dir * ((x || 0) - (y || 0));
    });
    for (const th of document.querySelectorAll("#sites th")) {
      th.setAttribute("aria-sort", th.dataset.key === key ? (dir > 0 ? "ascending" : "descending") : "none");
    }
    const body = document.querySelector("#sites tbody");
    body.textContent = "";
    for (const s of rows) {
      if (S.place && !s.places.includes(S.place)) continue;
      const tr = el("tr");
      const q = S.search;
      if (q && (s.site.toLowerCase().includes(q) || s.stack.some((f) => f.toLowerCase().includes(q)))) {
        tr.classList.add("match");
      }
      const td = el("td", { class: "site" }, s.site);
      td.title = s.stack.join("\n");
      tr.appendChild(td);
      tr.appendChild(el("td", { class: "num" }, s.live_text));
      tr.appendChild(el("td", { class: "num" }, s.peak_text == null ? "–" : s.peak_text));
      tr.appendChild(el("td", { class: "num" }, s.stranded_text));
      tr.addEventListener("click", () => {
        $("search").value = s.site;
        setSearch(s.site);
      });
      body.appendChild(tr);
    }
  }
  function setSearch(q) {
    S.search = q.trim().toLowerCase();
    drawSites();
    drawMap();
    drawTimeline();
  }

  // ---- the page ---------------------------------------------------------

  function selectDevice(i) {
    S.dev = DATA.devices[i];
    S.windowData = null;
    S.bandData = null;
    S.pinned = null;
    setupPlaces();
    S.cursor = null;
    S.x0 = -1;
    S.x1 = Math.max(lastEvent(S.dev), 0);
    momentButtons();
    setupScrub();
    drawSites();
    const oom = S.dev.key_moments.findIndex((k) => k.label.startsWith("oom"));
    showMoment(oom >= 0 ? oom : 0);
    S.cursor = null;
    drawTimeline();
  }

  function init() {
    $("file").textContent = DATA.file;
    $("format").textContent = DATA.format;
    for (const v of DATA.verdict) $("verdict").appendChild(el("li", {}, v));
    if (DATA.quality.length) {
      $("quality-box").hidden = false;
      for (const q of DATA.quality) $("quality").appendChild(el("li", {}, q));
    }
    const sel = $("device");
    DATA.devices.forEach((d, i) => {
      sel.appendChild(el("option", { value: String(i) }, "device " + d.device + (d.ooms.length ? " (out of memory)" : "") + (d.traced ? "" : " (no trace)")));
    });
    sel.disabled = DATA.devices.length < 2;
    if (!DATA.devices.length) {
      document.querySelector("main").appendChild(el("p", {}, "Nothing to show: no segments and no trace events."));
      for (const s of document.querySelectorAll("main section:not(#verdict-box)")) s.hidden = true;
      return;
    }
    sel.addEventListener("change", () => selectDevice(Number(sel.value)));
    setupTimelineEvents();
    setupMapEvents();
    setupBandEvents();
    $("place").addEventListener("change", (ev) => {
      S.place = ev.target.value;
      drawSites();
      drawMap();
    });
    $("scrub").addEventListener("input", (ev) => {
      const v = Number(ev.target.value);
      if (DATA.served) showEvent(v);
      else showMoment(v);
    });
    $("prev").addEventListener("click", () => step(-1));
    $("next").addEventListener("click", () => step(1));
    $("search").addEventListener("input", (ev) => setSearch(ev.target.value));
    for (const th of document.querySelectorAll("#sites th")) {
      th.querySelector("button").addEventListener("click", () => {
        const key = th.dataset.key;
        S.sort = { key, dir: S.sort.key === key ? -S.sort.dir : key === "site" ? 1 : -1 };
        drawSites();
      });
    }
    document.addEventListener("keydown", (ev) => {
      const t = ev.target;
      if (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA") return;
      if (t === $("timeline") && ev.shiftKey) return;
      if (ev.key === "ArrowLeft") step(-1);
      else if (ev.key === "ArrowRight") step(1);
      else if (ev.key === "Home") setWindow(-1, lastEvent(S.dev));
      else return;
      ev.preventDefault();
    });
    let resize = null;
    window.addEventListener("resize", () => {
      clearTimeout(resize);
      resize = setTimeout(() => {
        drawTimeline();
        drawMap();
      }, 100);
    });
    if (window.matchMedia) {
      window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
        drawTimeline();
        drawMap();
      });
    }
    // Open on the first device that ran out of memory, if any.
    const first = Math.max(0, DATA.devices.findIndex((d) => d.ooms.length > 0));
    sel.value = String(first);
    selectDevice(first);
  }

  // For tests and the console: the formatter and the view's state.
  window.fragscopeView = { fmtBytes: fmtBinary, fmtPct, state: S, data: DATA, showEvent, zoom: setWindow };
  init();
})();
