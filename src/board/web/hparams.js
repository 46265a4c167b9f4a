// The board page's HParams view: one row per run that declared its hyperparameters (TensorBoard's
// HParams plugin summaries, /api/hparams), a column per hyperparameter and per metric the
// experiments name (its final value: the last point of the metric's tag), sortable by any
// column; and a scatter plot (uPlot) of one chosen metric against one chosen hyperparameter, a
// point per run in the run's colour. Rows and points follow the runs shown (ticked, filtered).
//
// Names and values come from the logs: they reach the page as text, never as markup.

import {el, byName, fmtValue, fmtTick} from "board/util.js";
import {state, shownRun} from "board/settings.js";
import {getJson} from "board/api.js";
import {colorOf} from "board/runs.js";
import {plotWidth, observeWidth} from "board/charts.js";

const PLOT_HEIGHT = 260;
let view = null;

const metricName = (m) => m.display_name || (m.group ? `${m.group}/${m.tag}` : m.tag);

function cellText(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return fmtValue(v);
  return String(v);
}

// Numbers before strings before blanks; numbers by value, the rest by text.
function compareValues(a, b) {
  const rank = (v) => (v === null || v === undefined ? 2 : typeof v === "number" ? 0 : 1);
  if (rank(a) !== rank(b)) return rank(a) - rank(b);
  if (typeof a === "number") return a - b;
  return rank(a) === 2 ? 0 : byName(String(a), String(b));
}

class HParamsView {
  constructor(root) {
    this.root = root;
    this.json = {hparams: [], metrics: [], sessions: []};
    this.sort = {column: 0, descending: false};  // column 0: the run
    this.message = el("p", {class: "empty"});
    this.metricSelect = el("select", {id: "hparams-metric", "aria-label": "Metric plotted"});
    this.paramSelect = el("select", {id: "hparams-param", "aria-label": "Hyperparameter plotted"});
    this.plotNode = el("div", {class: "plot hparams-plot"});
    this.table = el("table", {class: "hparams-table"});
    this.controls = el("div", {class: "hparams-controls"}, [
      el("label", {for: "hparams-metric", text: "Plot "}), this.metricSelect,
      el("label", {for: "hparams-param", text: " against "}), this.paramSelect]);
    this.body = el("div", {class: "hparams-body"}, [
      el("div", {class: "card hparams-card"}, [this.controls, this.plotNode]),
      el("div", {class: "hparams-table-wrap"}, [this.table])]);
    root.append(this.message, this.body);
    this.metricSelect.addEventListener("change", () => this.plot());
    this.paramSelect.addEventListener("change", () => this.plot());
    this.chart = null;
    observeWidth(this.plotNode, (w) => this.chart && this.chart.setSize({width: w,
                                                                         height: PLOT_HEIGHT}));
  }

  async load() {
    // No run declared any: nothing to ask for.
    if (![...state.runs.values()].some((r) => r.hparams)) {
      this.json = {hparams: [], metrics: [], sessions: []};
      this.render();
      return;
    }
    try {
      this.json = await getJson("/api/hparams");
    } catch (e) {
      this.json = {hparams: [], metrics: [], sessions: []};
      this.message.textContent = `The hyperparameters could not be loaded: ${e.message}`;
      this.message.hidden = false;
      this.body.hidden = true;
      throw e;
    }
    for (const key of ["hparams", "metrics", "sessions"]) {
      if (!Array.isArray(this.json[key])) this.json[key] = [];
    }
    const fill = (select, names) => {
      const current = select.value;
      select.replaceChildren(...names.map((n, i) => el("option", {value: String(i), text: n})));
      if (current !== "" && Number(current) < names.length) select.value = current;
    };
    fill(this.metricSelect, this.json.metrics.map(metricName));
    fill(this.paramSelect, this.json.hparams.map((h) => h.name));
    // At first, the first hyperparameter whose value differs between runs: what they compare.
    if (!this.defaulted && this.json.sessions.length) {
      this.defaulted = true;
      const varies = (i) => new Set(this.json.sessions.map(
          (s) => JSON.stringify((s.values || [])[i] ?? null))).size > 1;
      const i = this.json.hparams.findIndex((h, k) => varies(k));
      if (i >= 0) this.paramSelect.value = String(i);
    }
    this.render();
  }

  // The sessions of the runs shown, with each row's cells as values: run, hparams, metrics, status.
  rows() {
    return this.json.sessions.filter((s) => shownRun(s.run)).map((s) => ({
      run: s.run,
      values: [s.run,
               ...this.json.hparams.map((h, i) => (s.values || [])[i] ?? null),
               ...this.json.metrics.map((m, i) => {
                 const v = (s.metrics || [])[i];
                 return v && v.value !== undefined ? Number(v.value) : null;
               }),
               s.status === null || s.status === undefined ? "not ended" : s.status],
      steps: this.json.metrics.map((m, i) => ((s.metrics || [])[i] || {}).step),
    }));
  }

  render() {
    const sessions = this.json.sessions;
    const count = document.querySelector('[data-count="hparams"]');
    if (count) count.textContent = sessions.length ? String(sessions.length) : "";
    const rows = this.rows();
    this.message.textContent =
        !sessions.length ? "No hyperparameters logged: set MonitoredTrainingSessionOptions::hparams." :
        !rows.length ? "Nothing matches the shown runs." : "";
    this.message.hidden = !this.message.textContent;
    this.body.hidden = !rows.length;
    if (!rows.length) return;
    this.renderTable(rows);
    this.plot();
  }

  renderTable(rows) {
    const h = this.json.hparams.length;
    const columns = [
      {name: "Run", kind: "run"},
      ...this.json.hparams.map((p) => ({name: p.name, kind: "hparam"})),
      ...this.json.metrics.map((m) => ({name: metricName(m), kind: "metric",
                                        title: `${m.group ? m.group + "/" : ""}${m.tag}`})),
      {name: "Status", kind: "status"},
    ];
    const {column, descending} = this.sort;
    const sorted = rows.slice().sort((a, b) => {
      const c = compareValues(a.values[column], b.values[column]);
      return (descending ? -c : c) || byName(a.run, b.run);
    });
    const head = el("tr", {}, columns.map((c, i) => {
      const button = el("button", {type: "button", class: "sort", text: c.name});
      if (c.title) button.title = c.title;
      button.addEventListener("click", () => {
        this.sort = {column: i, descending: this.sort.column === i ? !this.sort.descending : false};
        this.render();
      });
      const th = el("th", {class: `col-${c.kind}`, "data-column": String(i), scope: "col"},
                    [button]);
      th.setAttribute("aria-sort", i !== column ? "none" : descending ? "descending" : "ascending");
      return th;
    }));
    const body = sorted.map((r) => el("tr", {"data-run": r.run}, r.values.map((v, i) => {
      if (i === 0) {
        return el("td", {class: "col-run"}, [
          el("span", {class: "swatch", style: `background:${colorOf(r.run)}`}),
          el("span", {text: r.run})]);
      }
      const kind = i <= h ? "hparam" : i === r.values.length - 1 ? "status" : "metric";
      const td = el("td", {class: `col-${kind}`, text: cellText(v)});
      if (kind === "metric" && r.steps[i - h - 1] !== undefined) {
        td.title = `at step ${r.steps[i - h - 1]}`;
      }
      return td;
    })));
    this.table.replaceChildren(el("thead", {}, [head]), el("tbody", {}, body));
  }

  // The chosen metric (y) of each run shown against the chosen hyperparameter (x). Strings and
  // bools are categories along x; a number spanning more than a decade is drawn on a log axis.
  plot() {
    const m = Number(this.metricSelect.value), p = Number(this.paramSelect.value);
    const h = this.json.hparams.length;
    const rows = this.rows().filter((r) => r.values[1 + h + m] !== null && r.values[1 + p] !== null);
    if (this.chart) {
      this.chart.destroy();
      this.chart = null;
    }
    this.plotNode.replaceChildren();
    this.plotNode.dataset.points = String(rows.length);
    if (!this.json.metrics.length || !this.json.hparams.length || !rows.length) {
      this.plotNode.append(el("p", {class: "empty", text: "Nothing to plot."}));
      return;
    }
    const raw = rows.map((r) => r.values[1 + p]);
    const numeric = raw.every((v) => typeof v === "number");
    const categories = numeric ? [] : [...new Set(raw.map(String))].sort(byName);
    const xOf = (v) => (numeric ? v : categories.indexOf(String(v)));
    const xs = [...new Set(raw.map(xOf))].sort((a, b) => a - b);
    const positive = numeric && xs[0] > 0;
    const log = positive && xs[xs.length - 1] / xs[0] > 10;
    const data = [xs];
    for (const r of rows) {
      const ys = xs.map(() => null);
      ys[xs.indexOf(xOf(r.values[1 + p]))] = r.values[1 + h + m];
      data.push(ys);
    }
    const metric = this.metricSelect.selectedOptions[0]?.textContent || "";
    const param = this.paramSelect.selectedOptions[0]?.textContent || "";
    this.plotNode.dataset.x = param;
    this.plotNode.dataset.y = metric;
    const pad = xs.length === 1 ? Math.max(Math.abs(xs[0]) * 0.5, 0.5) : 0;
    const xScale = numeric ?
        (log ? {time: false, distr: 3, range: (u, lo, hi) => [lo / 1.6, hi * 1.6]} :
               {time: false, range: (u, lo, hi) => {
                 const span = hi - lo || 1;
                 return pad ? [lo - pad, hi + pad] : [lo - span * 0.08, hi + span * 0.08];
               }}) :
        {time: false, range: () => [-0.5, categories.length - 0.5]};
    const axisBase = {stroke: "#5f6368", grid: {stroke: "#edf0f2", width: 1},
                      ticks: {stroke: "#dadce0", width: 1, size: 4}};
    const xAxis = {...axisBase, label: param, size: 44,
                   values: (u, splits) => splits.map((v) => (numeric ? fmtTick(v) :
                                                             categories[v] ?? ""))};
    if (!numeric) xAxis.splits = () => categories.map((c, i) => i);
    const opts = {
      width: plotWidth(this.plotNode),
      height: PLOT_HEIGHT,
      legend: {show: false},
      cursor: {drag: {x: false, y: false}},
      scales: {x: xScale, y: {range: (u, lo, hi) => {
        const span = hi - lo || Math.abs(hi) * 0.1 || 1;
        return [lo - span * 0.2, hi + span * 0.2];
      }}},
      axes: [xAxis, {...axisBase, label: metric, size: 60,
                     values: (u, splits) => splits.map(fmtTick)}],
      series: [{}, ...rows.map((r) => ({
        label: r.run, stroke: colorOf(r.run), width: 0, paths: () => null,
        points: {show: true, size: 11, width: 2, fill: colorOf(r.run)},
      }))],
    };
    this.chart = new window.uPlot(opts, data, this.plotNode);
    this.plotNode.append(el("div", {class: "hparams-legend"}, rows.map((r) => el("span", {}, [
      el("span", {class: "swatch", style: `background:${colorOf(r.run)}`}),
      el("span", {text: r.run})]))));
  }
}

// Reads /api/hparams and draws the view; resolves once drawn (rejects when it cannot be read).
export function syncHParams() {
  const root = document.getElementById("hparams");
  if (!root) return Promise.resolve();
  view = view || new HParamsView(root);
  return view.load();
}

// The runs shown changed: the rows and points follow.
export const updateHParams = () => view && view.render();
