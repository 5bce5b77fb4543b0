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
const STEPS = uPlot.paths.stepped({ align: 1 });
const PALETTE = ["#d64545", "#e0a526", "#7a4fb0", "#2d7dd2", "#6b7079", "#14a3a3"];

const WIDTHS = { "1m": 60, "30m": 1800, "1d": 86400, "10d": 864000 };
const BUCKETS = { "1m": "1-minute", "30m": "30-minute", "1d": "1-day", "10d": "10-day" };
// At least this many buckets are shown: a history of one busy minute is not the whole chart.
const MIN_BUCKETS = 10;

function asked() {
  const r = new URLSearchParams(window.location.search).get("resolution");
  return SPANS[r] ? r : null;
}

function busy(b) {
  return b.workflows_submitted || b.actions_computed || b.actions_reused || b.actions_skipped || b.bytes_written
    || b.bytes_deleted || Object.keys(b.failures).length;
}

// The period that fits the history there is: from the coarsest resolution to the finest
// whose span still covers the first bucket with anything in it (a new install: minutes).
// Each step asks for at most a few hundred buckets.
async function fitted(to) {
  let from = to - SPANS["10d"];
  let res = "10d";
  for (const next of ["10d", "1d", "30m", "1m"]) {
    const query = new URLSearchParams({ resolution: next, from: String(from), to: String(to) });
    const first = (await Pingo.api(`/api/v1/history/stats?${query}`)).buckets.find(busy);
    if (!first) return next === "10d" ? { res: "30m", from: to - SPANS["30m"] } : { res, from };
    if (to - first.start > SPANS[next]) return { res, from };
    res = next;
    from = Math.max(first.start - WIDTHS[next], to - SPANS[next]);
  }
  return { res, from };
}

async function period(to) {
  const res = asked();
  if (res) return { res, from: to - SPANS[res] };
  const fit = await fitted(to);
  return { res: fit.res, from: Math.min(fit.from, to - MIN_BUCKETS * WIDTHS[fit.res]) };
}

// Round ticks: steps of 1, 2 or 5 times a power of ten in the unit the labels are in
// (KiB, MiB, GiB for bytes; s, min, h for seconds; whole actions).
const UNITS = {
  bytes: (max) => {
    const names = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (max >= 1024 && i < names.length - 1) { max /= 1024; i += 1; }
    return [1024 ** i, names[i]];
  },
  seconds: (max) => (max >= 7200 ? [3600, "h"] : max >= 120 ? [60, "min"] : [1, "s"]),
  actions: () => [1, ""],
};

function ticks(unit, highest) {
  const max = highest > 0 ? highest : 1;
  const [size, name] = UNITS[unit](max);
  const target = max / size / 5;
  const power = 10 ** Math.floor(Math.log10(target));
  const mult = [1, 2, 5, 10].find((m) => m * power >= target * (1 - 1e-9));
  // Whole actions and bytes; seconds may be fractions.
  const step = Math.max(unit === "seconds" ? 0 : 1 / size, mult * power);
  const top = Math.max(step, Math.ceil(max / size / step - 1e-9) * step);
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const values = [];
  for (let i = 0; i * step <= top + 1e-9; i += 1) values.push(i * step * size);
  const label = (v) => (v ? `${(v / size).toFixed(decimals)}${name ? ` ${name}` : ""}` : "0");
  return { values, top: top * size, label };
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
  // Each bucket from its start to its end: the last one's end closes the last step.
  const x = [...buckets.map((b) => b.start), ...buckets.slice(-1).map((b) => b.end)];
  const value = (b, key) => (chart.series === "failures" ? b.failures[key] || 0 : b[key] || 0);
  const data = [x, ...series.map(([key]) => [...buckets, ...buckets.slice(-1)].map((b) => value(b, key)))];
  const box = Pingo.el("section", { class: "card chart", id: chart.id },
    Pingo.el("h2", {}, chart.title));
  if (!series.length) {
    box.append(Pingo.el("p", { class: "muted" }, "None in this period."));
    return box;
  }
  const format = chart.unit === "bytes" ? Pingo.bytes : chart.unit === "seconds" ? Pingo.seconds : (v) => v;
  const highest = Math.max(0, ...data.slice(1).flat());
  const y = ticks(chart.unit, highest);
  box.dataset.yTicks = y.values.map(y.label).join("|");
  const opts = {
    width, height: 220,
    // Steps, not slopes: a bucket's figure holds over its whole width (a busy minute is a
    // block a minute wide, not a spike to the next bucket's start).
    series: [{}, ...series.map(([, label, stroke]) => ({ label, stroke, width: 2, fill: `${stroke}22`,
      paths: STEPS, points: { show: false }, value: (u, v) => (v === null ? "–" : format(v)) }))],
    axes: [{}, { label: chart.unit, size: 70, splits: () => y.values, values: (u, vals) => vals.map(y.label) }],
    scales: { y: { range: () => [0, y.top] } },
  };
  // eslint-disable-next-line no-new
  new uPlot(opts, data, box);
  return box;
}

async function draw() {
  const to = Date.now() / 1000;
  const { res, from } = await period(to);
  const query = new URLSearchParams({ resolution: res, from: String(from), to: String(to) });
  const stats = await Pingo.api(`/api/v1/history/stats?${query}`);
  const t = stats.totals;
  const main = document.getElementById("main");
  const width = Math.max(320, Math.min(1300, main.clientWidth - 40));
  const totals = Pingo.el("p", { class: "totals" },
    `${t.workflows_submitted} workflows · ${t.actions_computed} computed · ${t.actions_reused} reused · `,
    `${Pingo.seconds(t.compute_seconds)} spent · ${Pingo.seconds(t.saved_seconds)} saved by reuse · `,
    `${Pingo.bytes(t.bytes_written)} written · ${Pingo.bytes(t.bytes_deleted)} deleted`,
    // Recomputations that made other bytes than their lineage's last (docs/planning.md, "Determinism audit").
    t.actions_nondeterministic ? Pingo.el("span", { class: "nondeterministic-count" },
      ` · ≠ ${t.actions_nondeterministic} non-deterministic`) : null,
    // Reuses found at a start, a parent's output being an earlier lineage's (docs/planning.md, "Early cutoff").
    t.actions_cut_off ? Pingo.el("span", { class: "cutoff-count" },
      ` · ${t.actions_cut_off} of the reused cut off early`) : null);
  const users = Object.entries(stats.byUser || {});
  const byUser = users.length ? Pingo.el("table", { id: "by-user" },
    Pingo.el("thead", {}, Pingo.el("tr", {}, ["user", "computed", "reused", "spent", "saved", "from others"]
      .map((h, i) => Pingo.el("th", { class: i ? "num" : "" }, h)))),
    Pingo.el("tbody", {}, users.map(([name, u]) => Pingo.el("tr", {}, Pingo.el("td", {}, name || "(no user)"),
      Pingo.el("td", { class: "num" }, u.actions_computed), Pingo.el("td", { class: "num" }, u.actions_reused),
      Pingo.el("td", { class: "num" }, Pingo.seconds(u.compute_seconds)),
      Pingo.el("td", { class: "num" }, Pingo.seconds(u.saved_seconds)),
      Pingo.el("td", { class: "num" }, Pingo.seconds(u.saved_others_seconds)))))) : null;
  const shown = Pingo.el("p", { id: "period", class: "muted" }, `${Pingo.when(from)} – ${Pingo.when(to)}, `,
    `${BUCKETS[res]} buckets`, asked() ? "" : " (fitted to the history there is)");
  main.replaceChildren(Pingo.el("h1", {}, "History"), switcher(res), shown, totals,
    Pingo.el("div", { class: "charts" }, CHARTS.map((c) => plot(c, stats.buckets, width))),
    ...(byUser ? [Pingo.el("h2", {}, "Per user"), byUser] : []));
  return false;
}

document.addEventListener("DOMContentLoaded", () => Pingo.poll(draw));
