// The board page's images and text: one card per run and tag, with a step slider for images and
// the latest entries for text.
"use strict";

(() => {
  const board = window.trainhooksBoard;
  const {
    REPORT, el, seriesKey, changeKey, fmtWall, state, tagsOf, orderCards, cardHead, imageUrl,
    liveHref,
  } = board;
  const TEXT_ENTRIES = 20;    // latest entries shown per text card
  const IMAGE_TARGET_PX = 200;  // small images are scaled up by an integer factor towards this

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

  Object.assign(board, {syncImageCards, syncTextCards});
})();
