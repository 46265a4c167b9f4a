// The page of `trainhooks board` and `trainhooks report`.
//
// Live (served by `trainhooks board`): reads the JSON API (docs/tensorboard.md) and refreshes
// every 5 s, re-requesting only the series whose count or last step changed. Report: the report
// file sets window.TRAINHOOKS_REPORT = {title, generated, responses, images} before this script;
// every request is then answered from `responses` by its canonical URL and nothing is fetched.
//
// Plain browser JavaScript on uPlot (vendored): no build step, no framework, works offline.
// Data from the logs only ever reaches the document as text (textContent, attributes), never as
// markup.
"use strict";

(() => {
  const REPORT = window.TRAINHOOKS_REPORT || null;
  const REFRESH_MS = 5000;
  const KINDS = ["scalars", "histograms", "images", "text"];
  const ENDPOINTS = {
    scalars: "/api/scalars",
    histograms: "/api/histograms",
    images: "/api/images",
    text: "/api/text",
  };
  const SCALAR_HEIGHT = 230;
  const HISTOGRAM_HEIGHT = 190;
  const TEXT_ENTRIES = 20;    // latest entries shown per text card
  const IMAGE_TARGET_PX = 200;  // small images are scaled up by an integer factor towards this
  const READY_IMAGE_WAIT_MS = 10000;
  const SETTINGS_KEY = "trainhooks.board.settings";
  // Readable on white, distinct for the first ten runs; later runs get golden-angle hues.
  const PALETTE = ["#2f6fbd", "#e8710a", "#2a9d5c", "#d6336c", "#7b4fd1",
                   "#0f9fb0", "#b5831a", "#5c6b7a", "#c0392b", "#6f9e2b"];
  const AXIS_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

  // ---- Requests --------------------------------------------------------------------------

  // The canonical URL of a request: the report's keys and the server's routes agree on it byte
  // for byte (parameters in the order given; encodeURIComponent's escaping).
  function apiUrl(endpoint, params) {
    if (!params.length) return endpoint;
    return endpoint + "?" + params.map(([k, v]) => k + "=" + encodeURIComponent(String(v))).join("&");
  }

  function seriesUrl(kind, run, tag, extra = []) {
    return apiUrl(ENDPOINTS[kind], [["run", run], ["tag", tag], ...extra]);
  }

  function imageUrl(run, tag, index) {
    return apiUrl("/api/image", [["run", run], ["tag", tag], ["index", index]]);
  }

  // Relative to the page, so that the board also works behind a path prefix.
  const liveHref = (url) => url.slice(1);

  async function getJson(url) {
    if (REPORT) {
      const responses = REPORT.responses || {};
      if (!Object.prototype.hasOwnProperty.call(responses, url)) {
        throw new Error(`the report holds no ${url}`);
      }
      return responses[url];
    }
    let response;
    try {
      response = await fetch(liveHref(url), {cache: "no-store"});
    } catch (e) {
      throw new Error(`${url}: the server did not answer (${e.message})`);
    }
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const why = body && typeof body.error === "string" ? body.error : `HTTP ${response.status}`;
      throw new Error(`${url}: ${why}`);
    }
    if (body === null) throw new Error(`${url}: the answer is not JSON`);
    return body;
  }

  // ---- Small helpers ----------------------------------------------------------------------

  function el(tag, attrs = {}, children = []) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (name === "text") node.textContent = value;
      else if (name === "class") node.className = value;
      else node.setAttribute(name, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  const seriesKey = (run, tag) => run + "\u0000" + tag;
  const changeKey = (kind, run, tag) => kind + "\u0000" + run + "\u0000" + tag;
  const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

  // JSON numbers, or "NaN" / "Infinity" / "-Infinity" strings, as numbers.
  const toNumber = (v) => (typeof v === "number" ? v : Number(v));

  function withAlpha(hex, alpha) {
    if (!hex.startsWith("#")) return hex;
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
  }

  function fmtValue(v) {
    if (v === null || v === undefined) return "–";
    if (!Number.isFinite(v)) return String(v);
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e6 || a < 1e-4) return v.toExponential(3);
    return String(Number(v.toPrecision(5)));
  }

  const compact = new Intl.NumberFormat("en", {notation: "compact", maximumFractionDigits: 2});

  function fmtTick(v) {
    if (v === null || v === undefined) return "";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e4) return compact.format(v);
    if (a < 1e-3) return v.toExponential(0);
    return String(Number(v.toPrecision(4)));
  }

  function fmtShort(v) {
    if (v === null || v === undefined) return "–";
    if (!Number.isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (v !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
    return String(Number(v.toPrecision(3)));
  }

  function fmtDuration(seconds) {
    if (!Number.isFinite(seconds)) return "–";
    const s = Math.round(seconds);
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
    return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }

  function fmtWall(seconds) {
    if (!Number.isFinite(seconds)) return "–";
    const d = new Date(seconds * 1000);
    return d.toLocaleString(undefined, {month: "short", day: "numeric", hour: "2-digit",
                                        minute: "2-digit", second: "2-digit"});
  }

  const fmtClock = (d) => d.toLocaleTimeString(undefined, {hour12: false});

  // TensorBoard's smoothing: an exponential moving average, debiased so that the first points
  // are not pulled towards zero. Gaps (null) stay gaps and do not enter the average. `ema` carries
  // the average across calls (a zoomed window continues the full series' average).
  function smooth(values, weight, ema = {last: 0, count: 0}) {
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

  // ---- State -------------------------------------------------------------------------------

  const state = {
    runs: new Map(),      // name -> the run's entry of /api/runs, in name order
    colors: new Map(),    // name -> colour, kept for the page's lifetime
    selected: new Set(),
    known: new Set(),     // runs seen so far: a new run is selected when it appears
    data: {scalars: new Map(), histograms: new Map(), images: new Map(), text: new Map()},
    stamps: new Map(),    // changeKey -> "count/min_step/max_step" of the data held
    settings: {smoothing: 0.6, logScale: false, xAxis: "step"},
    filter: () => true,
    scalarCharts: new Map(),     // tag -> ScalarChart
    histogramCharts: new Map(),  // tag -> HistogramChart
    imageCards: new Map(),       // seriesKey -> ImageCard
    textCards: new Map(),        // seriesKey -> TextCard
    imageLoads: [],              // promises of the first load's images
    ready: false,
  };

  function colorOf(run) {
    if (!state.colors.has(run)) {
      const i = state.colors.size;
      state.colors.set(run, i < PALETTE.length ? PALETTE[i] :
                                                `hsl(${Math.round((i * 137.508) % 360)} 62% 42%)`);
    }
    return state.colors.get(run);
  }

  function loadSettings() {
    try {
      const saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}");
      const s = state.settings;
      if (typeof saved.smoothing === "number" && saved.smoothing >= 0 && saved.smoothing <= 0.999) {
        s.smoothing = saved.smoothing;
      }
      if (typeof saved.logScale === "boolean") s.logScale = saved.logScale;
      if (["step", "relative", "wall"].includes(saved.xAxis)) s.xAxis = saved.xAxis;
    } catch (e) {
      // Storage may be unavailable (a file:// report in some browsers): defaults then.
    }
  }

  function saveSettings() {
    try {
      localStorage.setItem(SETTINGS_KEY, JSON.stringify(state.settings));
    } catch (e) {
      // Not kept across reloads then.
    }
  }

  // ---- Parsing responses ------------------------------------------------------------------

  function parseScalars(json) {
    return {
      steps: json.steps || [],
      walls: json.wall_times || [],
      values: (json.values || []).map(toNumber),  // non-finite ones kept for the legend
      total: json.total,
      downsampled: !!json.downsampled,
    };
  }

  // ---- Loading and refreshing ---------------------------------------------------------------

  function stampOf(info) {
    return `${info.count}/${info.min_step}/${info.max_step}`;
  }

  // Reads /api/runs and then every series that is new or changed since the last read. Returns
  // the changeKeys that changed and the failures (Error objects) of the series that could not
  // be read; a failure of /api/runs itself throws.
  async function update() {
    const runsJson = await getJson("/api/runs");
    const runs = Array.isArray(runsJson.runs) ? runsJson.runs.slice() : [];
    runs.sort((a, b) => byName(a.name, b.name));

    state.runs = new Map(runs.map((r) => [r.name, r]));
    for (const run of runs) {
      colorOf(run.name);
      if (!state.known.has(run.name)) {
        state.known.add(run.name);
        state.selected.add(run.name);
      }
    }
    for (const name of [...state.selected]) {
      if (!state.runs.has(name)) state.selected.delete(name);
    }

    const changed = new Set();
    const work = [];
    const seen = new Set();
    for (const run of runs) {
      for (const kind of KINDS) {
        for (const info of (run.tags && run.tags[kind]) || []) {
          const key = changeKey(kind, run.name, info.tag);
          seen.add(key);
          const stamp = stampOf(info);
          if (state.stamps.get(key) !== stamp) work.push({kind, run: run.name, tag: info.tag, stamp});
        }
      }
    }
    // Series that are gone (a run directory removed, a restart that purged a tag).
    for (const key of [...state.stamps.keys()]) {
      if (!seen.has(key)) {
        const [kind, run, tag] = key.split("\u0000");
        state.stamps.delete(key);
        state.data[kind].delete(seriesKey(run, tag));
        changed.add(key);
      }
    }

    const failures = [];
    await Promise.all(work.map(async (w) => {
      try {
        const json = await getJson(seriesUrl(w.kind, w.run, w.tag));
        const sk = seriesKey(w.run, w.tag);
        state.data[w.kind].set(sk, w.kind === "scalars" ? parseScalars(json) : json);
        if (w.kind === "scalars") await refreshZoomedSeries(w.run, w.tag);
        state.stamps.set(changeKey(w.kind, w.run, w.tag), w.stamp);
        changed.add(changeKey(w.kind, w.run, w.tag));
      } catch (e) {
        failures.push(e);
      }
    }));
    return {changed, failures};
  }

  async function firstLoad() {
    let result;
    try {
      result = await update();
    } catch (e) {
      showError(`Could not load the runs: ${e.message}` + (REPORT ? "" : " (retrying every 5 s)"));
      if (!REPORT) setTimeout(firstLoad, REFRESH_MS);
      return;
    }
    try {
      render(result.changed);
    } catch (e) {
      showError(`Could not draw the board: ${e.message}`);
      throw e;  // and to the console, with its stack
    }
    if (result.failures.length) {
      showError("Some data could not be loaded: " + result.failures.map((e) => e.message).join("; "));
    } else {
      hideMessage();
    }
    // Ready once what the user would see is drawn, images included (bounded).
    const timeout = new Promise((resolve) => setTimeout(resolve, READY_IMAGE_WAIT_MS));
    await Promise.race([Promise.all(state.imageLoads), timeout]);
    state.imageLoads = [];
    state.ready = true;
    if (!result.failures.length) document.body.setAttribute("data-state", "ready");
    if (REPORT) {
      setIndicator(`report generated ${fmtGenerated(REPORT.generated)}`, "report");
    } else {
      setIndicator(`live · updated ${fmtClock(new Date())}`, "ok");
      setTimeout(refreshLoop, REFRESH_MS);
    }
  }

  async function refreshLoop() {
    try {
      const {changed, failures} = await update();
      render(changed);
      if (failures.length) {
        setIndicator(`refresh incomplete ${fmtClock(new Date())}: ${failures[0].message}`, "warn");
      } else {
        setIndicator(`live · updated ${fmtClock(new Date())}`, "ok");
        if (document.body.getAttribute("data-state") === "error") {
          hideMessage();
          document.body.setAttribute("data-state", "ready");
        }
      }
    } catch (e) {
      // Keep what is drawn; say that it is stale.
      setIndicator(`refresh failed ${fmtClock(new Date())}: ${e.message} — retrying`, "warn");
    }
    setTimeout(refreshLoop, REFRESH_MS);
  }

  function fmtGenerated(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? String(iso || "") : d.toLocaleString();
  }

  function setIndicator(text, kind) {
    const node = document.getElementById("refresh");
    node.textContent = text;
    node.className = `refresh refresh-${kind}`;
    node.title = text;
  }

  function showError(text) {
    document.body.setAttribute("data-state", "error");
    const node = document.getElementById("message");
    node.textContent = text;
    node.hidden = false;
    setIndicator("error", "warn");
  }

  function hideMessage() {
    const node = document.getElementById("message");
    node.hidden = true;
    node.textContent = "";
  }

  // ---- Rendering -----------------------------------------------------------------------------

  // Tags of one kind over all runs, sorted, with the runs that have them (in run order).
  function tagsOf(kind) {
    const tags = new Map();
    for (const [name, run] of state.runs) {
      for (const info of (run.tags && run.tags[kind]) || []) {
        if (!state.data[kind].has(seriesKey(name, info.tag))) continue;
        if (!tags.has(info.tag)) tags.set(info.tag, []);
        tags.get(info.tag).push(name);
      }
    }
    return new Map([...tags.entries()].sort((a, b) => byName(a[0], b[0])));
  }

  function render(changed) {
    renderRuns();
    syncScalarCharts(changed);
    syncHistogramCharts(changed);
    syncImageCards(changed);
    syncTextCards(changed);
    applyVisibility();
  }

  function renderRuns() {
    const box = document.getElementById("runs");
    const existing = new Map([...box.children].map((n) => [n.getAttribute("data-run"), n]));
    const wanted = [...state.runs.keys()];
    for (const [name, node] of existing) {
      if (!state.runs.has(name)) node.remove();
    }
    wanted.forEach((name, i) => {
      let node = existing.get(name);
      if (!node) {
        const box_ = el("input", {type: "checkbox"});
        box_.addEventListener("change", () => {
          if (box_.checked) state.selected.add(name);
          else state.selected.delete(name);
          selectionChanged();
        });
        node = el("label", {class: "run", "data-run": name}, [
          box_,
          el("span", {class: "swatch"}),
          el("span", {class: "run-name", text: name === "." ? ". (log directory)" : name}),
          el("span", {class: "run-meta"}),
        ]);
      }
      const color = colorOf(name);
      node.querySelector(".swatch").style.background = color;
      const input = node.querySelector("input");
      input.style.accentColor = color;
      input.checked = state.selected.has(name);
      const run = state.runs.get(name);
      const notes = [];
      if (run.corrupt_records) notes.push(`${run.corrupt_records} corrupt`);
      if (run.purged_values) notes.push(`${run.purged_values} purged`);
      node.querySelector(".run-meta").textContent = notes.join(", ");
      node.title = `${name}: ${run.events} events` +
                   (run.last_wall_time ? `, last written ${fmtWall(run.last_wall_time)}` : "");
      if (box.children[i] !== node) box.insertBefore(node, box.children[i] || null);
    });
    if (!wanted.length && !box.querySelector(".empty")) {
      box.append(el("p", {class: "empty", text: "No runs yet."}));
    } else if (wanted.length) {
      box.querySelectorAll(".empty").forEach((n) => n.remove());
    }
  }

  function selectionChanged() {
    syncScalarCharts(new Set());
    syncHistogramCharts(new Set());
    applyVisibility();
  }

  // Places the section's cards in tag order (then run order) without touching those in place.
  function orderCards(container, nodes) {
    nodes.forEach((node, i) => {
      if (container.children[i] !== node) container.insertBefore(node, container.children[i] || null);
    });
  }

  function cardHead(title, run) {
    const head = el("div", {class: "card-head"});
    if (run !== undefined) {
      const sw = el("span", {class: "swatch"});
      sw.style.background = colorOf(run);
      head.append(sw);
    }
    head.append(el("span", {class: "card-title", text: title, title}));
    if (run !== undefined) head.append(el("span", {class: "card-run", text: run, title: run}));
    return head;
  }

  // Width for a plot: its container's, or a guess while the container is hidden.
  const plotWidth = (node) => Math.max(200, Math.floor(node.clientWidth || 420));

  function observeWidth(node, onWidth) {
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

  function axisOptions(xAxis) {
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
  function runOrigin(run) {
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
  function xsOf(steps, walls, origin) {
    switch (state.settings.xAxis) {
      case "relative": return walls.map((w) => (w - origin) / 3600);
      case "wall": return walls.slice();
      default: return steps.slice();
    }
  }

  // ---- Scalars ---------------------------------------------------------------------------------

  function syncScalarCharts(changed) {
    const container = document.getElementById("scalars");
    const tags = tagsOf("scalars");
    for (const [tag, chart] of state.scalarCharts) {
      if (!tags.has(tag)) {
        chart.destroy();
        state.scalarCharts.delete(tag);
      }
    }
    const nodes = [];
    for (const [tag, runsWithTag] of tags) {
      const runs = runsWithTag.filter((r) => state.selected.has(r));
      let chart = state.scalarCharts.get(tag);
      if (!chart) {
        chart = new ScalarChart(tag);
        state.scalarCharts.set(tag, chart);
        container.append(chart.node);
      }
      nodes.push(chart.node);
      if (!sameList(chart.runs, runs) || !chart.plot) {
        chart.build(runs);
      } else if (runs.some((r) => changed.has(changeKey("scalars", r, tag)))) {
        chart.update();
      }
    }
    orderCards(container, nodes);
  }

  function lonePoint(u, seriesIdx) {
    let n = 0;
    for (const v of u.data[seriesIdx]) if (v !== null && v !== undefined && ++n > 1) return false;
    return n === 1;
  }

  const sameList = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

  // Re-reads the zoomed window of a series whose full data changed (live mode).
  async function refreshZoomedSeries(run, tag) {
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
      this.plotNode = el("div", {class: "plot"});
      this.note = el("span", {class: "card-note"});
      this.legend = el("table", {class: "legend"});
      const head = cardHead(tag);
      head.append(this.note);
      this.node = el("div", {class: "card chart", "data-tag": tag},
                     [head, this.plotNode, this.legend]);
      this.observer = observeWidth(this.plotNode, (w) => {
        if (this.plot) this.plot.setSize({width: w, height: SCALAR_HEIGHT});
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

    build(runs) {
      if (this.plot) {
        this.plot.destroy();
        this.plot = null;
      }
      this.runs = runs;
      this.zoom = null;
      this.note.textContent = "";
      this.buildLegend();
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
      const opts = {
        width: plotWidth(this.plotNode),
        height: SCALAR_HEIGHT,
        legend: {show: false},
        scales: {
          x: {time: xAxis === "wall"},
          y: state.settings.logScale ? {distr: 3, log: 10} : {},
        },
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

    // New data for the same runs and options: the chart is kept, only its data replaced.
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

    buildLegend() {
      const xName = {step: "Step", relative: "Relative", wall: "Time"}[state.settings.xAxis];
      this.legend.replaceChildren();
      if (!this.runs.length) {
        this.legend.append(el("tr", {}, [el("td", {class: "empty", text: "No selected run has this tag."})]));
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

  // ---- Distributions --------------------------------------------------------------------------

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

  // ---- Images ---------------------------------------------------------------------------------

  function syncImageCards(changed) {
    const container = document.getElementById("images");
    const wanted = [];
    for (const [tag, runs] of tagsOf("images")) {
      for (const run of runs) wanted.push([run, tag]);
    }
    const keep = new Set(wanted.map(([r, t]) => seriesKey(r, t)));
    for (const [key, card] of state.imageCards) {
      if (!keep.has(key)) {
        card.destroy();
        state.imageCards.delete(key);
      }
    }
    const nodes = [];
    for (const [run, tag] of wanted) {
      const key = seriesKey(run, tag);
      let card = state.imageCards.get(key);
      if (!card) {
        card = new ImageCard(run, tag);
        state.imageCards.set(key, card);
        container.append(card.node);
        card.update();
      } else if (changed.has(changeKey("images", run, tag))) {
        card.update();
      }
      nodes.push(card.node);
    }
    orderCards(container, nodes);
  }

  class ImageCard {
    constructor(run, tag) {
      this.run = run;
      this.tag = tag;
      this.images = [];
      this.objectUrl = null;
      this.loadToken = 0;
      this.img = el("img", {alt: `${tag} (${run})`, decoding: "async"});
      this.slider = el("input", {type: "range", min: "0", max: "0", value: "0", step: "1",
                                 "aria-label": `step of ${tag}`});
      this.stepLabel = el("span", {class: "image-step"});
      this.slider.addEventListener("input", () => this.show(Number(this.slider.value)));
      this.node = el("div", {class: "card image-card", "data-run": run, "data-tag": tag}, [
        cardHead(tag, run),
        el("div", {class: "image-frame"}, [this.img]),
        el("div", {class: "image-controls"}, [this.slider, this.stepLabel]),
      ]);
    }

    destroy() {
      if (this.objectUrl) URL.revokeObjectURL(this.objectUrl);
      this.node.remove();
    }

    update() {
      const json = state.data.images.get(seriesKey(this.run, this.tag));
      const atLatest = !this.images.length || Number(this.slider.value) >= this.images.length - 1;
      this.images = (json && json.images) || [];
      const n = this.images.length;
      this.slider.max = String(Math.max(0, n - 1));
      this.slider.disabled = n < 2;
      const index = atLatest ? n - 1 : Math.min(Number(this.slider.value), n - 1);
      this.slider.value = String(Math.max(0, index));
      this.show(Math.max(0, index), true);
    }

    show(i, force = false) {
      const info = this.images[i];
      if (!info) {
        this.stepLabel.textContent = "no image";
        return;
      }
      this.stepLabel.textContent = `step ${info.step}`;
      this.stepLabel.title = fmtWall(info.wall_time);
      if (!force && this.shown === i) return;
      this.shown = i;
      const w = Number(info.width) || 0;
      const h = Number(info.height) || 0;
      const scale = w && h ? Math.max(1, Math.round(IMAGE_TARGET_PX / Math.max(w, h))) : 1;
      if (w && h) {
        this.img.style.width = `${w * scale}px`;
        this.img.width = w;
        this.img.height = h;
      }
      const url = imageUrl(this.run, this.tag, info.index);
      const token = ++this.loadToken;
      const loaded = new Promise((resolve) => {
        this.img.onload = () => {
          if (token !== this.loadToken) return resolve();
          this.img.setAttribute("data-loaded", "1");
          this.img.removeAttribute("data-error");
          resolve();
        };
        this.img.onerror = () => {
          if (token === this.loadToken) this.img.setAttribute("data-error", "1");
          resolve();
        };
      });
      if (!state.ready) state.imageLoads.push(loaded);
      this.img.removeAttribute("data-loaded");
      if (REPORT) {
        const src = (REPORT.images || {})[url];
        if (src) this.img.src = src;
        else this.img.onerror();
        return;
      }
      // Fetched rather than linked: the image at an index changes as the kept sample moves on,
      // and an <img> would show the cached bytes of the same URL.
      fetch(liveHref(url), {cache: "no-store"})
          .then((r) => {
            if (!r.ok) throw new Error(`HTTP ${r.status}`);
            return r.blob();
          })
          .then((blob) => {
            if (token !== this.loadToken) return;
            if (this.objectUrl) URL.revokeObjectURL(this.objectUrl);
            this.objectUrl = URL.createObjectURL(blob);
            this.img.src = this.objectUrl;
          })
          .catch(() => {
            if (token === this.loadToken) this.img.onerror();
          });
    }
  }

  // ---- Text ---------------------------------------------------------------------------------

  function syncTextCards(changed) {
    const container = document.getElementById("text");
    const wanted = [];
    for (const [tag, runs] of tagsOf("text")) {
      for (const run of runs) wanted.push([run, tag]);
    }
    const keep = new Set(wanted.map(([r, t]) => seriesKey(r, t)));
    for (const [key, card] of state.textCards) {
      if (!keep.has(key)) {
        card.node.remove();
        state.textCards.delete(key);
      }
    }
    const nodes = [];
    for (const [run, tag] of wanted) {
      const key = seriesKey(run, tag);
      let card = state.textCards.get(key);
      if (!card) {
        card = new TextCard(run, tag);
        state.textCards.set(key, card);
        container.append(card.node);
        card.update();
      } else if (changed.has(changeKey("text", run, tag))) {
        card.update();
      }
      nodes.push(card.node);
    }
    orderCards(container, nodes);
  }

  class TextCard {
    constructor(run, tag) {
      this.run = run;
      this.tag = tag;
      this.list = el("ol", {class: "text-entries"});
      this.more = el("p", {class: "text-more"});
      this.node = el("div", {class: "card text-card", "data-run": run, "data-tag": tag},
                     [cardHead(tag, run), this.list, this.more]);
    }

    update() {
      const json = state.data.text.get(seriesKey(this.run, this.tag));
      const entries = (json && json.text) || [];
      const shown = entries.slice(-TEXT_ENTRIES).reverse();  // newest first
      this.list.replaceChildren(...shown.map((e) => el("li", {}, [
        el("div", {class: "text-step", text: `step ${e.step}`, title: fmtWall(e.wall_time)}),
        el("pre", {class: "text-body", text: String(e.text)}),
      ])));
      this.more.textContent = entries.length > shown.length ?
          `latest ${shown.length} of ${entries.length} kept entries` : "";
    }
  }

  // ---- Visibility: selection and tag filter -------------------------------------------------

  function applyVisibility() {
    const show = state.filter;
    const count = (id, cards) => {
      let visible = 0;
      for (const node of cards) if (!node.classList.contains("is-hidden")) visible++;
      const section = document.getElementById(id);
      const badge = document.querySelector(`[data-count="${id}"]`);
      badge.textContent = cards.length ? String(visible) : "";
      let empty = section.parentElement.querySelector(":scope > .empty");
      const text = !cards.length ? "Nothing logged." :
                   !visible ? "Nothing matches the selected runs and the filter." : "";
      if (text && !empty) {
        empty = el("p", {class: "empty"});
        section.after(empty);
      }
      if (empty) {
        empty.textContent = text;
        empty.hidden = !text;
      }
    };
    const scalarNodes = [];
    for (const chart of state.scalarCharts.values()) {
      chart.node.classList.toggle("is-hidden", !show(chart.tag) || !chart.runs.length);
      scalarNodes.push(chart.node);
    }
    const histNodes = [];
    for (const chart of state.histogramCharts.values()) {
      chart.node.classList.toggle("is-hidden", !show(chart.tag) || !chart.plots.size);
      histNodes.push(chart.node);
    }
    const cardNodes = (cards) => [...cards.values()].map((card) => {
      card.node.classList.toggle("is-hidden", !show(card.tag) || !state.selected.has(card.run));
      return card.node;
    });
    count("scalars", scalarNodes);
    count("histograms", histNodes);
    count("images", cardNodes(state.imageCards));
    count("text", cardNodes(state.textCards));
  }

  function compileFilter(text) {
    const t = text.trim();
    if (!t) return () => true;
    try {
      const re = new RegExp(t, "i");
      return (tag) => re.test(tag);
    } catch (e) {
      const lower = t.toLowerCase();
      return (tag) => tag.toLowerCase().includes(lower);
    }
  }

  // ---- Controls -------------------------------------------------------------------------------

  function rebuildCharts() {
    for (const chart of state.scalarCharts.values()) chart.build(chart.runs);
    for (const chart of state.histogramCharts.values()) chart.rebuild();
  }

  function setupControls() {
    const s = state.settings;
    const smoothing = document.getElementById("smoothing");
    const smoothingValue = document.getElementById("smoothing-value");
    const logScale = document.getElementById("log-scale");
    const xAxis = document.getElementById("x-axis");
    const filter = document.getElementById("tag-filter");
    smoothing.value = String(s.smoothing);
    smoothingValue.textContent = s.smoothing.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
    logScale.checked = s.logScale;
    xAxis.value = s.xAxis;

    let pending = false;
    smoothing.addEventListener("input", () => {
      s.smoothing = Math.min(0.999, Math.max(0, Number(smoothing.value) || 0));
      smoothingValue.textContent = smoothing.value;
      saveSettings();
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        for (const chart of state.scalarCharts.values()) chart.update();
      });
    });
    logScale.addEventListener("change", () => {
      s.logScale = logScale.checked;
      saveSettings();
      for (const chart of state.scalarCharts.values()) chart.build(chart.runs);
    });
    xAxis.addEventListener("change", () => {
      s.xAxis = xAxis.value;
      saveSettings();
      rebuildCharts();
    });
    filter.addEventListener("input", () => {
      state.filter = compileFilter(filter.value);
      applyVisibility();
    });
    const selectAll = (on) => {
      state.selected = new Set(on ? state.runs.keys() : []);
      renderRuns();
      selectionChanged();
    };
    document.getElementById("runs-all").addEventListener("click", () => selectAll(true));
    document.getElementById("runs-none").addEventListener("click", () => selectAll(false));
  }

  function start() {
    if (typeof uPlot === "undefined") {
      showError("The chart library (uPlot.iife.min.js) did not load.");
      return;
    }
    if (REPORT) {
      const title = REPORT.title || "trainhooks report";
      document.getElementById("title").textContent = title;
      document.title = `${title} · trainhooks`;
      document.body.classList.add("is-report");
      // No server to serve the licence file beside the report.
      document.getElementById("uplot-licence").href = "https://github.com/leeoniya/uPlot";
      setIndicator(`report generated ${fmtGenerated(REPORT.generated)}`, "report");
    }
    loadSettings();
    setupControls();
    firstLoad();
  }

  start();
})();
