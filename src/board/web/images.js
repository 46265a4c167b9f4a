// The board page's images: one card per run and tag with a step slider, and the brightness and
// contrast of them all.

import {el, seriesKey, changeKey, fmtWall} from "board/util.js";
import {REPORT, state} from "board/settings.js";
import {imageUrl, liveHref} from "board/api.js";
import {tagsOf, cardHead, TagGroups} from "board/cards.js";

const IMAGE_TARGET_PX = 200;  // small images are scaled up by an integer factor towards this
let groups = null;

export function syncImageCards(changed) {
  groups = groups || new TagGroups("images", document.getElementById("images"), "grid grid-images");
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
  const cards = [];
  for (const [run, tag] of wanted) {
    const key = seriesKey(run, tag);
    let card = state.imageCards.get(key);
    if (!card) {
      card = new ImageCard(run, tag);
      state.imageCards.set(key, card);
      card.update();
    } else if (changed.has(changeKey("images", run, tag))) {
      card.update();
    }
    cards.push({tag, node: card.node});
  }
  groups.place(cards);
}

export const updateImageGroups = () => groups && groups.update();

// Brightness and contrast of every image (TensorBoard's image controls), as a CSS filter: the
// pixels themselves are untouched.
export function applyImageFilter() {
  const style = document.getElementById("images").style;
  style.setProperty("--image-brightness", String(state.settings.brightness));
  style.setProperty("--image-contrast", String(state.settings.contrast));
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
