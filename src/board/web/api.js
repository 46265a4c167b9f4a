// The board page's requests: the API's canonical URLs, and their answers from the server (live)
// or from the report's window.TRAINHOOKS_REPORT.responses. Also the downloads of a scalar series
// (TensorBoard's CSV and JSON).

import {toNumber} from "board/util.js";
import {REPORT} from "board/settings.js";

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

export function seriesUrl(kind, run, tag, extra = []) {
  return apiUrl(ENDPOINTS[kind], [["run", run], ["tag", tag], ...extra]);
}

export function imageUrl(run, tag, index) {
  return apiUrl("/api/image", [["run", run], ["tag", tag], ["index", index]]);
}

// Relative to the page, so that the board also works behind a path prefix.
export const liveHref = (url) => url.slice(1);

export async function getJson(url) {
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

export function parseScalars(json) {
  return {
    steps: json.steps || [],
    walls: json.wall_times || [],
    values: (json.values || []).map(toNumber),  // non-finite ones kept for the legend
    total: json.total,
    downsampled: !!json.downsampled,
  };
}

// ---- Downloads ------------------------------------------------------------------------------

// TensorBoard's name for a series' download; '/' would name a directory.
export const downloadName = (run, tag, format) =>
  `run-${run}-tag-${tag}.${format}`.replace(/\//g, "_");

// A number as the server writes it in CSV (Python's spelling of the non-finite ones).
function csvNumber(v) {
  if (Number.isNaN(v)) return "nan";
  if (v === Infinity) return "inf";
  if (v === -Infinity) return "-inf";
  return String(v);
}

// The series held by the page in the server's download formats: the report's downloads, which
// have no server to ask (and hold the report's points, downsampled to its --max-points).
function seriesFile(series, format) {
  const rows = series.steps.map((step, i) => [series.walls[i], step, series.values[i]]);
  if (format === "csv") {
    return "Wall time,Step,Value\r\n" +
           rows.map((r) => r.map(csvNumber).join(",") + "\r\n").join("");
  }
  const json = (v) => (Number.isFinite(v) ? String(v) : JSON.stringify(String(v)));
  return "[" + rows.map((r) => "[" + r.map(json).join(", ") + "]").join(",") + "]";
}

// Where a download link points: live, the API's every point of the series; in a report, a
// blob of the points it holds.
export function downloadHref(run, tag, format, series) {
  if (!REPORT) return liveHref(seriesUrl("scalars", run, tag, [["format", format]]));
  const type = format === "csv" ? "text/csv" : "application/json";
  return URL.createObjectURL(new Blob([seriesFile(series, format)], {type}));
}
