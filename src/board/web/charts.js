// What the board's plots share: their size, axes, horizontal coordinates, and the scalar charts'
// vertical range (constant series in a band around their value; outliers optionally ignored).

import {fmtTick} from "board/util.js";
import {state} from "board/settings.js";

const AXIS_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

// Width for a plot: its container's, or a guess while the container is hidden.
export const plotWidth = (node) => Math.max(200, Math.floor(node.clientWidth || 420));

export function observeWidth(node, onWidth) {
  let last = 0;
  const observer = new ResizeObserver(() => {
    const w = node.clientWidth;
    if (w > 0 && Math.abs(w - last) >= 2) {
      last = w;
      onWidth(Math.floor(w));
    }
  });
  observer.observe(node);
  return observer;
}

export function axisOptions(xAxis) {
  const base = {
    stroke: "#5f6368",
    font: AXIS_FONT,
    grid: {stroke: "#edf0f2", width: 1},
    ticks: {stroke: "#dadce0", width: 1, size: 4},
  };
  const x = {...base, space: 70, size: xAxis === "wall" ? 48 : 34};
  if (xAxis === "step") x.values = (u, splits) => splits.map(fmtTick);
  if (xAxis === "relative") x.values = (u, splits) => splits.map((v) => `${fmtTick(v)}h`);
  const y = {...base, size: 54, values: (u, splits) => splits.map(fmtTick)};
  return [x, y];
}

// The wall time of a run's first point (of the series read so far): "relative" counts from it.
export function runOrigin(run) {
  let origin = Infinity;
  const prefix = run + "\u0000";
  const consider = (walls) => {
    if (walls && walls.length && walls[0] < origin) origin = walls[0];
  };
  for (const [key, s] of state.data.scalars) if (key.startsWith(prefix)) consider(s.walls);
  for (const [key, h] of state.data.histograms) if (key.startsWith(prefix)) consider(h.wall_times);
  return Number.isFinite(origin) ? origin : 0;
}

// The horizontal coordinate of a series' points for the current axis mode. `origin` is the
// wall time of the run's first point (for "relative").
export function xsOf(steps, walls, origin) {
  switch (state.settings.xAxis) {
    case "relative": return walls.map((w) => (w - origin) / 3600);
    case "wall": return walls.slice();
    default: return steps.slice();
  }
}

// ---- The vertical range of a scalar chart ----------------------------------------------------

// A series whose points differ by less than this fraction of their size is drawn as constant:
// float32 rounding noise (a few units in the last place, 1.2e-7 each) is not a trend to zoom in on.
const FLAT = 1e-6;
// A constant series sits in the middle of a band this fraction of its value wide each way, or
// ±1 around zero.
const BAND = 0.1;
// The share of the chart's height left above and below the points.
const PAD = 0.05;
// "Ignore outliers": the range covers the 5th to the 95th percentile of the values, as
// TensorBoard's "Ignore outliers in chart scaling" does.
export const OUTLIER_QUANTILES = [0.05, 0.95];

// The q-quantile of sorted values, interpolated between neighbours (as d3.quantile).
export function quantile(sorted, q) {
  if (!sorted.length) return NaN;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

// [min, max] of numbers (a loop: a series may hold more points than a call takes arguments).
function extent(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

// [min, max] of the vertical axis for the finite `values` of a linear chart; null when there is
// none (the chart library's default then).
export function linearRange(values, ignoreOutliers) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length) return null;
  let lo;
  let hi;
  if (ignoreOutliers && finite.length > 2) {
    finite.sort((a, b) => a - b);
    lo = quantile(finite, OUTLIER_QUANTILES[0]);
    hi = quantile(finite, OUTLIER_QUANTILES[1]);
  } else {
    [lo, hi] = extent(finite);
  }
  const size = Math.max(Math.abs(lo), Math.abs(hi));
  if (hi - lo <= size * FLAT) {
    const center = (lo + hi) / 2;
    const half = size > 0 ? size * BAND : 1;
    return [center - half, center + half];
  }
  const pad = (hi - lo) * PAD;
  return [lo - pad, hi + pad];
}

// [min, max] for a log-scale chart of the positive `values`: a constant series gets a band of a
// factor of 2 each way; otherwise the chart library's decades (null).
export function logRange(values) {
  const positive = values.filter((v) => Number.isFinite(v) && v > 0);
  if (!positive.length) return null;
  const [lo, hi] = extent(positive);
  return hi - lo <= hi * FLAT ? [lo / 2, hi * 2] : null;
}
