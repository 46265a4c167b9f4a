// The board page's requests: the API's canonical URLs, and their answers from the server (live)
// or from the report's window.TRAINHOOKS_REPORT.responses.
"use strict";

(() => {
  const board = window.trainhooksBoard;
  const {REPORT, toNumber} = board;
  const ENDPOINTS = {
    scalars: "/api/scalars",
    histograms: "/api/histograms",
    images: "/api/images",
    text: "/api/text",
  };

  // The canonical URL of a request: the report's keys and the server's routes agree on it byte
  // for byte (parameters in the order given; encodeURIComponent's escaping).
  function apiUrl(endpoint, params) {
    if (!params.length) return endpoint;
    return endpoint + "?" + params.map(([k, v]) => k + "=" + encodeURIComponent(String(v))).join("&");
  }

  function seriesUrl(kind, run, tag, extra = []) {
    return apiUrl(ENDPOINTS[kind], [["run", run], ["tag", tag], ...extra]);
  }

  function imageUrl(run, tag, index) {
    return apiUrl("/api/image", [["run", run], ["tag", tag], ["index", index]]);
  }

  // Relative to the page, so that the board also works behind a path prefix.
  const liveHref = (url) => url.slice(1);

  async function getJson(url) {
    if (REPORT) {
      const responses = REPORT.responses || {};
      if (!Object.prototype.hasOwnProperty.call(responses, url)) {
        throw new Error(`the report holds no ${url}`);
      }
      return responses[url];
    }
    let response;
    try {
      response = await fetch(liveHref(url), {cache: "no-store"});
    } catch (e) {
      throw new Error(`${url}: the server did not answer (${e.message})`);
    }
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const why = body && typeof body.error === "string" ? body.error : `HTTP ${response.status}`;
      throw new Error(`${url}: ${why}`);
    }
    if (body === null) throw new Error(`${url}: the answer is not JSON`);
    return body;
  }

  // ---- Parsing responses ------------------------------------------------------------------

  function parseScalars(json) {
    return {
      steps: json.steps || [],
      walls: json.wall_times || [],
      values: (json.values || []).map(toNumber),  // non-finite ones kept for the legend
      total: json.total,
      downsampled: !!json.downsampled,
    };
  }

  Object.assign(board, {seriesUrl, imageUrl, liveHref, getJson, parseScalars});
})();
