// ---- the segment map ----------------------------------------------------

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
  hoverTip($("segmap"), blockAt, tooltip);
}
const STATES = ["allocated", "pending free", "free"];
function tooltip(hit) {
  const { seg, blk } = hit;
  const [off, size, req, state, stack, born] = blk;
  const sk = stack == null ? null : S.state.stacks[stack];
  const rows = [["state", STATES[state]], ["size", fmtBytes(size)]];
  if (state !== 2 && req != null) {
    rows.push(["requested", fmtBytes(req)]);
    if (size > req) rows.push(["rounding waste", fmtBytes(size - req)]);
  }
  rows.push(["segment", seg.address + " (" + fmtBytes(seg.size) + (seg.expandable ? ", expandable" : "") + ", stream " + seg.stream + ")"]);
  rows.push(["offset", fmtBytes(off)]);
  if (born != null) rows.push(["allocated at", "event " + born]);
  else if (state !== 2) rows.push(["allocated at", "before the trace"]);
  const tip = tipDetails(state === 2 ? "free block" : sk ? sk.site : "(no stack recorded)", rows);
  if (sk && sk.frames.length) {
    const ul = el("ul", { class: "stack" });
    for (const f of sk.frames.slice(0, 14)) ul.appendChild(el("li", {}, f));
    if (sk.frames.length > 14) ul.appendChild(el("li", {}, "… " + (sk.frames.length - 14) + " more frames"));
    tip.appendChild(ul);
  }
}
