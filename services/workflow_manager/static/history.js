// The history page: the usage statistics API at its four resolutions, as charts (uPlot).
"use strict";

// How far back each resolution looks: a readable number of buckets.
const SPANS = { "1m": 2 * 3600, "30m": 2 * 86400, "1d": 30 * 86400, "10d": 360 * 86400 };
const CHARTS = [
  { id: "chart-actions", title: "Actions: computed vs reused", unit: "actions",
    series: [["actions_computed", "computed", "#2e9e5b"], ["actions_reused", "reused", "#14a3a3"],
      ["actions_skipped", "skipped", "#9aa0ab"]] },
  { id: "chart-seconds", title: "Compute time: spent vs saved by reuse", unit: "seconds",
    series: [["compute_seconds", "spent", "#2d7dd2"], ["saved_seconds", "saved", "#14a3a3"],
      ["saved_others_seconds", "saved from others' datasets", "#7a4fb0"]] },
  { id: "chart-bytes", title: "Bytes written and deleted", unit: "bytes",
    series: [["bytes_written", "written", "#2d7dd2"], ["bytes_deleted", "deleted", "#d64545"]] },
  { id: "chart-failures", title: "Failures by reason", unit: "actions", series: "failures" },
];
const PALETTE = ["#d64545", "#e0a526", "#7a4fb0", "#2d7dd2", "#6b7079", "#14a3a3"];

function resolution() {
  const asked = new URLSearchParams(window.location.search).get("resolution");
  return SPANS[asked] ? asked : "30m";
}

function switcher(current) {
  return Pingo.el("nav", { class: "switch", "aria-label": "resolution" }, Object.keys(SPANS).map((r) =>
    Pingo.el("a", { href: `/history?resolution=${r}`, class: r === current ? "active" : "", "data-resolution": r }, r)));
}

function seriesOf(chart, buckets) {
  if (chart.series !== "failures") return chart.series;
  const reasons = [...new Set(buckets.flatMap((b) => Object.keys(b.failures)))].sort();
  return reasons.map((r, i) => [r, r, PALETTE[i % PALETTE.length]]);
}

function plot(chart, buckets, width) {
  const series = seriesOf(chart, buckets);
  const x = buckets.map((b) => b.start);
  const value = (b, key) => (chart.series === "failures" ? b.failures[key] || 0 : b[key] || 0);
  const data = [x, ...series.map(([key]) => buckets.map((b) => value(b, key)))];
  const box = Pingo.el("section", { class: "card chart", id: chart.id },
    Pingo.el("h2", {}, chart.title));
  if (!series.length) {
    box.append(Pingo.el("p", { class: "muted" }, "None in this period."));
    return box;
  }
  const format = chart.unit === "bytes" ? Pingo.bytes : chart.unit === "seconds" ? Pingo.seconds : (v) => v;
  const opts = {
    width, height: 220,
    series: [{}, ...series.map(([, label, stroke]) => ({ label, stroke, width: 2, fill: `${stroke}22`,
      value: (u, v) => (v === null ? "–" : format(v)) }))],
    axes: [{}, { label: chart.unit, size: 70, values: (u, vals) => vals.map(format) }],
    scales: { y: { range: (u, min, max) => [0, Math.max(1, max)] } },
  };
  // eslint-disable-next-line no-new
  new uPlot(opts, data, box);
  return box;
}

async function draw() {
  const res = resolution();
  const to = Date.now() / 1000;
  const query = new URLSearchParams({ resolution: res, from: String(to - SPANS[res]), to: String(to) });
  const stats = await Pingo.api(`/api/v1/history/stats?${query}`);
  const t = stats.totals;
  const main = document.getElementById("main");
  const width = Math.max(320, Math.min(1300, main.clientWidth - 40));
  const totals = Pingo.el("p", { class: "totals" },
    `${t.workflows_submitted} workflows · ${t.actions_computed} computed · ${t.actions_reused} reused · `,
    `${Pingo.seconds(t.compute_seconds)} spent · ${Pingo.seconds(t.saved_seconds)} saved by reuse · `,
    `${Pingo.bytes(t.bytes_written)} written · ${Pingo.bytes(t.bytes_deleted)} deleted`);
  const users = Object.entries(stats.byUser || {});
  const byUser = users.length ? Pingo.el("table", { id: "by-user" },
    Pingo.el("thead", {}, Pingo.el("tr", {}, ["user", "computed", "reused", "spent", "saved", "from others"]
      .map((h) => Pingo.el("th", {}, h)))),
    Pingo.el("tbody", {}, users.map(([name, u]) => Pingo.el("tr", {}, Pingo.el("td", {}, name || "(no user)"),
      Pingo.el("td", { class: "num" }, u.actions_computed), Pingo.el("td", { class: "num" }, u.actions_reused),
      Pingo.el("td", { class: "num" }, Pingo.seconds(u.compute_seconds)),
      Pingo.el("td", { class: "num" }, Pingo.seconds(u.saved_seconds)),
      Pingo.el("td", { class: "num" }, Pingo.seconds(u.saved_others_seconds)))))) : null;
  main.replaceChildren(Pingo.el("h1", {}, "History"), switcher(res), totals,
    Pingo.el("div", { class: "charts" }, CHARTS.map((c) => plot(c, stats.buckets, width))),
    ...(byUser ? [Pingo.el("h2", {}, "Per user"), byUser] : []));
  return false;
}

document.addEventListener("DOMContentLoaded", () => Pingo.poll(draw));
