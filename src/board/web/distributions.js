// The board page's distributions: one card per histogram tag, in it one plot per shown run of
// the series' percentile bands.

import {el, seriesKey, changeKey, toNumber, withAlpha, fmtShort} from "board/util.js";
import {state, shownRun} from "board/settings.js";
import {plotWidth, observeWidth, axisOptions, runOrigin, xsOf} from "board/charts.js";
import {tagsOf, cardHead, enlargeButton, TagGroups} from "board/cards.js";
import {colorOf} from "board/runs.js";

const HEIGHT = 190;
const ENLARGED_HEIGHT = 400;
let groups = null;

// Basis-point pairs drawn as nested bands (outermost first), as TensorBoard's distributions.
const BAND_PAIRS = [[0, 8], [1, 7], [2, 6], [3, 5]];
const MEDIAN = 4;

export function syncHistogramCharts(changed) {
  groups = groups || new TagGroups("histograms", document.getElementById("histograms"));
  const tags = tagsOf("histograms");
  for (const [tag, chart] of state.histogramCharts) {
    if (!tags.has(tag)) {
      chart.destroy();
      state.histogramCharts.delete(tag);
    }
  }
  const cards = [];
  for (const tag of tags.keys()) {
    if (!state.histogramCharts.has(tag)) state.histogramCharts.set(tag, new HistogramChart(tag));
    cards.push({tag, node: state.histogramCharts.get(tag).node});
  }
  // In place first, so that new plots are drawn at their width.
  groups.place(cards);
  for (const [tag, runsWithTag] of tags) {
    state.histogramCharts.get(tag).sync(runsWithTag.filter(shownRun), changed);
  }
}

export const updateHistogramGroups = () => groups && groups.update();

// One card per tag; inside, one distribution plot per shown run (bands of different runs
// overlaid would hide each other).
class HistogramChart {
  constructor(tag) {
    this.tag = tag;
    this.plots = new Map();  // run -> {node, plot, legend, observer, data}
    this.body = el("div", {class: "hist-runs"});
    this.empty = el("p", {class: "empty", text: "No shown run has this tag."});
    this.height = HEIGHT;
    const head = cardHead(tag);
    this.node = el("div", {class: "card chart hist-chart", "data-tag": tag}, [head, this.body]);
    head.append(enlargeButton(this.node, (on) => {
      this.height = on ? ENLARGED_HEIGHT : HEIGHT;
      for (const p of this.plots.values()) {
        p.plot.setSize({width: plotWidth(p.node), height: this.height});
      }
    }));
  }

  destroy() {
    for (const run of [...this.plots.keys()]) this.remove(run);
    this.node.remove();
  }

  remove(run) {
    const p = this.plots.get(run);
    if (p.plot) p.plot.destroy();
    p.observer.disconnect();
    p.node.remove();
    this.plots.delete(run);
  }

  sync(runs, changed) {
    for (const run of [...this.plots.keys()]) {
      if (!runs.includes(run)) this.remove(run);
    }
    runs.forEach((run, i) => {
      if (!this.plots.has(run)) {
        this.add(run);
      } else if (changed.has(changeKey("histograms", run, this.tag))) {
        const p = this.plots.get(run);
        p.plot.setData(this.dataOf(run, p));
        this.updateLegend(p);
      }
      const node = this.plots.get(run).node;
      if (this.body.children[i] !== node) this.body.insertBefore(node, this.body.children[i] || null);
    });
    if (!runs.length) this.body.append(this.empty);
    else this.empty.remove();
  }

  rebuild() {
    for (const run of [...this.plots.keys()]) {
      this.remove(run);
      this.add(run);
    }
  }

  dataOf(run, p) {
    const json = state.data.histograms.get(seriesKey(run, this.tag));
    const steps = json.steps || [];
    const walls = json.wall_times || [];
    const xs = xsOf(steps, walls, runOrigin(run));
    const bands = json.bands || [];
    const cols = [];
    for (let b = 0; b < 9; b++) {
      cols.push(bands.map((row) => {
        const v = toNumber(row[b]);
        return Number.isFinite(v) ? v : null;
      }));
    }
    p.json = json;
    p.xs = xs;
    p.cols = cols;
    return [xs, ...cols];
  }

  add(run) {
    const color = colorOf(run);
    const plotNode = el("div", {class: "plot"});
    const legend = el("div", {class: "hist-legend"});
    const sw = el("span", {class: "swatch"});
    sw.style.background = color;
    const node = el("div", {class: "hist-run", "data-run": run}, [
      el("div", {class: "hist-run-head"}, [sw, el("span", {text: run})]),
      plotNode, legend]);
    this.body.append(node);
    const p = {node, legend, plot: null, observer: null};
    const series = [{}];
    for (let b = 0; b < 9; b++) {
      series.push(b === MEDIAN ?
          {label: "median", stroke: color, width: 1.5, points: {show: false}} :
          {label: `p${b}`, stroke: "rgba(0,0,0,0)", width: 0, points: {show: false}});
    }
    const bands = BAND_PAIRS.map(([lo, hi]) => ({
      series: [hi + 1, lo + 1],
      fill: withAlpha(color, 0.17),
    }));
    const xAxis = state.settings.xAxis;
    p.plot = new uPlot({
      width: plotWidth(plotNode),
      height: this.height,
      legend: {show: false},
      scales: {x: {time: xAxis === "wall"}},
      axes: axisOptions(xAxis),
      series,
      bands,
      cursor: {points: {show: false}, drag: {x: true, y: false}},
      hooks: {setCursor: [() => this.updateLegend(p)]},
    }, this.dataOf(run, p), plotNode);
    p.observer = observeWidth(plotNode, (w) => p.plot.setSize({width: w, height: this.height}));
    this.plots.set(run, p);
    this.updateLegend(p);
  }

  updateLegend(p) {
    const n = p.xs.length;
    if (!n) {
      p.legend.textContent = "no data";
      return;
    }
    const idx = p.plot.cursor.idx;
    const i = idx === null || idx === undefined ? n - 1 : idx;
    const steps = p.json.steps || [];
    const c = p.cols;
    const f = fmtShort;
    p.legend.textContent = `step ${steps[i]} · median ${f(c[MEDIAN][i])}` +
        ` · 68% ${f(c[2][i])} … ${f(c[6][i])} · range ${f(c[0][i])} … ${f(c[8][i])}`;
  }
}
