// The board page's scalars: one chart per tag with every shown run's line (raw and smoothed), a
// legend of the values at the cursor, drag-to-zoom (live re-reads the window's exact points), a
// vertical range that shows constant series, enlarging, and downloads of each run's series.

import {el, seriesKey, changeKey, withAlpha, fmtValue, fmtDuration, fmtWall, fmtClock, smooth}
    from "board/util.js";
import {REPORT, state, setIndicator, shownRun} from "board/settings.js";
import {seriesUrl, getJson, parseScalars, downloadName, downloadHref} from "board/api.js";
import {plotWidth, observeWidth, axisOptions, runOrigin, xsOf, linearRange, logRange}
    from "board/charts.js";
import {tagsOf, cardHead, enlargeButton, TagGroups} from "board/cards.js";
import {colorOf} from "board/runs.js";

const HEIGHT = 230;
const ENLARGED_HEIGHT = 480;
let groups = null;

export function syncScalarCharts(changed) {
  groups = groups || new TagGroups("scalars", document.getElementById("scalars"));
  const tags = tagsOf("scalars");
  for (const [tag, chart] of state.scalarCharts) {
    if (!tags.has(tag)) {
      chart.destroy();
      state.scalarCharts.delete(tag);
    }
  }
  const cards = [];
  for (const tag of tags.keys()) {
    if (!state.scalarCharts.has(tag)) state.scalarCharts.set(tag, new ScalarChart(tag));
    cards.push({tag, node: state.scalarCharts.get(tag).node});
  }
  // In place first, so that new plots are drawn at their width.
  groups.place(cards);
  for (const [tag, runsWithTag] of tags) {
    const runs = runsWithTag.filter(shownRun);
    const chart = state.scalarCharts.get(tag);
    if (!sameList(chart.runs, runs) || !chart.plot) {
      chart.build(runs);
    } else if (runs.some((r) => changed.has(changeKey("scalars", r, tag)))) {
      chart.update();
      chart.buildDownloads();
    }
  }
}

export const updateScalarGroups = () => groups && groups.update();

function lonePoint(u, seriesIdx) {
  let n = 0;
  for (const v of u.data[seriesIdx]) if (v !== null && v !== undefined && ++n > 1) return false;
  return n === 1;
}

const sameList = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

// Re-reads the zoomed window of a series whose full data changed (live mode).
export async function refreshZoomedSeries(run, tag) {
  const chart = state.scalarCharts.get(tag);
  if (!chart || !chart.zoom || REPORT) return;
  await chart.fetchZoom(run, chart.zoom);
}

class ScalarChart {
  constructor(tag) {
    this.tag = tag;
    this.runs = [];
    this.plot = null;
    this.zoom = null;     // {x0, x1, data: Map run -> parsed series of the window}
    this.lines = [];      // per run: {run, src, xs, raw, smoothed, index: Map x -> i}
    this.height = HEIGHT;
    this.plotNode = el("div", {class: "plot"});
    this.note = el("span", {class: "card-note"});
    this.legend = el("table", {class: "legend"});
    this.downloads = el("div", {class: "downloads"});
    const head = cardHead(tag);
    this.node = el("div", {class: "card chart", "data-tag": tag},
                   [head, this.plotNode, this.legend, this.downloads]);
    head.append(this.note, enlargeButton(this.node, (on) => {
      this.height = on ? ENLARGED_HEIGHT : HEIGHT;
      if (this.plot) this.plot.setSize({width: plotWidth(this.plotNode), height: this.height});
    }));
    this.observer = observeWidth(this.plotNode, (w) => {
      if (this.plot) this.plot.setSize({width: w, height: this.height});
    });
  }

  destroy() {
    if (this.plot) this.plot.destroy();
    this.observer.disconnect();
    this.node.remove();
  }

  // The data of the chart: per run the zoomed window when there is one, else the full series;
  // joined on a common x (undefined where a run has no point: lines go on; null: a gap).
  lineData() {
    const log = state.settings.logScale;
    this.lines = this.runs.map((run) => {
      const full = state.data.scalars.get(seriesKey(run, this.tag));
      const src = (this.zoom && this.zoom.data.get(run)) || full;
      const origin = runOrigin(run);
      const xs = xsOf(src.steps, src.walls, origin);
      const usable = (v) => (Number.isFinite(v) && (!log || v > 0) ? v : null);
      const raw = src.values.map(usable);
      const ema = {last: 0, count: 0};
      if (src !== full && src.steps.length) {
        // The average of the full series' points before the window, so that a zoomed line is
        // the same line.
        let before = 0;
        while (before < full.steps.length && full.steps[before] < src.steps[0]) before++;
        smooth(full.values.slice(0, before).map(usable), state.settings.smoothing, ema);
      }
      const smoothed = smooth(raw, state.settings.smoothing, ema);
      const index = new Map();
      xs.forEach((x, i) => index.set(x, i));
      return {run, src, xs, raw, smoothed, index, origin};
    });
    const tables = this.lines.map((l) => [l.xs, l.raw, l.smoothed]);
    if (!tables.length) return [[]];
    return tables.length === 1 ? tables[0] : uPlot.join(tables);
  }

  // The vertical range: over the raw points of the lines (in the zoomed window when zoomed),
  // written on the plot's node for whoever checks what is shown.
  yRange(u, dataMin, dataMax) {
    const values = [];
    for (const line of this.lines) {
      for (let i = 0; i < line.raw.length; i++) {
        const x = line.xs[i];
        if (this.zoom && (x < this.zoom.x0 || x > this.zoom.x1)) continue;
        if (line.raw[i] !== null) values.push(line.raw[i]);
      }
    }
    const log = state.settings.logScale;
    let range = log ? logRange(values) : linearRange(values, state.settings.ignoreOutliers);
    // A log axis of points that vary: whole decades, as uPlot draws them.
    if (!range && log && dataMin > 0 && dataMax > 0) range = uPlot.rangeLog(dataMin, dataMax, 10, true);
    const [lo, hi] = range || (log ? [1, 10] : [0, 1]);  // nothing to draw
    this.plotNode.setAttribute("data-y-range", `${lo} ${hi}`);
    return [lo, hi];
  }

  build(runs) {
    if (this.plot) {
      this.plot.destroy();
      this.plot = null;
    }
    this.runs = runs;
    this.zoom = null;
    this.note.textContent = "";
    this.buildLegend();
    this.buildDownloads();
    if (!runs.length) return;
    const xAxis = state.settings.xAxis;
    const series = [{}];
    for (const run of runs) {
      const c = colorOf(run);
      series.push({label: `${run} (raw)`, stroke: withAlpha(c, 0.3), width: 1,
                   points: {show: false}});
      // A lone point has no line to draw: a dot then.
      series.push({label: run, stroke: c, width: 2, points: {show: lonePoint, size: 6, fill: c}});
    }
    const y = {range: (u, min, max) => this.yRange(u, min, max)};
    if (state.settings.logScale) Object.assign(y, {distr: 3, log: 10});
    const opts = {
      width: plotWidth(this.plotNode),
      height: this.height,
      legend: {show: false},
      scales: {x: {time: xAxis === "wall"}, y},
      axes: axisOptions(xAxis),
      series,
      cursor: {
        drag: {x: true, y: false, setScale: false},
        points: {size: 7, width: 1.5},
        bind: {dblclick: () => () => this.resetZoom()},
      },
      hooks: {
        setSelect: [(u) => this.onSelect(u)],
        setCursor: [() => this.updateLegend()],
      },
    };
    this.plot = new uPlot(opts, this.lineData(), this.plotNode);
    this.updateLegend();
  }

  // New data or settings for the same runs: the chart is kept, its data and scales renewed (the
  // downloads are the caller's: settings do not change them).
  update() {
    if (!this.plot) return;
    const data = this.lineData();
    if (this.zoom) {
      this.plot.setData(data, false);
      this.plot.setScale("x", {min: this.zoom.x0, max: this.zoom.x1});
    } else {
      this.plot.setData(data);
    }
    this.updateLegend();
  }

  onSelect(u) {
    const {left, width} = u.select;
    if (width < 3) return;
    const x0 = u.posToVal(left, "x");
    const x1 = u.posToVal(left + width, "x");
    u.setSelect({left: 0, top: 0, width: 0, height: 0}, false);
    this.zoomTo(Math.min(x0, x1), Math.max(x0, x1));
  }

  zoomTo(x0, x1) {
    const zoom = {x0, x1, data: new Map()};
    this.zoom = zoom;
    this.note.textContent = "zoomed · double-click to reset";
    this.plot.setScale("x", {min: x0, max: x1});
    if (REPORT) return;
    // Live: the window's exact points, not the downsampled series.
    Promise.all(this.runs.map((run) => this.fetchZoom(run, zoom).catch((e) => {
      setIndicator(`zoom: ${e.message}`, "warn");
    }))).then(() => {
      if (this.zoom === zoom) this.update();
    });
  }

  // Requests the steps of `run` that the window [x0, x1] covers, with one point beyond each
  // edge so that the lines reach the chart's sides.
  async fetchZoom(run, zoom) {
    const full = state.data.scalars.get(seriesKey(run, this.tag));
    if (!full || !full.steps.length) return;
    const xs = xsOf(full.steps, full.walls, runOrigin(run));
    let first = -1;
    let last = -1;
    for (let i = 0; i < xs.length; i++) {
      if (xs[i] >= zoom.x0 && first < 0) first = i;
      if (xs[i] <= zoom.x1) last = i;
    }
    if (first < 0 || last < first) {
      // No point inside: the neighbours on both sides.
      first = Math.max(0, xs.findIndex((x) => x > zoom.x1) - 1);
      last = Math.min(xs.length - 1, first + 1);
    } else {
      first = Math.max(0, first - 1);
      last = Math.min(xs.length - 1, last + 1);
    }
    let a = full.steps[first];
    let b = full.steps[last];
    if (a > b) [a, b] = [b, a];
    const json = await getJson(seriesUrl("scalars", run, this.tag,
                                         [["start_step", a], ["end_step", b]]));
    if (this.zoom === zoom) zoom.data.set(run, parseScalars(json));
  }

  resetZoom() {
    if (!this.plot) return;
    this.zoom = null;
    this.note.textContent = "";
    this.plot.setData(this.lineData());
    this.updateLegend();
  }

  // Per run, links to its series as CSV and JSON (TensorBoard's formats): every point, live;
  // the points the report holds, in a report.
  buildDownloads() {
    for (const a of this.downloads.querySelectorAll("a")) {
      if (a.href.startsWith("blob:")) URL.revokeObjectURL(a.href);
    }
    this.downloads.replaceChildren();
    if (!this.runs.length) return;
    this.downloads.append(el("span", {class: "downloads-label", text: "Download"}));
    for (const run of this.runs) {
      const series = state.data.scalars.get(seriesKey(run, this.tag));
      const links = ["csv", "json"].map((format) => el("a", {
        href: downloadHref(run, this.tag, format, series),
        download: downloadName(run, this.tag, format),
        "data-format": format,
        text: format.toUpperCase(),
      }));
      this.downloads.append(el("span", {class: "download", "data-run": run},
                               [el("span", {class: "download-run", text: run, title: run}),
                                ...links]));
    }
  }

  buildLegend() {
    const xName = {step: "Step", relative: "Relative", wall: "Time"}[state.settings.xAxis];
    this.legend.replaceChildren();
    if (!this.runs.length) {
      this.legend.append(el("tr", {}, [el("td", {class: "empty", text: "No shown run has this tag."})]));
      return;
    }
    const head = el("tr", {}, ["Run", "Smoothed", "Value", "Step"].map((t) => el("th", {text: t})));
    if (xName !== "Step") head.append(el("th", {text: xName}));
    this.legend.append(head);
    this.rows = this.runs.map((run) => {
      const sw = el("span", {class: "swatch"});
      sw.style.background = colorOf(run);
      const cells = {
        smoothed: el("td", {class: "num"}),
        value: el("td", {class: "num"}),
        step: el("td", {class: "num"}),
        x: el("td", {class: "num"}),
      };
      const row = el("tr", {"data-run": run}, [
        el("td", {title: run}, [el("span", {class: "legend-run"}, [sw, el("span", {text: run})])]),
        cells.smoothed, cells.value, cells.step]);
      if (xName !== "Step") row.append(cells.x);
      this.legend.append(row);
      return cells;
    });
  }

  // Values at the cursor (each run's point nearest to it), or the latest ones.
  updateLegend() {
    if (!this.plot || !this.rows) return;
    const u = this.plot;
    const hover = u.cursor.idx !== null && u.cursor.idx !== undefined;
    this.lines.forEach((line, r) => {
      const cells = this.rows[r];
      let i = line.xs.length - 1;
      if (hover) {
        const di = u.cursor.idxs ? u.cursor.idxs[2 + 2 * r] : null;
        const x = di === null || di === undefined ? undefined : u.data[0][di];
        i = line.index.has(x) ? line.index.get(x) : -1;
      }
      if (i < 0) {
        cells.smoothed.textContent = cells.value.textContent = cells.step.textContent =
            cells.x.textContent = "";
        return;
      }
      cells.smoothed.textContent = fmtValue(line.smoothed[i]);
      cells.value.textContent = fmtValue(line.src.values[i]);
      cells.step.textContent = String(line.src.steps[i]);
      const wall = line.src.walls[i];
      if (state.settings.xAxis === "relative") {
        cells.x.textContent = fmtDuration(wall - line.origin);
      } else {
        cells.x.textContent = Number.isFinite(wall) ? fmtClock(new Date(wall * 1000)) : "–";
        cells.x.title = fmtWall(wall);
      }
    });
  }
}
