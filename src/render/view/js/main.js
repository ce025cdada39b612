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
  // A rank's page, served from its directory's overview: the way back.
  if (location.protocol !== "file:" && location.pathname === "/rank") {
    $("file").before(el("a", { id: "to-ranks", href: "/" }, "all ranks"), " › ");
  }
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

// The page for the data's kind: a snapshot's, or one without a segment
// map (a profiler trace, a memory-timeline export, a directory of ranks).
if (DATA.kind && DATA.kind !== "snapshot") {
  seriesPage();
} else {
  // For tests and the console: the formatter and the view's state.
  window.fragscopeView = { fmtBytes: fmtBinary, fmtPct, state: S, data: DATA, showEvent, zoom: setWindow };
  init();
}
