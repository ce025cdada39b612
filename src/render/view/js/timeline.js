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
