// The board page's Graph view: a run's exported graph (its GraphDef, /api/graph) drawn as a
// directed graph laid out by dagre (vendored, loaded before the page's modules as the global
// `dagre`), one box per node, an arrow from each input to the node that reads it. Clicking a node
// shows its details: op, device, dtype, shape, inputs, the nodes that read it, and every attr.
//
// Node names, ops and attrs come from the logs: they reach the page as text (textContent,
// attributes), never as markup.

import {el, byName} from "board/util.js";
import {state} from "board/settings.js";
import {getJson} from "board/api.js";

const SVG = "http://www.w3.org/2000/svg";
// Beyond this many nodes the layout takes seconds and the drawing is unreadable: listed only.
const MAX_DRAWN_NODES = 1500;
const NODE_HEIGHT = 34;
const CHAR_WIDTH = 6.6;  // of the node labels' 11px monospace font

export const graphUrl = (run) => `/api/graph?run=${encodeURIComponent(run)}`;

let view = null;

// What kind of box a node is, by its op (TensorFlow's names, docs/formats.md).
function opClass(op) {
  if (op === "VariableV2" || op === "VarHandleOp") return "op-variable";
  if (op === "Placeholder" || op === "IteratorGetNext") return "op-input";
  if (op === "Const") return "op-const";
  if (op === "ApplyGradients" || op.startsWith("Apply")) return "op-train";
  return "op-op";
}

// "node:1" and "^node" (an output index, a control input) name the node "node".
const sourceOf = (input) => input.replace(/^\^/, "").replace(/:\d+$/, "");

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

function attrOf(node, names) {
  for (const name of names) {
    const a = node.attrs.find((x) => x.name === name);
    if (a) return a.value;
  }
  return "";
}

class GraphView {
  constructor(root) {
    this.root = root;
    this.select = el("select", {id: "graph-run", "aria-label": "Run whose graph is shown"});
    this.summary = el("span", {class: "graph-summary"});
    this.canvas = el("div", {class: "graph-canvas"});
    this.details = el("div", {class: "graph-details", "aria-live": "polite"});
    this.message = el("p", {class: "empty", hidden: ""});
    this.cache = new Map();  // run -> its /api/graph answer (a graph is written once per model)
    this.shown = null;       // the run drawn
    this.selected = null;    // the node whose details are shown
    this.select.addEventListener("change", () => this.show(this.select.value));
    const actual = el("button", {type: "button", class: "card-button graph-size",
                                 "aria-pressed": "false", text: "actual size",
                                 title: "Draw the graph at its actual size (else fitted)"});
    actual.addEventListener("click", () => {
      const on = this.canvas.classList.toggle("is-actual");
      actual.setAttribute("aria-pressed", String(on));
    });
    root.append(el("div", {class: "graph-controls"}, [
      el("label", {class: "control inline", for: "graph-run", text: "Run "}), this.select,
      this.summary, actual]),
    this.message, el("div", {class: "graph-body"}, [this.canvas, this.details]));
  }

  // The runs that have a graph changed (or appeared): the run list, then the drawing.
  sync() {
    const runs = [...state.runs.values()].filter((r) => r.graph).map((r) => r.name).sort(byName);
    const current = this.select.value;
    this.select.replaceChildren(...runs.map((r) => el("option", {value: r, text: r})));
    const count = document.querySelector('[data-count="graph"]');
    if (count) count.textContent = runs.length ? String(runs.length) : "";
    if (!runs.length) {
      this.say("No graph logged: MonitoredTrainingSession writes one with its first checkpoint.");
      this.canvas.replaceChildren();
      this.details.replaceChildren();
      this.shown = null;
      return Promise.resolve();
    }
    const run = runs.includes(current) ? current : runs[0];
    this.select.value = run;
    return run === this.shown ? Promise.resolve() : this.show(run);
  }

  say(text) {
    this.message.textContent = text;
    this.message.hidden = !text;
  }

  async show(run) {
    this.shown = run;
    let json = this.cache.get(run);
    if (!json) {
      try {
        json = await getJson(graphUrl(run));
      } catch (e) {
        this.say(`The graph could not be loaded: ${e.message}`);
        return;
      }
      this.cache.set(run, json);
    }
    if (this.shown !== run) return;  // another run was chosen meanwhile
    this.draw(json);
  }

  draw(json) {
    const nodes = Array.isArray(json.nodes) ? json.nodes : [];
    this.byName = new Map(nodes.map((n) => [n.name, n]));
    this.readers = new Map();
    const edges = [];
    for (const node of nodes) {
      for (const input of node.inputs || []) {
        const from = sourceOf(input);
        if (!this.byName.has(from) || from === node.name) continue;
        edges.push([from, node.name]);
        if (!this.readers.has(from)) this.readers.set(from, []);
        this.readers.get(from).push(node.name);
      }
    }
    this.summary.textContent =
        `${nodes.length} node${nodes.length === 1 ? "" : "s"}, ${edges.length} edge` +
        `${edges.length === 1 ? "" : "s"} · step ${json.step} · click a node for its details`;
    this.details.replaceChildren(el("p", {class: "hint", text: "No node selected."}));
    this.selected = null;
    if (typeof window.dagre === "undefined" || !window.dagre.layout) {
      this.say("The layout library (dagre.min.js) did not load: the graph cannot be drawn.");
      this.canvas.replaceChildren();
      return;
    }
    if (nodes.length > MAX_DRAWN_NODES) {
      this.say(`${nodes.length} nodes: too many to draw (at most ${MAX_DRAWN_NODES}); ` +
               "`trainhooks graph` prints them.");
      this.canvas.replaceChildren();
      return;
    }
    this.say("");
    const g = new window.dagre.graphlib.Graph();
    g.setGraph({rankdir: "LR", nodesep: 12, ranksep: 48, marginx: 8, marginy: 8});
    g.setDefaultEdgeLabel(() => ({}));
    for (const node of nodes) {
      const chars = Math.max(node.name.length, node.op.length + 2);
      g.setNode(node.name, {width: Math.min(260, 18 + CHAR_WIDTH * chars), height: NODE_HEIGHT});
    }
    for (const [from, to] of edges) g.setEdge(from, to);
    window.dagre.layout(g);
    const size = g.graph();
    const width = Math.ceil(size.width || 0), height = Math.ceil(size.height || 0);
    const drawing = svg("svg", {class: "graph-svg", width, height,
                                viewBox: `0 0 ${width} ${height}`, role: "img"});
    drawing.setAttribute("aria-label", `graph of run ${json.run}`);
    const defs = svg("defs");
    const marker = svg("marker", {id: "graph-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                                  markerWidth: 7, markerHeight: 7, orient: "auto"});
    marker.append(svg("path", {d: "M0,0 L10,5 L0,10 z", class: "graph-arrowhead"}));
    defs.append(marker);
    drawing.append(defs);
    for (const e of g.edges()) {
      const points = g.edge(e).points || [];
      const d = points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`);
      const path = svg("path", {class: "graph-edge", d: d.join(" "),
                                "marker-end": "url(#graph-arrow)"});
      path.dataset.from = e.v;
      path.dataset.to = e.w;
      drawing.append(path);
    }
    this.boxes = new Map();
    for (const node of nodes) {
      const box = g.node(node.name);
      const group = svg("g", {class: `graph-node ${opClass(node.op)}`, tabindex: 0,
                              transform: `translate(${box.x - box.width / 2},${box.y - box.height / 2})`});
      group.dataset.node = node.name;
      group.setAttribute("role", "button");
      const label = (text, y, cls) => {
        const t = svg("text", {x: 8, y, class: cls});
        t.textContent = text;
        return t;
      };
      const title = svg("title");
      title.textContent = `${node.name} (${node.op})`;
      group.append(title, svg("rect", {width: box.width, height: box.height, rx: 4}),
                   label(node.name, 14, "graph-name"), label(node.op, 27, "graph-op"));
      group.addEventListener("click", () => this.choose(node.name));
      group.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter" || ev.key === " ") {
          ev.preventDefault();
          this.choose(node.name);
        }
      });
      this.boxes.set(node.name, group);
      drawing.append(group);
    }
    this.canvas.replaceChildren(drawing);
  }

  // Shows a node's details and marks it and its edges.
  choose(name) {
    const node = this.byName.get(name);
    if (!node) return;
    if (this.selected) this.boxes.get(this.selected)?.classList.remove("is-selected");
    this.selected = name;
    this.boxes.get(name)?.classList.add("is-selected");
    for (const path of this.canvas.querySelectorAll(".graph-edge")) {
      path.classList.toggle("is-near", path.dataset.from === name || path.dataset.to === name);
    }
    const row = (key, value, cls = "") => el("tr", {"data-key": key, class: cls}, [
      el("th", {text: key}), el("td", {text: value === "" ? "–" : value})]);
    const nameList = (names) => {
      const list = el("ul", {class: "graph-names"});
      for (const n of names) {
        const known = this.byName.has(sourceOf(n));
        const item = known ? el("button", {type: "button", class: "link", text: n}) :
                             el("span", {text: n});
        if (known) item.addEventListener("click", () => this.choose(sourceOf(n)));
        list.append(el("li", {}, [item]));
      }
      return names.length ? list : document.createTextNode("–");
    };
    const listRow = (key, names) => el("tr", {"data-key": key}, [
      el("th", {text: key}), el("td", {}, [nameList(names)])]);
    const table = el("table", {class: "graph-table"}, [
      row("name", node.name), row("op", node.op), row("device", node.device),
      row("dtype", attrOf(node, ["dtype", "T", "output_types"])),
      row("shape", attrOf(node, ["shape", "_output_shapes"])),
      listRow("inputs", node.inputs || []), listRow("read by", this.readers.get(name) || []),
      ...node.attrs.map((a) => row(a.name, a.value, "graph-attr")),
    ]);
    this.details.replaceChildren(el("h3", {class: "graph-node-name", text: node.name}), table);
  }
}

// Draws the graph section from state.runs (their "graph" flags); resolves once drawn.
export function syncGraph() {
  const root = document.getElementById("graph");
  if (!root) return Promise.resolve();
  view = view || new GraphView(root);
  return view.sync();
}
