// The board page's text summaries: one card per run and tag with its latest entries, each
// rendered as Markdown (as TensorBoard's text dashboard renders them).
//
// Text from the logs is never markup: markdown-it parses it with raw HTML off (a "<script>" in a
// note is text, shown as such) and images off (the page loads nothing from elsewhere), and
// DOMPurify then keeps only the elements and attributes Markdown produces, links only to
// http(s), mailto and relative addresses. Both are vendored (third_party/) and loaded before the
// page's modules; without them a note shows as plain text.

import {el, seriesKey, changeKey, fmtWall} from "board/util.js";
import {state} from "board/settings.js";
import {tagsOf, cardHead, TagGroups} from "board/cards.js";

const TEXT_ENTRIES = 20;  // latest entries shown per text card
const ALLOWED_TAGS = ["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre",
                      "code", "em", "strong", "s", "ul", "ol", "li", "a", "table", "thead",
                      "tbody", "tr", "th", "td"];
const ALLOWED_ATTR = ["href", "title", "start"];
const ALLOWED_URI = /^(?:https?:|mailto:|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i;
let groups = null;
let md;  // the Markdown parser; null when the libraries did not load

function parser() {
  if (md !== undefined) return md;
  const ok = typeof window.markdownit === "function" && window.DOMPurify &&
             typeof window.DOMPurify.sanitize === "function";
  md = ok ? window.markdownit({html: false, linkify: false, typographer: false}).disable(["image"])
          : null;
  return md;
}

// `text` as sanitised Markdown (a fragment of the document), or as plain text when the
// libraries are missing.
export function renderMarkdown(text) {
  const parse = parser();
  if (!parse) return el("pre", {class: "text-plain", text});
  const fragment = window.DOMPurify.sanitize(parse.render(text), {
    ALLOWED_TAGS, ALLOWED_ATTR, ALLOWED_URI_REGEXP: ALLOWED_URI, RETURN_DOM_FRAGMENT: true,
  });
  for (const a of fragment.querySelectorAll("a[href]")) {
    a.setAttribute("target", "_blank");
    a.setAttribute("rel", "noopener noreferrer");
  }
  const body = el("div", {class: "markdown"});
  body.append(fragment);
  return body;
}

export function syncTextCards(changed) {
  groups = groups || new TagGroups("text", document.getElementById("text"), "grid grid-text");
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
  const cards = [];
  for (const [run, tag] of wanted) {
    const key = seriesKey(run, tag);
    let card = state.textCards.get(key);
    if (!card) {
      card = new TextCard(run, tag);
      state.textCards.set(key, card);
      card.update();
    } else if (changed.has(changeKey("text", run, tag))) {
      card.update();
    }
    cards.push({tag, node: card.node});
  }
  groups.place(cards);
}

export const updateTextGroups = () => groups && groups.update();

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
      el("div", {class: "text-body"}, [renderMarkdown(String(e.text))]),
    ])));
    this.more.textContent = entries.length > shown.length ?
        `latest ${shown.length} of ${entries.length} kept entries` : "";
  }
}
