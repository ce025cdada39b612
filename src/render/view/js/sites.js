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
