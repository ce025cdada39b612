// ---- the tooltip --------------------------------------------------------
// One tooltip (#tip) for every chart: what is under the pointer, next to it.

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
// The pointer's position on a canvas.
function pointerAt(ev, canvas) {
  const r = canvas.getBoundingClientRect();
  return [ev.clientX - r.left, ev.clientY - r.top];
}
// Shows `fill(hit)` beside the pointer over what `hitAt(x, y)` finds on the
// canvas, hides it elsewhere; while `held()` (a pinned tooltip) it stays.
function hoverTip(canvas, hitAt, fill, held) {
  const tip = $("tip");
  const still = () => (held ? held() : false);
  canvas.addEventListener("mousemove", (ev) => {
    if (still()) return;
    const hit = hitAt(...pointerAt(ev, canvas));
    if (!hit) {
      tip.hidden = true;
      return;
    }
    fill(hit);
    placeTip(ev);
  });
  canvas.addEventListener("mouseleave", () => {
    if (!still()) tip.hidden = true;
  });
}
// The tooltip's heading, then a list of (name, value) rows.
function tipDetails(heading, rows) {
  const tip = $("tip");
  tip.textContent = "";
  tip.appendChild(el("div", { class: "site" }, heading));
  const dl = el("dl");
  for (const [k, v] of rows) {
    dl.appendChild(el("dt", {}, k));
    dl.appendChild(el("dd", {}, v));
  }
  tip.appendChild(dl);
  return tip;
}
