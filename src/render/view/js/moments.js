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
