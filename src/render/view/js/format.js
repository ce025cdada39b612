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
