// One workflow: its DAG laid out by levels (dagre), each action coloured by its state,
// reused and skipped ones drawn apart from computed ones; live while it runs; an action's
// details and logs on click; a kill button (docs/web-ui.md).
"use strict";

const ENDED = ["SUCCEEDED", "FAILED", "KILLED"];
const NODE_W = 170;
const NODE_H = 46;
const wfId = decodeURIComponent(window.location.pathname.split("/").pop());
// ?action=ID: the action shown selected when the page opens (links from other workflows).
let selected = new URLSearchParams(window.location.search).get("action");
let layoutKey = null;

function mark(a) {
  if (a.nondeterministic) return "≠ ";
  if (a.state === "REUSED") return "♻ ";
  if (a.state === "SKIPPED") return "↷ ";
  if (a.state === "FAILED" || a.state === "KILLED") return "✗ ";
  if (a.state === "FINISHED") return "✓ ";
  return "";
}

// The external inputs the actions read, by path (docs/planning.md, "External inputs"): the
// DAG's source nodes, each with the fingerprint its readers' lineage hashes were made with.
function inputsOf(actions) {
  const found = new Map();
  for (const a of actions) {
    for (const i of a.inputs || []) {
      if (!found.has(i.path)) found.set(i.path, { ...i, id: `input:${i.path}`, readers: [] });
      found.get(i.path).readers.push(a.id);
    }
  }
  return found;
}

function fingerprintText(f) {
  return Object.entries(f).map(([k, v]) => `${k} ${typeof v === "string" && v.length > 24 ? `${v.slice(0, 24)}…` : v}`)
    .join(" · ");
}

function layout(actions) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 46, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  const byLocal = new Map(actions.map((a) => [String(a.localId), a]));
  for (const a of actions) g.setNode(a.id, { width: NODE_W, height: NODE_H });
  for (const input of inputsOf(actions).values()) {
    g.setNode(input.id, { width: NODE_W, height: NODE_H });
    for (const reader of input.readers) g.setEdge(input.id, reader);
  }
  for (const a of actions) {
    for (const p of a.parents || []) {
      const parent = byLocal.get(String(p));
      if (parent) g.setEdge(parent.id, a.id);
    }
  }
  dagre.layout(g);
  return g;
}

function drawGraph(wf) {
  const g = layout(wf.actions);
  const { width, height } = g.graph();
  const byId = new Map(wf.actions.map((a) => [a.id, a]));
  const svg = Pingo.el("svg", { id: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `DAG of ${wf.name || wf.id}` });
  svg.append(Pingo.el("defs", {}, Pingo.el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, Pingo.el("path", { d: "M0,0 L10,5 L0,10 z",
    class: "arrowhead" }))));
  for (const e of g.edges()) {
    const points = g.edge(e).points;
    const d = points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
    svg.append(Pingo.el("path", { d, class: "edge", "marker-end": "url(#arrow)" }));
  }
  const inputs = inputsOf(wf.actions);
  for (const id of g.nodes()) {
    const n = g.node(id);
    const a = byId.get(id);
    const at = `translate(${(n.x - NODE_W / 2).toFixed(1)},${(n.y - NODE_H / 2).toFixed(1)})`;
    if (!a) {  // an external input: a source node, drawn as a document
      const input = inputs.get(id.slice("input:".length));
      svg.append(Pingo.el("g", { class: "node input", transform: at, "data-input": input.path },
        Pingo.el("title", {}, `input ${input.path}\n${fingerprintText(input.fingerprint)}`),
        Pingo.el("rect", { width: NODE_W, height: NODE_H, rx: 2, ry: 2 }),
        Pingo.el("text", { x: 10, y: 19, class: "name" }, `◇ ${input.path.split("/").filter(Boolean).pop() || "/"}`.slice(0, 24)),
        Pingo.el("text", { x: 10, y: 36, class: "sub" }, `${input.fingerprint.kind} · ${Pingo.bytes(input.fingerprint.size)}`)));
      continue;
    }
    const decision = a.state === "REUSED" ? "reused" : a.state === "SKIPPED" ? "skipped" : "computed";
    const node = Pingo.el("g", {
      class: `node ${Pingo.stateClass(a.state)} ${decision}${a.nondeterministic ? " nondeterministic" : ""}${
        selected === id ? " selected" : ""}`,
      transform: at,
      "data-action": id, "data-state": a.state, "data-decision": decision, tabindex: 0,
    },
    Pingo.el("title", {}, `${a.name} — ${a.state}${a.reason ? ` (${a.reason})` : ""}${
      a.miss ? `\n${a.miss.summary}` : ""}${a.nondeterministic ? "\nnon-deterministic" : ""}`),
    Pingo.el("rect", { width: NODE_W, height: NODE_H, rx: 8, ry: 8 }),
    Pingo.el("text", { x: 10, y: 19, class: "name" }, `${mark(a)}${a.name}`.slice(0, 24)),
    Pingo.el("text", { x: 10, y: 36, class: "sub" }, `${a.state.toLowerCase()}${a.seconds ? ` · ${Pingo.seconds(a.seconds)}` : ""}`));
    node.addEventListener("click", () => select(id));
    node.addEventListener("keydown", (event) => { if (event.key === "Enter") select(id); });
    svg.append(node);
  }
  return svg;
}

function legend() {
  const item = (cls, text) => Pingo.el("span", { class: `key ${cls}` }, text);
  return Pingo.el("p", { class: "legend" },
    item("state-finished", "finished"), item("state-running", "running"), item("state-ready", "ready / waiting"),
    item("state-retrying", "retrying"), item("state-failed", "failed"), item("state-killed", "killed"),
    item("state-reused reused", "♻ reused (not computed)"), item("state-skipped skipped", "↷ skipped (not needed)"),
    item("input", "◇ external input"), item("nondeterministic", "≠ non-deterministic"));
}

function field(label, value, cls) {
  return [Pingo.el("dt", {}, label), Pingo.el("dd", { class: cls || "" }, value ?? "–")];
}

// What planning decided, in words (the planner's reasons: docs/planning.md).
const OUTCOME = {
  stored: "reused: its output was already stored",
  in_flight: "followed: the same computation was already running; its output is that one's",
  feeds_only_reused: "skipped: its output was not needed",
  not_stored: "computed: no stored output had its lineage",
  forced: "computed: forceComputation asks for it",
  unmanaged: "computed: an unmanaged output (isManaged: false) is never reused",
};

function outcome(a) {
  const words = OUTCOME[a.reason] || `${a.decision}${a.reason ? ` (${a.reason})` : ""}`;
  return Pingo.el("span", { title: `planner: ${a.decision} (${a.reason || "–"})` }, words);
}

// The workflow page of an action: /workflows/{workflow}?action={id} opens with it selected.
function actionHref(workflowId, actionId) {
  return `/workflows/${encodeURIComponent(workflowId)}?action=${encodeURIComponent(actionId)}`;
}

// The computation whose stored output a REUSED action took: the newest that began before it
// (the dataset may have been computed again since). Another user's computation is not shown
// by the API (docs/users.md): then only that it was another user's.
async function reusedFrom(a) {
  let d;
  try {
    d = await Pingo.api(`/api/v1/datasets/${encodeURIComponent(a.hash)}`);
  } catch (error) {
    return Pingo.el("p", { id: "reused-from", class: "muted" }, `Its stored dataset: ${error.message}`);
  }
  const dataset = Pingo.el("span", { class: "mono", title: a.hash }, a.hash.slice(0, 12));
  const earlier = (d.computations || []).filter((c) => c.id !== a.id && (c.createdAt || 0) <= (a.createdAt || Infinity));
  const made = earlier.find((c) => c.state === "FINISHED") || d.producer;
  if (made && made.workflow) {
    return Pingo.el("p", { id: "reused-from" }, "Its output was taken from the stored dataset ", dataset,
      ", computed by ", Pingo.el("a", { href: actionHref(made.workflow.id, made.id) },
        `${made.name} in ${made.workflow.name || made.workflow.id}`), " (",
      Pingo.el("span", { class: "mono" }, made.workflow.id), ").");
  }
  return Pingo.el("p", { id: "reused-from" }, "Its output was taken from the stored dataset ", dataset,
    d.othersActions ? ", computed by another user's workflow (not shown to you)." : ".");
}

// Why a computed action was computed: what changed since the same action (same name and
// id, an earlier workflow of the same name) was computed, field by field (docs/planning.md,
// "Why an action is computed"). A parent is a link to it in this workflow. One planned to
// compute that was cut off early at its start says so: its key is new, its output is not.
function whyComputed(a, actions) {
  const m = a.miss;
  if (!m) return null;
  const cut = a.state === "REUSED" && (a.reason || "").startsWith("early cutoff");
  const byLocal = new Map(actions.map((x) => [String(x.localId), x]));
  const what = (c) => {
    if (!c.parent) return Pingo.el("span", { class: "mono" }, c.field);
    const p = byLocal.get(String(c.parent));
    return ["parent ", p ? Pingo.el("a", { href: actionHref(wfId, p.id), "data-select": p.id }, p.name) : c.parent];
  };
  const value = (v, parent) => (v === null ? "–" : Pingo.el("span", { class: "mono", title: v },
    parent ? v.slice(0, 12) : v));
  const rows = m.changes.map((c) => Pingo.el("tr", { "data-field": c.parent ? `parent ${c.parent}` : c.field },
    Pingo.el("td", {}, what(c)), Pingo.el("td", {}, value(c.old, c.parent)), Pingo.el("td", {}, value(c.new, c.parent))));
  const state = { STORED: "stored", LEAF: "stored", STORED_TO_DELETE: "about to be deleted" }[m.against?.state]
    || (m.against?.state || "gone").toLowerCase();
  const against = m.against ? [" Compared with ", Pingo.el("a", { href: actionHref(m.against.workflow, m.against.action) },
    m.against.workflow), `, whose output is ${state} now.`] : [];
  const said = m.changes.length ? `${m.changes.length} change(s) since it was last computed.` : `${m.summary}.`;
  return Pingo.el("section", { id: "why-computed" }, Pingo.el("h3", {}, cut ? "Cut off early" : "Why computed"),
    cut ? Pingo.el("p", { id: "cut-off" },
      `Not computed: ${a.reason}, so it reuses that workflow's output. Why its key is new:`) : null,
    Pingo.el("p", {}, said[0].toUpperCase() + said.slice(1), ...against),
    rows.length ? Pingo.el("table", { class: "changes" }, Pingo.el("thead", {}, Pingo.el("tr", {},
      ["what changed", "then", "now"].map((h) => Pingo.el("th", {}, h)))), Pingo.el("tbody", {}, rows)) : null);
}

// A recomputation whose output differs from the one its lineage's last computation made.
function nondeterministic(a) {
  const n = a.nondeterministic;
  if (!n) return null;
  return Pingo.el("p", { id: "nondeterministic", class: "warning" }, "≠ Non-deterministic: this computation of its ",
    "lineage made other bytes than the last one (checksum ", Pingo.el("span", { class: "mono", title: n.previousChecksum },
      n.previousChecksum.slice(0, 12)), " then, ", Pingo.el("span", { class: "mono", title: n.checksum },
      n.checksum.slice(0, 12)), " now). What reuses it may not get what an earlier run got.");
}

// The actions below ``a`` that reused a stored output: why ``a`` was not needed.
function reusingDescendants(a, actions) {
  const children = new Map();
  for (const x of actions) {
    for (const p of x.parents || []) children.set(String(p), [...(children.get(String(p)) || []), x]);
  }
  const found = new Map();
  const queue = [...(children.get(String(a.localId)) || [])];
  while (queue.length) {
    const x = queue.shift();
    if (found.has(x.id)) continue;
    found.set(x.id, x);
    queue.push(...(children.get(String(x.localId)) || []));
  }
  return [...found.values()].filter((x) => x.state === "REUSED" || x.state === "FOLLOWING");
}

function skippedBecause(a, actions) {
  const by = reusingDescendants(a, actions);
  const names = by.map((x, i) => [i ? ", " : "", Pingo.el("a", { href: actionHref(wfId, x.id), "data-select": x.id },
    x.name)]);
  return Pingo.el("p", { id: "skipped-because" }, "Skipped: not computed because ",
    by.length ? ["what reads its output took a stored dataset instead (", ...names.flat(), ")"]
      : "nothing that reads its output was computed", ", so its own output was not needed.");
}

async function logPane(a, stream) {
  const pre = Pingo.el("pre", { class: "log", id: `log-${stream}` }, "loading…");
  try {
    const text = await Pingo.text(`/api/v1/actions/${encodeURIComponent(a.id)}/logs?stream=${stream}&tail=200`);
    pre.textContent = text || "(empty)";
  } catch (error) {
    pre.textContent = error.message;
    pre.classList.add("muted");
  }
  return pre;
}

// An attempt's time on one line: the clock time, the full date on hover.
function clock(t) {
  return t ? Pingo.el("span", { title: Pingo.when(t) }, new Date(t * 1000).toLocaleTimeString()) : "–";
}

async function details(a) {
  // A job id is long (workflow, action, attempt, token): one line, cut with … (CSS), the
  // whole of it on hover and in the text copied.
  // Its error on a row of its own, the width of the table, under the attempt.
  const attempts = (a.attemptLog || []).flatMap((r) => [Pingo.el("tr", { class: r.error ? "with-error" : "" },
    Pingo.el("td", {}, r.attempt), Pingo.el("td", { class: "mono job", title: r.jobId || "" }, r.jobId || "–"),
    Pingo.el("td", {}, r.outcome), Pingo.el("td", {}, clock(r.startedAt || r.submittedAt)),
    Pingo.el("td", {}, clock(r.endedAt))),
  r.error ? Pingo.el("tr", { class: "attempt-error" }, Pingo.el("td", { colspan: 5, class: "error" }, r.error)) : null]);
  const notRun = a.state === "REUSED" || a.state === "SKIPPED";
  const panel = Pingo.el("aside", { id: "details", class: "card" },
    Pingo.el("h2", {}, a.name, " ", Pingo.badge(a.state)),
    a.state === "REUSED" ? await reusedFrom(a) : null,
    a.state === "SKIPPED" ? skippedBecause(a, current.actions) : null,
    nondeterministic(a),
    Pingo.el("dl", {},
      field("action", a.id, "mono"), field("planned", outcome(a)),
      field("submitted", Pingo.when(a.submittedAt)), field("started", Pingo.when(a.startedAt)),
      field("finished", Pingo.when(a.finishedAt)), field("took", a.seconds ? Pingo.seconds(a.seconds)
        : a.state === "RUNNING" && a.startedAt ? `${Pingo.seconds(Date.now() / 1000 - a.startedAt)} so far` : "–"),
      field("attempts", a.attempts || "–"), field("job", a.jobId, "mono"),
      field("output", a.outputPath, "mono"), field("lineage hash", a.hash, "mono hash"),
      (a.inputs || []).flatMap((i) => field("input", `${i.path} · ${fingerprintText(i.fingerprint)}`, "mono")),
      (a.inputChanged || []).flatMap((c) => field("input changed", `${c.path} changed while it ran: ${c.changes.join(", ")}; `
        + "its output is not reused", "error")),
      a.error ? field("error", a.error, "error") : []),
    attempts.length ? Pingo.el("table", { class: "attempts" }, Pingo.el("thead", {}, Pingo.el("tr", {},
      ["#", "job", "outcome", "started", "ended"].map((h) => Pingo.el("th", {}, h)))),
      Pingo.el("tbody", {}, attempts)) : null,
    a.decision === "compute" ? whyComputed(a, current.actions) : null);
  const ran = a.attempts || (a.attemptLog || []).length;
  if (ran) {
    panel.append(Pingo.el("h3", {}, "stdout (last 200 lines)"), await logPane(a, "stdout"),
      Pingo.el("h3", {}, "stderr (last 200 lines)"), await logPane(a, "stderr"));
  } else {
    panel.append(Pingo.el("p", { class: "muted" }, notRun ? "Not run, so there is no log." : "Not run yet."));
  }
  return panel;
}

let current = null;

async function select(id) {
  const a = current.actions.find((x) => x.id === id);
  if (!a) return;
  selected = id;
  for (const n of document.querySelectorAll(".node")) n.classList.toggle("selected", n.dataset.action === id);
  document.getElementById("side").replaceChildren(await details(a));
  const shown = new URL(window.location.href);
  shown.searchParams.set("action", id);
  window.history.replaceState(null, "", shown);
  // Links to an action of this workflow select it in place.
  for (const link of document.querySelectorAll("#details a[data-select]")) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      select(link.dataset.select);
    });
  }
}

async function kill() {
  if (!window.confirm(`Kill workflow ${current.name || current.id}? Running actions are stopped.`)) return;
  try {
    await Pingo.api(`/api/v1/workflows/${encodeURIComponent(wfId)}/kill`, { method: "POST", body: "{}" });
  } catch (error) {
    Pingo.error(error);
  }
  Pingo.poll(drawOrNotFound);
}

function header(wf) {
  const ended = ENDED.includes(wf.state);
  const took = wf.finishedAt && wf.createdAt ? Pingo.seconds(wf.finishedAt - wf.createdAt) : "running";
  return Pingo.el("div", { class: "head" },
    Pingo.el("h1", {}, wf.name || wf.id, " ", Pingo.badge(wf.state)),
    Pingo.el("p", { class: "muted" }, `${wf.id} · owner ${wf.owner || "—"} · submitted ${Pingo.when(wf.createdAt)} · ${took}`,
      wf.killedBy ? ` · killed by ${wf.killedBy}` : "", wf.error ? ` · ${wf.error}` : ""),
    Pingo.el("button", { id: "kill", class: "danger", type: "button", disabled: ended || wf.killRequested,
      onclick: kill }, wf.killRequested && !ended ? "Kill requested…" : "Kill"));
}

async function draw() {
  const wf = await Pingo.api(`/api/v1/workflows/${encodeURIComponent(wfId)}`);
  current = wf;
  document.title = `${wf.name || wf.id} · Pingo`;
  const main = document.getElementById("main");
  let graph = document.getElementById("graph");
  if (!graph) {
    graph = Pingo.el("div", { id: "graph", class: "card" });
    main.replaceChildren(Pingo.el("div", { id: "head" }), legend(),
      Pingo.el("div", { class: "split" }, graph, Pingo.el("div", { id: "side" },
        Pingo.el("p", { class: "muted" }, "Click an action for its times, attempts, output and logs."))));
  }
  document.getElementById("head").replaceChildren(header(wf));
  const key = wf.actions.map((a) => `${a.id}:${a.state}`).join("|");
  if (key !== layoutKey) {
    layoutKey = key;
    graph.replaceChildren(drawGraph(wf));
    if (selected) await select(selected);
  }
  return !ENDED.includes(wf.state);
}

// Another user's workflow is answered as one that does not exist (404): say so plainly,
// with the way back, rather than a bare error over "Loading…".
function notFound() {
  document.title = "Workflow not found · Pingo";
  document.getElementById("main").replaceChildren(Pingo.el("div", { id: "not-found", class: "card" },
    Pingo.el("h1", {}, "Workflow not found"),
    Pingo.el("p", {}, `There is no workflow ${wfId}, or it belongs to another user.`),
    Pingo.el("p", {}, Pingo.el("a", { href: "/" }, "← all your workflows"))));
  return false;
}

async function drawOrNotFound() {
  try {
    return await draw();
  } catch (error) {
    if (error.status === 404) return notFound();
    throw error;
  }
}

document.addEventListener("DOMContentLoaded", () => Pingo.poll(drawOrNotFound, 1000));
