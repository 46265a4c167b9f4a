// Small helpers of the board page that depend on nothing: building elements, keys, number and
// time formatting, smoothing.
//
// Data from the logs only ever reaches the document as text (textContent, attributes), never as
// markup; the one exception, text summaries rendered as Markdown, goes through a sanitiser
// (text.js).

// An element with attributes ("text" sets its text, "class" its classes) and children.
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

export const seriesKey = (run, tag) => run + "\u0000" + tag;
export const changeKey = (kind, run, tag) => kind + "\u0000" + run + "\u0000" + tag;
export const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

// JSON numbers, or "NaN" / "Infinity" / "-Infinity" strings, as numbers.
export const toNumber = (v) => (typeof v === "number" ? v : Number(v));

// FNV-1a over the string's UTF-16 code units: the same number for the same name in every
// browser and every load.
export function hashString(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function withAlpha(hex, alpha) {
  if (!hex.startsWith("#")) return hex;
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

export function fmtValue(v) {
  if (v === null || v === undefined) return "–";
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-4) return v.toExponential(3);
  return String(Number(v.toPrecision(5)));
}

const compact = new Intl.NumberFormat("en", {notation: "compact", maximumFractionDigits: 2});

export function fmtTick(v) {
  if (v === null || v === undefined) return "";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4) return compact.format(v);
  if (a < 1e-3) return v.toExponential(0);
  return String(Number(v.toPrecision(4)));
}

export function fmtShort(v) {
  if (v === null || v === undefined) return "–";
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (v !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
  return String(Number(v.toPrecision(3)));
}

export function fmtDuration(seconds) {
  if (!Number.isFinite(seconds)) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function fmtWall(seconds) {
  if (!Number.isFinite(seconds)) return "–";
  const d = new Date(seconds * 1000);
  return d.toLocaleString(undefined, {month: "short", day: "numeric", hour: "2-digit",
                                      minute: "2-digit", second: "2-digit"});
}

export const fmtClock = (d) => d.toLocaleTimeString(undefined, {hour12: false});

export function fmtGenerated(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso || "") : d.toLocaleString();
}

// TensorBoard's smoothing: an exponential moving average, debiased so that the first points
// are not pulled towards zero. Gaps (null) stay gaps and do not enter the average. `ema` carries
// the average across calls (a zoomed window continues the full series' average).
export function smooth(values, weight, ema = {last: 0, count: 0}) {
  if (!(weight > 0)) return values.slice();
  const out = new Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null) {
      out[i] = null;
      continue;
    }
    ema.last = ema.last * weight + (1 - weight) * v;
    ema.count++;
    out[i] = ema.last / (1 - Math.pow(weight, ema.count));
  }
  return out;
}

// A filter over names from what the user typed: a case-insensitive regular expression, or, when
// the text is not one, a case-insensitive substring. `valid` says which.
export function compileFilter(text) {
  const t = (text || "").trim();
  if (!t) return {test: () => true, valid: true};
  try {
    const re = new RegExp(t, "i");
    return {test: (name) => re.test(name), valid: true};
  } catch (e) {
    const lower = t.toLowerCase();
    return {test: (name) => name.toLowerCase().includes(lower), valid: false};
  }
}
