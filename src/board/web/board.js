// The page of `trainhooks board` and `trainhooks report`: its entry module (index.html loads it
// after uPlot, markdown-it, DOMPurify and dagre, which it uses as globals). The first load and the
// refresh loop, what is shown (runs and the tag filter), the display controls.
//
// Live (served by `trainhooks board`): reads the JSON API (docs/tensorboard.md) and refreshes
// every 5 s, re-requesting only the series whose count or last step changed. Report: the report
// file sets window.TRAINHOOKS_REPORT = {title, generated, responses, images} before the page's
// modules run; every request is then answered from `responses` by its canonical URL and nothing
// is fetched.
//
// The page's modules, by concern (none imports a module listed after it):
//   util.js           elements, keys, formatting, smoothing, the filters' matching
//   settings.js       state, the settings kept in localStorage, the status line
//   api.js            requests and their canonical URLs, downloads
//   runs.js           run colours, the runs list and its filter
//   cards.js          cards, tag groups
//   charts.js         what plots share: axes, x coordinates, the scalar charts' y range
//   scalars.js, distributions.js, images.js, text.js: the sections
//   graph.js          the run's graph, laid out by dagre
//   hparams.js        the runs' hyperparameters and final metrics: a table and a scatter plot
//   board.js          this entry
// They import each other as "board/<file>", which the page's import map resolves to the file
// beside it, and the report's to the file's text (report.cpp). No bundler and no build step: the
// files served are the files written.

import {el, changeKey, seriesKey, byName, fmtClock, fmtGenerated, compileFilter}
    from "board/util.js";
import {REPORT, state, shownRun, loadSettings, saveSettings, setIndicator, showError, hideMessage}
    from "board/settings.js";
import {getJson, seriesUrl, parseScalars} from "board/api.js";
import {renderRuns, setupRunControls} from "board/runs.js";
import {syncScalarCharts, updateScalarGroups, refreshZoomedSeries} from "board/scalars.js";
import {syncHistogramCharts, updateHistogramGroups} from "board/distributions.js";
import {syncImageCards, updateImageGroups, applyImageFilter} from "board/images.js";
import {syncTextCards, updateTextGroups} from "board/text.js";
import {syncGraph} from "board/graph.js";
import {syncHParams, updateHParams} from "board/hparams.js";

const REFRESH_MS = 5000;
const KINDS = ["scalars", "histograms", "images", "text"];
const READY_IMAGE_WAIT_MS = 10000;

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
    result.failures.push(...await syncViews(true));
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
  if (!result.failures.length) {
    document.body.setAttribute("data-state", "ready");
    // A link to a section ("#section-hparams") is followed once the section is drawn.
    if (location.hash.length > 1) document.getElementById(location.hash.slice(1))?.scrollIntoView();
  }
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
    failures.push(...await syncViews(changed.size > 0));
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

// ---- Rendering -----------------------------------------------------------------------------

function render(changed) {
  renderRuns(selectionChanged);
  syncScalarCharts(changed);
  syncHistogramCharts(changed);
  syncImageCards(changed);
  syncTextCards(changed);
  applyVisibility();
}

// The graph (a run's graph is read once) and the hyperparameters (read again when any series
// changed, for their final metrics). Returns the failures.
async function syncViews(hparams) {
  const settled = await Promise.allSettled([syncGraph(), hparams ? syncHParams() : null]);
  return settled.filter((s) => s.status === "rejected").map((s) => s.reason);
}

// The runs shown changed (ticked, or the runs filter): the charts drop or add lines.
function selectionChanged() {
  syncScalarCharts(new Set());
  syncHistogramCharts(new Set());
  updateHParams();
  applyVisibility();
}

// ---- Visibility: shown runs and the tag filter ------------------------------------------------

function applyVisibility() {
  const show = (tag) => state.tagFilter.test(tag);
  const count = (id, cards) => {
    let visible = 0;
    for (const node of cards) if (!node.classList.contains("is-hidden")) visible++;
    const section = document.getElementById(id);
    const badge = document.querySelector(`[data-count="${id}"]`);
    badge.textContent = cards.length ? String(visible) : "";
    let empty = section.parentElement.querySelector(":scope > .empty");
    const text = !cards.length ? "Nothing logged." :
                 !visible ? "Nothing matches the shown runs and the filter." : "";
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
    card.node.classList.toggle("is-hidden", !show(card.tag) || !shownRun(card.run));
    return card.node;
  });
  count("scalars", scalarNodes);
  count("histograms", histNodes);
  count("images", cardNodes(state.imageCards));
  count("text", cardNodes(state.textCards));
  updateScalarGroups();
  updateHistogramGroups();
  updateImageGroups();
  updateTextGroups();
}

// ---- Controls -------------------------------------------------------------------------------

function rebuildCharts() {
  for (const chart of state.scalarCharts.values()) chart.build(chart.runs);
  for (const chart of state.histogramCharts.values()) chart.rebuild();
}

// Calls `f` once per animation frame at most, however often it is asked to.
function perFrame(f) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      f();
    });
  };
}

function setupControls() {
  const s = state.settings;
  const $ = (id) => document.getElementById(id);
  const smoothing = $("smoothing");
  const smoothingValue = $("smoothing-value");
  const logScale = $("log-scale");
  const outliers = $("ignore-outliers");
  const xAxis = $("x-axis");
  const filter = $("tag-filter");
  const brightness = $("image-brightness");
  const contrast = $("image-contrast");
  smoothing.value = String(s.smoothing);
  smoothingValue.textContent = s.smoothing.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
  logScale.checked = s.logScale;
  outliers.checked = s.ignoreOutliers;
  xAxis.value = s.xAxis;
  filter.value = s.tagFilter;
  filter.setAttribute("aria-invalid", String(!state.tagFilter.valid));
  brightness.value = String(s.brightness);
  contrast.value = String(s.contrast);
  applyImageFilter();

  const updateCharts = perFrame(() => {
    for (const chart of state.scalarCharts.values()) chart.update();
  });
  smoothing.addEventListener("input", () => {
    s.smoothing = Math.min(0.999, Math.max(0, Number(smoothing.value) || 0));
    smoothingValue.textContent = smoothing.value;
    saveSettings();
    updateCharts();
  });
  logScale.addEventListener("change", () => {
    s.logScale = logScale.checked;
    saveSettings();
    for (const chart of state.scalarCharts.values()) chart.build(chart.runs);
  });
  outliers.addEventListener("change", () => {
    s.ignoreOutliers = outliers.checked;
    saveSettings();
    for (const chart of state.scalarCharts.values()) chart.update();
  });
  xAxis.addEventListener("change", () => {
    s.xAxis = xAxis.value;
    saveSettings();
    rebuildCharts();
  });
  filter.addEventListener("input", () => {
    s.tagFilter = filter.value;
    state.tagFilter = compileFilter(filter.value);
    filter.setAttribute("aria-invalid", String(!state.tagFilter.valid));
    saveSettings();
    applyVisibility();
  });
  const imageFilter = () => {
    s.brightness = Number(brightness.value);
    s.contrast = Number(contrast.value);
    saveSettings();
    applyImageFilter();
  };
  brightness.addEventListener("input", imageFilter);
  contrast.addEventListener("input", imageFilter);
  $("image-reset").addEventListener("click", () => {
    brightness.value = contrast.value = "1";
    imageFilter();
  });
  setupRunControls(selectionChanged);
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
    // No server to serve the licence files beside the report: the libraries' homes.
    for (const a of document.querySelectorAll(".credits a[data-home]")) {
      a.href = a.getAttribute("data-home");
    }
    setIndicator(`report generated ${fmtGenerated(REPORT.generated)}`, "report");
  }
  loadSettings();
  setupControls();
  firstLoad();
}

start();
