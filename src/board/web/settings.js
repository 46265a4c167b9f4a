// The board page's state: what has been read, what is drawn, and the user's settings, which are
// kept in localStorage across reloads. Also the status line and the error message.

import {compileFilter} from "board/util.js";

// Set by the report file before the page's modules run (report.cpp); null when live.
export const REPORT = window.TRAINHOOKS_REPORT || null;

const SETTINGS_KEY = "trainhooks.board.settings";
const X_AXES = ["step", "relative", "wall"];

export const state = {
  runs: new Map(),      // name -> the run's entry of /api/runs, in name order
  selected: new Set(),  // runs ticked in the list
  known: new Set(),     // runs seen so far: a new run is selected when it appears
  data: {scalars: new Map(), histograms: new Map(), images: new Map(), text: new Map()},
  stamps: new Map(),    // changeKey -> "count/min_step/max_step" of the data held
  settings: {
    smoothing: 0.6,
    logScale: false,
    xAxis: "step",
    ignoreOutliers: false,
    tagFilter: "",
    runFilter: "",
    collapsed: [],      // "section\u0000group" of the tag groups folded away
    brightness: 1,      // images' CSS filter
    contrast: 1,
  },
  tagFilter: compileFilter(""),
  runFilter: compileFilter(""),
  scalarCharts: new Map(),     // tag -> ScalarChart
  histogramCharts: new Map(),  // tag -> HistogramChart
  imageCards: new Map(),       // seriesKey -> ImageCard
  textCards: new Map(),        // seriesKey -> TextCard
  imageLoads: [],              // promises of the first load's images
  ready: false,
};

// Whether a run's data is drawn: ticked, and matched by the runs filter.
export const shownRun = (run) => state.selected.has(run) && state.runFilter.test(run);

const inRange = (v, lo, hi) => typeof v === "number" && v >= lo && v <= hi;

// Reads the saved settings, keeping only values of the right type and range (the storage is the
// user's, and older pages wrote fewer keys).
export function loadSettings() {
  const s = state.settings;
  try {
    const saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}");
    if (inRange(saved.smoothing, 0, 0.999)) s.smoothing = saved.smoothing;
    if (typeof saved.logScale === "boolean") s.logScale = saved.logScale;
    if (X_AXES.includes(saved.xAxis)) s.xAxis = saved.xAxis;
    if (typeof saved.ignoreOutliers === "boolean") s.ignoreOutliers = saved.ignoreOutliers;
    if (typeof saved.tagFilter === "string") s.tagFilter = saved.tagFilter;
    if (typeof saved.runFilter === "string") s.runFilter = saved.runFilter;
    if (Array.isArray(saved.collapsed)) {
      s.collapsed = saved.collapsed.filter((k) => typeof k === "string");
    }
    if (inRange(saved.brightness, 0, 3)) s.brightness = saved.brightness;
    if (inRange(saved.contrast, 0, 3)) s.contrast = saved.contrast;
  } catch (e) {
    // Storage may be unavailable (a file:// report in some browsers): defaults then.
  }
  state.tagFilter = compileFilter(s.tagFilter);
  state.runFilter = compileFilter(s.runFilter);
}

export function saveSettings() {
  try {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(state.settings));
  } catch (e) {
    // Not kept across reloads then.
  }
}

// ---- Status line ---------------------------------------------------------------------------

export function setIndicator(text, kind) {
  const node = document.getElementById("refresh");
  node.textContent = text;
  node.className = `refresh refresh-${kind}`;
  node.title = text;
}

export function showError(text) {
  document.body.setAttribute("data-state", "error");
  const node = document.getElementById("message");
  node.textContent = text;
  node.hidden = false;
  setIndicator("error", "warn");
}

export function hideMessage() {
  const node = document.getElementById("message");
  node.hidden = true;
  node.textContent = "";
}
