// The page of `trainhooks board` and `trainhooks report`. This script is its entry, loaded after
// the others (board_base.js says in which order and why): the first load and the refresh loop,
// the runs list, what is shown (selection and tag filter), the controls.
//
// Live (served by `trainhooks board`): reads the JSON API (docs/tensorboard.md) and refreshes
// every 5 s, re-requesting only the series whose count or last step changed. Report: the report
// file sets window.TRAINHOOKS_REPORT = {title, generated, responses, images} before the page's
// scripts; every request is then answered from `responses` by its canonical URL and nothing is
// fetched.
//
// Plain browser JavaScript on uPlot (vendored): no build step, no framework, works offline.
"use strict";

(() => {
  const {
    REPORT, el, seriesKey, changeKey, byName, fmtWall, fmtClock, fmtGenerated, state, colorOf,
    loadSettings, saveSettings, setIndicator, showError, hideMessage, getJson, seriesUrl,
    parseScalars, syncScalarCharts, refreshZoomedSeries, syncHistogramCharts, syncImageCards,
    syncTextCards,
  } = window.trainhooksBoard;
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

  // ---- Rendering -----------------------------------------------------------------------------

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
