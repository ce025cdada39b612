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
  const [alloc, end, size, req, stack, freed, addr, stream] = hit.band;
  const sk = stack == null ? null : hit.stacks[stack];
  const rows = [["size", fmtBytes(size)], ["requested", fmtBytes(req)]];
  if (size > req) rows.push(["rounding waste", fmtBytes(size - req)]);
  rows.push(["allocated at", alloc < 0 ? "before the trace" : "event " + alloc]);
  if (end == null) rows.push(["freed", "still allocated at the end"]);
  else if (freed != null && freed !== end) rows.push(["freed", "requested at event " + end + ", completed at event " + freed]);
  else rows.push(["freed", "at event " + end]);
  rows.push(["address", addr + " · stream " + stream]);
  const tip = tipDetails(sk ? sk.site : "(no stack recorded)", rows);
  if (sk && sk.frames.length) {
    const ul = el("ul", { class: "stack" });
    for (const f of sk.frames) ul.appendChild(el("li", {}, f));
    tip.appendChild(ul);
  }
  tip.classList.toggle("pinned", !!S.pinned);
  if (S.pinned) tip.appendChild(el("div", { class: "muted pin-note" }, "pinned · click elsewhere or Esc to unpin"));
}
function setupBandEvents() {
  const c = $("timeline");
  const tip = $("tip");
  hoverTip(c, bandAt, bandTooltip, () => S.pinned);
  c.addEventListener("click", (ev) => {
    const hit = bandAt(...pointerAt(ev, c));
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
