// fragscope view: draws the data fragscope computed (schema
// fragscope.view/2, docs/viewer.md). No figure is computed here; numbers
// drawn on the fly (axes, the cursor) are formatted by the terminal's rules.
//
// The page's script is these files, joined in a fixed order
// (src/render/view/mod.rs, SCRIPTS) into the body of one function: this
// one first (the data and the view's state), main.js last (it starts the
// page). Each file speaks of one part of the page.

const DATA = JSON.parse(document.getElementById("fragscope-data").textContent);
// A snapshot's document lists each stack once, in `stacks`, and its key
// moments and bands name them there; give each its list, as a segment map
// or band window the server answers carries its own.
if (DATA.stacks) {
  for (const d of DATA.devices) {
    d.bands.stacks = DATA.stacks;
    for (const k of d.key_moments) k.state.stacks = DATA.stacks;
  }
}
const $ = (id) => document.getElementById(id);

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
