// The board page's distributions: one card per histogram tag, in it one plot per selected run of
// the series' percentile bands.
"use strict";

(() => {
  const board = window.trainhooksBoard;
  const {
    el, seriesKey, changeKey, toNumber, withAlpha, fmtShort, state, colorOf, tagsOf, orderCards,
    cardHead, plotWidth, observeWidth, axisOptions, runOrigin, xsOf,
  } = board;
  const HISTOGRAM_HEIGHT = 190;

  // Basis-point pairs drawn as nested bands (outermost first), as TensorBoard's distributions.
  const BAND_PAIRS = [[0, 8], [1, 7], [2, 6], [3, 5]];
  const MEDIAN = 4;

  function syncHistogramCharts(changed) {
    const container = document.getElementById("histograms");
    const tags = tagsOf("histograms");
    for (const [tag, chart] of state.histogramCharts) {
      if (!tags.has(tag)) {
        chart.destroy();
        state.histogramCharts.delete(tag);
      }
    }
    const nodes = [];
    for (const [tag, runsWithTag] of tags) {
      let chart = state.histogramCharts.get(tag);
      if (!chart) {
        chart = new HistogramChart(tag);
        state.histogramCharts.set(tag, chart);
        container.append(chart.node);
      }
      nodes.push(chart.node);
      chart.sync(runsWithTag.filter((r) => state.selected.has(r)), changed);
    }
    orderCards(container, nodes);
  }

  // One card per tag; inside, one distribution plot per selected run (bands of different runs
  // overlaid would hide each other).
  class HistogramChart {
    constructor(tag) {
      this.tag = tag;
      this.plots = new Map();  // run -> {node, plot, legend, observer, data}
      this.body = el("div", {class: "hist-runs"});
      this.empty = el("p", {class: "empty", text: "No selected run has this tag."});
      this.node = el("div", {class: "card chart hist-chart", "data-tag": tag},
                     [cardHead(tag), this.body]);
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
        height: HISTOGRAM_HEIGHT,
        legend: {show: false},
        scales: {x: {time: xAxis === "wall"}},
        axes: axisOptions(xAxis),
        series,
        bands,
        cursor: {points: {show: false}, drag: {x: true, y: false}},
        hooks: {setCursor: [() => this.updateLegend(p)]},
      }, this.dataOf(run, p), plotNode);
      p.observer = observeWidth(plotNode, (w) => p.plot.setSize({width: w, height: HISTOGRAM_HEIGHT}));
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

  Object.assign(board, {syncHistogramCharts});
})();
