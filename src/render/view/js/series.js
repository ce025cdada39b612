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
  hoverTip(canvas, seriesAt, seriesTip);
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
  return { x: s.time_us, lines, stacked: false, event: s.event, moments: d.key_moments, heading: d.heading };
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
  // For hit tests (and tests): what is drawn where.
  window.fragscopeView.state.series = { L, tops, px, py, t0: known.length ? t0 : null, pad, w, h };
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

// The sample nearest the pointer on the series chart and, stacked, the
// category whose area is under it.
function seriesAt(x, y) {
  const G = window.fragscopeView.state.series;
  if (!G || x < G.pad.l || x > G.w - G.pad.r || y < G.pad.t || y > G.h - G.pad.b) return null;
  let i = 0;
  for (let j = 1; j < G.L.x.length; j++) if (Math.abs(G.px(j) - x) < Math.abs(G.px(i) - x)) i = j;
  if (!G.L.stacked) return { G, i, k: null };
  for (let k = 0; k < G.tops.length; k++) {
    const below = k ? G.tops[k - 1][i] : 0;
    if (y <= G.py(below) && y >= G.py(G.tops[k][i])) return { G, i, k };
  }
  return null;
}
function seriesTip({ G, i, k }) {
  const L = G.L;
  const t = L.x[i];
  const ev = L.event ? L.event[i] : null;
  const when = ev != null ? fmtWhen({ first_time_us: G.t0 }, ev, t)
    : t == null ? "before profiling" : "t=" + ((t - G.t0) / 1e6).toFixed(3) + " s";
  const rows = [["when", when]];
  const moments = (L.moments || []).filter((m) => m.event === ev);
  for (const m of moments) rows.push([m.label, m.op == null ? "no operator" : m.op]);
  if (k != null) {
    rows.push([L.lines[k].name, fmtBytes(L.lines[k].y[i] || 0)]);
    rows.push(["all categories", fmtBytes(G.tops[G.tops.length - 1][i])]);
  } else {
    for (const s of L.lines) rows.push([s.name, fmtBytes(s.y[i] || 0)]);
  }
  tipDetails(k != null ? L.lines[k].name : L.heading, rows);
}
