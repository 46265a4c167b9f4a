// The board's runs: their colours, the list of runs with a tick box each, and the runs filter (a
// regular expression over their names, as TensorBoard's).

import {el, fmtWall, hashString, compileFilter} from "board/util.js";
import {state, saveSettings} from "board/settings.js";

// Readable on white and distinct from each other. A run's colour is picked by a hash of its
// name, so that it keeps its colour across reloads, whatever other runs come and go (two runs
// may share one; the legends name every line).
const PALETTE = ["#2f6fbd", "#e8710a", "#2a9d5c", "#d6336c", "#7b4fd1", "#0f9fb0", "#b5831a",
                 "#5c6b7a", "#c0392b", "#6f9e2b", "#1b4f8a", "#a33fa3", "#00897b", "#8d6e63",
                 "#e0457b", "#3d5afe"];

export const colorOf = (run) => PALETTE[hashString(run) % PALETTE.length];

// Draws the list of runs: one row per run (hidden when the filter does not match it), ticked
// when selected. `onSelection` is called when the user changes the selection.
export function renderRuns(onSelection) {
  const box = document.getElementById("runs");
  const existing = new Map([...box.children].map((n) => [n.getAttribute("data-run"), n]));
  const wanted = [...state.runs.keys()];
  for (const [name, node] of existing) {
    if (name !== null && !state.runs.has(name)) node.remove();
  }
  let matching = 0;
  wanted.forEach((name, i) => {
    let node = existing.get(name);
    if (!node) {
      const input = el("input", {type: "checkbox"});
      input.addEventListener("change", () => {
        if (input.checked) state.selected.add(name);
        else state.selected.delete(name);
        onSelection();
      });
      node = el("label", {class: "run", "data-run": name}, [
        input,
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
    const matches = state.runFilter.test(name);
    node.hidden = !matches;
    if (matches) matching++;
    const run = state.runs.get(name);
    const notes = [];
    if (run.corrupt_records) notes.push(`${run.corrupt_records} corrupt`);
    if (run.purged_values) notes.push(`${run.purged_values} purged`);
    node.querySelector(".run-meta").textContent = notes.join(", ");
    node.title = `${name}: ${run.events} events` +
                 (run.last_wall_time ? `, last written ${fmtWall(run.last_wall_time)}` : "");
    if (box.children[i] !== node) box.insertBefore(node, box.children[i] || null);
  });
  let empty = box.querySelector(".empty");
  const text = !wanted.length ? "No runs yet." : !matching ? "No run matches the filter." : "";
  if (text && !empty) {
    empty = el("p", {class: "empty"});
    box.append(empty);
  }
  if (empty) {
    empty.textContent = text;
    empty.hidden = !text;
  }
}

// The runs panel's controls: the filter and the all / none buttons (which act on the runs the
// filter shows, as TensorBoard's do).
export function setupRunControls(onSelection) {
  const filter = document.getElementById("run-filter");
  filter.value = state.settings.runFilter;
  const apply = () => {
    state.settings.runFilter = filter.value;
    state.runFilter = compileFilter(filter.value);
    filter.setAttribute("aria-invalid", String(!state.runFilter.valid));
    filter.title = state.runFilter.valid ? "" : "Not a regular expression: matching as text";
    saveSettings();
    renderRuns(onSelection);
    onSelection();
  };
  filter.addEventListener("input", apply);
  filter.setAttribute("aria-invalid", String(!state.runFilter.valid));
  const selectAll = (on) => {
    for (const name of state.runs.keys()) {
      if (!state.runFilter.test(name)) continue;
      if (on) state.selected.add(name);
      else state.selected.delete(name);
    }
    renderRuns(onSelection);
    onSelection();
  };
  document.getElementById("runs-all").addEventListener("click", () => selectAll(true));
  document.getElementById("runs-none").addEventListener("click", () => selectAll(false));
}
