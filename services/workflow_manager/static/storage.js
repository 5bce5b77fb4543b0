// The storage page: usage against capacity and threshold (now and over time), the datasets
// sortable by size, uses, last use, compute time and state, and what was deleted recently
// and by which algorithm; the owner's buttons to pin, unpin, invalidate and delete a
// dataset (docs/web-ui.md).
"use strict";

const COLUMNS = [
  { key: "hash", label: "dataset", value: (d) => d.hash },
  { key: "state", label: "state", value: (d) => d.state },
  { key: "size", label: "size", value: (d) => d.size ?? -1, num: true },
  { key: "useCount", label: "uses", value: (d) => d.useCount, num: true },
  { key: "lastUsedAt", label: "last use", value: (d) => d.lastUsedAt ?? 0, num: true },
  { key: "computeSeconds", label: "compute time", value: (d) => d.computeSeconds ?? -1, num: true },
  { key: "workflow", label: "made by", value: (d) => (d.workflow && (d.workflow.name || d.workflow.id)) || "" },
];
// What the owner of a dataset (or an admin) may do to it (docs/api.md, "Datasets by hand").
const GONE = ["INVALIDATED", "DELETING", "DELETED", "LOST"];
const MANAGE = [
  { name: "pin", show: (d) => !d.pinned && !GONE.includes(d.state), label: "Pin", change: { pinned: true } },
  { name: "unpin", show: (d) => d.pinned, label: "Unpin", change: { pinned: false } },
  { name: "invalidate", show: (d) => ["STORED", "LEAF", "STORED_TO_DELETE"].includes(d.state), label: "Invalidate",
    ask: "Never reuse this dataset again? Its next use computes it; its files go once nothing needs them." },
  { name: "delete", show: (d) => ["STORED", "LEAF", "STORED_TO_DELETE"].includes(d.state), label: "Delete",
    ask: "Delete this dataset's files? Refused while a workflow still needs it.", danger: true },
];
let sortKey = "size";
let descending = true;
let datasets = [];

function gauge(body) {
  // What the decision algorithm watches: the bytes of STORED datasets against the budget.
  const used = body.bytesByState.STORED || 0;
  const capacity = body.capacityBytes;
  const share = capacity ? Math.min(1, used / capacity) : 0;
  const width = 600;
  const over = used >= body.threshold * capacity;
  // Everything storage holds, final outputs (LEAF) and deletions under way included: drawn behind.
  const held = body.usedBytes ?? used;
  const heldShare = capacity ? Math.min(1, held / capacity) : 0;
  const svg = Pingo.el("svg", { id: "gauge", width, height: 46, viewBox: `0 0 ${width} 46`, role: "img",
    "aria-label": `${Pingo.bytes(used)} of ${Pingo.bytes(capacity)}` },
  Pingo.el("rect", { x: 0, y: 8, width, height: 22, rx: 4, class: "gauge-back" }),
  Pingo.el("rect", { x: 0, y: 8, width: Math.max(2, heldShare * width), height: 22, rx: 4, class: "gauge-held" }),
  Pingo.el("rect", { x: 0, y: 8, width: Math.max(2, share * width), height: 22, rx: 4,
    class: over ? "gauge-fill over" : "gauge-fill" }),
  Pingo.el("line", { x1: body.threshold * width, x2: body.threshold * width, y1: 2, y2: 36, class: "gauge-threshold" }),
  Pingo.el("text", { x: Math.min(width - 150, body.threshold * width + 4), y: 44, class: "gauge-label" },
    `decision at ${Math.round(body.threshold * 100)}%`));
  const states = Object.entries(body.bytesByState).map(([s, n]) => Pingo.el("span", { class: "by-state" },
    Pingo.badge(s), ` ${Pingo.bytes(n)}`));
  return Pingo.el("section", { class: "card", id: "usage" },
    Pingo.el("h2", {}, "Managed storage"),
    Pingo.el("p", { class: "big", id: "usage-text" },
      `${Pingo.bytes(used)} of ${Pingo.bytes(capacity)} (${(share * 100).toFixed(1)}%)`),
    Pingo.el("p", { class: "muted", id: "usage-held" },
      `All datasets held, final outputs included: ${Pingo.bytes(held)} of ${Pingo.bytes(capacity)} `
      + `(${(capacity ? (100 * held) / capacity : 0).toFixed(1)}%)`),
    svg, Pingo.el("p", { class: "states" }, states),
    body.managedRootBytes !== null ? Pingo.el("p", { class: "muted" },
      `The storage itself reports ${Pingo.bytes(body.managedRootBytes)} under the managed root.`) : null);
}

function overTime(body, stats, width) {
  // Usage at the end of each bucket, walked back from now with what each bucket wrote and
  // deleted: an estimate (lost datasets and unmanaged outputs blur it), drawn against the budget.
  const box = Pingo.el("section", { class: "card chart", id: "usage-over-time" },
    Pingo.el("h2", {}, "Usage over the last two days (estimated from bytes written and deleted)"));
  const buckets = stats.buckets;
  if (!buckets.length) return box;
  let level = body.bytesByState.STORED || 0;
  const used = new Array(buckets.length);
  for (let i = buckets.length - 1; i >= 0; i -= 1) {
    used[i] = Math.max(0, level);
    level -= (buckets[i].bytes_written || 0) - (buckets[i].bytes_deleted || 0);
  }
  const x = buckets.map((b) => b.end);
  const cap = buckets.map(() => body.capacityBytes);
  const threshold = buckets.map(() => body.threshold * body.capacityBytes);
  // eslint-disable-next-line no-new
  new uPlot({
    width, height: 200,
    series: [{}, { label: "used", stroke: "#2d7dd2", width: 2, fill: "#2d7dd222", value: (u, v) => Pingo.bytes(v) },
      { label: "capacity", stroke: "#6b7079", dash: [6, 4], points: { show: false }, value: (u, v) => Pingo.bytes(v) },
      { label: "threshold", stroke: "#e0a526", dash: [3, 3], points: { show: false },
        value: (u, v) => Pingo.bytes(v) }],
    axes: [{}, { size: 80, values: (u, vals) => vals.map(Pingo.bytes) }],
    scales: { y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
  }, [x, used, cap, threshold], box);
  return box;
}

function table() {
  const column = COLUMNS.find((c) => c.key === sortKey);
  const rows = [...datasets].sort((a, b) => {
    const va = column.value(a);
    const vb = column.value(b);
    const order = va < vb ? -1 : va > vb ? 1 : 0;
    return descending ? -order : order;
  });
  const head = COLUMNS.map((c) => Pingo.el("th", { class: c.num ? "num sortable" : "sortable",
    "data-sort": c.key, "aria-sort": c.key === sortKey ? (descending ? "descending" : "ascending") : "none",
    onclick: () => { descending = c.key === sortKey ? !descending : true; sortKey = c.key; redrawTable(); } },
  c.label, c.key === sortKey ? (descending ? " ▼" : " ▲") : ""));
  head.push(Pingo.el("th", {}, "manage"));
  return Pingo.el("table", { id: "datasets" }, Pingo.el("thead", {}, Pingo.el("tr", {}, head)),
    Pingo.el("tbody", {}, rows.map((d) => Pingo.el("tr", { "data-hash": d.hash },
      Pingo.el("td", { class: "mono", title: d.path || "" }, d.hash.slice(0, 12)),
      Pingo.el("td", {}, Pingo.badge(d.state)),
      Pingo.el("td", { class: "num" }, Pingo.bytes(d.size)),
      Pingo.el("td", { class: "num" }, d.useCount),
      Pingo.el("td", { class: "num" }, Pingo.when(d.lastUsedAt)),
      Pingo.el("td", { class: "num" }, Pingo.seconds(d.computeSeconds)),
      Pingo.el("td", {}, d.workflow ? Pingo.el("a", { href: `/workflows/${encodeURIComponent(d.workflow.id)}` },
        d.workflow.name || d.workflow.id) : "—"), actions(d)))));
}

async function manage(d, verb) {
  if (verb.ask && !window.confirm(verb.ask)) return;
  const path = `/api/v1/datasets/${encodeURIComponent(d.hash)}`;
  const message = document.getElementById("manage-message");
  try {
    if (verb.change) await Pingo.api(path, { method: "PATCH", body: JSON.stringify(verb.change) });
    else if (verb.name === "invalidate") await Pingo.api(`${path}/invalidate`, { method: "POST", body: "{}" });
    else await Pingo.api(path, { method: "DELETE" });
    message.textContent = `${d.hash.slice(0, 12)}: ${verb.name} done.`;
    message.className = "muted";
  } catch (err) {
    message.textContent = `${d.hash.slice(0, 12)}: ${err.message}`;
    message.className = "error";
  }
  await draw();
}

function actions(d) {
  if (!d.canChange) return Pingo.el("td", {}, d.pinned ? "pinned" : "");
  return Pingo.el("td", { class: "manage" }, MANAGE.filter((v) => v.show(d)).map((v) => Pingo.el("button", {
    type: "button", class: v.danger ? "danger small" : "small", "data-verb": v.name, onclick: () => manage(d, v) },
  v.label)));
}

function redrawTable() {
  document.getElementById("datasets-box").replaceChildren(table());
}

async function deletions() {
  // Newest first; the algorithm that chose each is the note of its move to STORED_TO_DELETE.
  const body = await Pingo.api("/api/v1/datasets?state=DELETED&limit=10");
  const details = await Promise.all(body.datasets.map((d) => Pingo.api(d.href)));
  const rows = details.map((d) => {
    const marked = [...d.history].reverse().find((h) => h.state === "STORED_TO_DELETE");
    const gone = [...d.history].reverse().find((h) => h.state === "DELETED");
    const withdrawn = [...d.history].reverse().find((h) => h.state === "INVALIDATED");
    const chosen = marked ? marked.note || marked.by || "–"
      : withdrawn ? `${withdrawn.note || "withdrawn"} (${withdrawn.by})` : "not by a decision";
    return Pingo.el("tr", {}, Pingo.el("td", { class: "mono" }, d.hash.slice(0, 12)),
      Pingo.el("td", { class: "num" }, Pingo.bytes(d.size)),
      Pingo.el("td", {}, Pingo.when(gone && gone.at)),
      Pingo.el("td", { class: "algorithm" }, chosen));
  });
  return Pingo.el("section", { class: "card", id: "deleted" }, Pingo.el("h2", {}, "Deleted recently"),
    rows.length ? Pingo.el("table", {}, Pingo.el("thead", {}, Pingo.el("tr", {},
      ["dataset", "size", "deleted", "chosen by"].map((h) => Pingo.el("th", {}, h)))), Pingo.el("tbody", {}, rows))
      : Pingo.el("p", { class: "muted" }, "Nothing deleted yet: usage has stayed under the threshold."));
}

async function draw() {
  const to = Date.now() / 1000;
  const [body, stats] = await Promise.all([
    Pingo.api("/api/v1/datasets?limit=1000"),
    Pingo.api(`/api/v1/history/stats?${new URLSearchParams({ resolution: "30m", from: String(to - 2 * 86400), to: String(to) })}`),
  ]);
  datasets = body.datasets;
  const shown = document.getElementById("manage-message");
  const message = shown ? shown.textContent : "";
  const messageClass = shown ? shown.className : "muted";
  const main = document.getElementById("main");
  const width = Math.max(320, Math.min(1300, main.clientWidth - 40));
  main.replaceChildren(Pingo.el("h1", {}, "Storage"), gauge(body), overTime(body, stats, width),
    Pingo.el("h2", {}, `Datasets (${datasets.length}${body.next ? "+" : ""}) — click a heading to sort`),
    Pingo.el("p", { id: "manage-message", class: messageClass }, message),
    Pingo.el("div", { id: "datasets-box" }, table()), await deletions());
  return false;
}

document.addEventListener("DOMContentLoaded", () => Pingo.poll(draw));
