// GET /v1/stats for people: a browser (an Accept that prefers text/html to JSON) gets the
// tally as a small page that reloads itself; everyone else gets the JSON of the endpoint
// table, unchanged. No script: a meta refresh, so helmet's page CSP holds.
import type { Request } from "express";
import type { StatsResponse } from "@duet/protocol";
import { escapeHtml, PAGE_STYLE } from "./join-page.js";

export const STATS_PATH = "/v1/stats";
/** How often the page reloads itself (seconds): six requests a minute against the general limit. */
export const STATS_PAGE_REFRESH_SECONDS = 10;

/** A browser asking for /v1/stats: text/html preferred to JSON (a bare Accept or * / * gets JSON). */
export function wantsStatsPage(req: Request): boolean {
  return (
    req.path === STATS_PATH && req.method === "GET" && req.accepts(["application/json", "text/html"]) === "text/html"
  );
}

const STYLE = `${PAGE_STYLE}dl{display:grid;grid-template-columns:auto auto;gap:.4rem 1.5rem;margin:1.5rem 0}dt{color:#444}dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums;text-align:right}`;

const count = (n: number) => n.toLocaleString("en-US");

function size(bytes: number): string {
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = "bytes";
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return unit === "bytes" ? `${count(bytes)} bytes` : `${value.toFixed(1)} ${unit} (${count(bytes)} bytes)`;
}

/** The page; `stats` undefined: the store did not answer (the page says so and keeps reloading). */
export function renderStatsHtml(baseUrl: string, stats: StatsResponse | undefined, now = new Date()): string {
  const base = escapeHtml(baseUrl);
  const figures: [string, string][] = stats
    ? [
        ["Rooms open now", count(stats.rooms_open)],
        ["Rooms opened", count(stats.sessions)],
        ["Rooms joined by a second seat", count(stats.paired)],
        ["Messages relayed", count(stats.messages)],
        ["Text relayed", size(stats.bytes)],
      ]
    : [];
  const body = stats
    ? `<dl>\n${figures.map(([label, value]) => `<dt>${label}</dt><dd>${value}</dd>`).join("\n")}\n</dl>`
    : `<p><strong>The relay's store does not answer right now</strong> (503 unavailable): rooms cannot be opened or used until it does. This page tries again in ${STATS_PAGE_REFRESH_SECONDS} s.</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="${STATS_PAGE_REFRESH_SECONDS}">
<title>duet relay stats</title>
<style>${STYLE}</style>
</head><body>
<h1>duet relay stats</h1>
<p>The whole relay, every node, since its store was created. As of ${now.toISOString().slice(11, 19)} UTC; this page reloads itself every ${STATS_PAGE_REFRESH_SECONDS} s.</p>
${body}
<p>The same figures as JSON, for scripts:</p>
<pre><code>curl -s ${base}${STATS_PATH}</code></pre>
<p>Per-node figures (requests, errors by code, waiting recvs, Redis health) are on each node's <code>/metrics</code>, for Prometheus.</p>
</body></html>
`;
}
