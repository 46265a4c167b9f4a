// The board's cards and how the sections arrange them: tags grouped by their prefix (the part
// before the first '/', as TensorBoard groups them) into groups that fold away, in tag order.

import {el, seriesKey, byName} from "board/util.js";
import {state, saveSettings} from "board/settings.js";
import {colorOf} from "board/runs.js";

// Tags of one kind over all runs, sorted, with the runs that have them (in run order).
export function tagsOf(kind) {
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

// The group of a tag: "train/loss" is in "train"; a tag without '/' is a group of its own name.
export function groupOf(tag) {
  const slash = tag.indexOf("/");
  return slash < 0 ? tag : tag.slice(0, slash);
}

export function cardHead(title, run) {
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

// A button that toggles `card` between its grid cell and the grid's full width; `onChange(on)`
// resizes what is drawn in it.
export function enlargeButton(card, onChange) {
  const button = el("button", {type: "button", class: "card-button enlarge", title: "Enlarge",
                               "aria-label": "Enlarge", "aria-pressed": "false", text: "⤢"});
  button.addEventListener("click", () => {
    const on = !card.classList.contains("is-enlarged");
    card.classList.toggle("is-enlarged", on);
    button.setAttribute("aria-pressed", String(on));
    button.title = on ? "Shrink" : "Enlarge";
    onChange(on);
  });
  return button;
}

// The groups of one section (scalars, histograms, images, text): each a head that folds the
// group and a grid of its cards. Folded groups are kept in the settings.
export class TagGroups {
  constructor(section, container, gridClass = "grid") {
    this.section = section;
    this.container = container;
    this.gridClass = gridClass;
    this.groups = new Map();  // name -> {node, grid, button, count}
  }

  collapsedKey(name) {
    return this.section + "\u0000" + name;
  }

  group(name) {
    let g = this.groups.get(name);
    if (g) return g;
    const count = el("span", {class: "count"});
    const button = el("button", {type: "button", class: "group-toggle", "aria-expanded": "true"},
                      [el("span", {class: "group-name", text: name}), count]);
    const grid = el("div", {class: this.gridClass});
    const node = el("section", {class: "tag-group", "data-group": name},
                    [el("h3", {class: "group-head"}, [button]), grid]);
    g = {node, grid, button, count};
    button.addEventListener("click", () => {
      const key = this.collapsedKey(name);
      const collapsed = new Set(state.settings.collapsed);
      if (collapsed.has(key)) collapsed.delete(key);
      else collapsed.add(key);
      state.settings.collapsed = [...collapsed];
      saveSettings();
      this.showFolding(g, name);
    });
    this.showFolding(g, name);
    this.groups.set(name, g);
    return g;
  }

  showFolding(g, name) {
    const folded = state.settings.collapsed.includes(this.collapsedKey(name));
    g.node.classList.toggle("is-collapsed", folded);
    g.button.setAttribute("aria-expanded", String(!folded));
    g.grid.hidden = folded;
  }

  // Puts the cards ([{tag, node}], in tag order) in their groups, in order, without moving
  // those already in place; groups left without cards go.
  place(cards) {
    const members = new Map();
    for (const card of cards) {
      const name = groupOf(card.tag);
      if (!members.has(name)) members.set(name, []);
      members.get(name).push(card.node);
    }
    for (const [name, g] of this.groups) {
      if (!members.has(name)) {
        g.node.remove();
        this.groups.delete(name);
      }
    }
    [...members.keys()].forEach((name, i) => {
      const g = this.group(name);
      members.get(name).forEach((node, k) => {
        if (g.grid.children[k] !== node) g.grid.insertBefore(node, g.grid.children[k] || null);
      });
      const at = this.container.children[i];
      if (at !== g.node) this.container.insertBefore(g.node, at || null);
    });
  }

  // After the cards' visibility changed: a group shows when one of its cards does, with how
  // many do.
  update() {
    for (const g of this.groups.values()) {
      let visible = 0;
      for (const node of g.grid.children) if (!node.classList.contains("is-hidden")) visible++;
      g.node.hidden = visible === 0;
      g.count.textContent = String(visible);
    }
  }
}
