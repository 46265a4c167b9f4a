// The board page's base, which the other scripts build on: the page's state and settings, the
// status line, formatting, and what the sections' cards and plots share.
//
// The page's scripts are classic scripts that index.html loads in this order: board_base.js,
// board_api.js, board_scalars.js, board_distributions.js, board_cards.js, board.js. Each is a
// function run once that takes what it uses from the namespace window.trainhooksBoard and adds
// what it defines to it, so a script uses only those before it. Not ES modules: the report is one
// HTML file with every script inlined, opened from disk, and inline scripts cannot import one
// another, while Chromium refuses module scripts from file:// URLs. No bundler either: the page
// has no build step.
//
// Data from the logs only ever reaches the document as text (textContent, attributes), never as
// markup.
"use strict";

(() => {
  const board = (window.trainhooksBoard = {});
  const REPORT = window.TRAINHOOKS_REPORT || null;
  const SETTINGS_KEY = "trainhooks.board.settings";
  // Readable on white, distinct for the first ten runs; later runs get golden-angle hues.
  const PALETTE = ["#2f6fbd", "#e8710a", "#2a9d5c", "#d6336c", "#7b4fd1",
                   "#0f9fb0", "#b5831a", "#5c6b7a", "#c0392b", "#6f9e2b"];
  const AXIS_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

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

  // ---- Status line ---------------------------------------------------------------------------

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

  // ---- Cards and plots: shared by every section -----------------------------------------------

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

  Object.assign(board, {
    REPORT, el, seriesKey, changeKey, byName, toNumber, withAlpha, fmtValue, fmtShort, fmtDuration,
    fmtWall, fmtClock, fmtGenerated, smooth, state, colorOf, loadSettings, saveSettings,
    setIndicator, showError, hideMessage, tagsOf, orderCards, cardHead, plotWidth, observeWidth,
    axisOptions, runOrigin, xsOf,
  });
})();
