// The workflows page: newest first, with what each computed, reused and lost; live.
"use strict";

const STATES = ["", "PLANNING", "RUNNING", "SUCCEEDED", "FAILED", "KILLED"];

function filters() {
  const params = new URLSearchParams(window.location.search);
  return { state: params.get("state") || "", name: params.get("name") || "" };
}

function filterBar(current) {
  const state = Pingo.el("select", { name: "state", id: "filter-state" },
    STATES.map((s) => Pingo.el("option", { value: s, selected: s === current.state }, s || "any state")));
  const name = Pingo.el("input", { name: "name", id: "filter-name", placeholder: "workflow name", value: current.name });
  return Pingo.el("form", { class: "filters", method: "get", action: "/" },
    state, name, Pingo.el("button", { type: "submit" }, "Filter"));
}

function counts(wf) {
  // Ended: how its actions ended. Running: what planning decided, and how many are open.
  if (wf.outcome) {
    const o = wf.outcome;
    return [
      Pingo.el("span", { class: "count computed", title: "computed" }, `● ${o.finished || 0}`),
      Pingo.el("span", { class: "count reused", title: "reused" }, `♻ ${o.reused || 0}`),
      Pingo.el("span", { class: "count skipped", title: "skipped" }, `↷ ${o.skipped || 0}`),
      Pingo.el("span", { class: "count failed", title: "failed or killed" }, `✗ ${(o.failed || 0) + (o.killed || 0)}`),
    ];
  }
  const c = wf.counts || {};
  return [
    Pingo.el("span", { class: "count computed", title: "to compute" }, `● ${c.compute || 0}`),
    Pingo.el("span", { class: "count reused", title: "reused or skipped" }, `♻ ${c.reuse || 0}`),
    wf.openActions !== null && wf.openActions !== undefined
      ? Pingo.el("span", { class: "count open", title: "not ended yet" }, `${wf.openActions} open`) : null,
  ];
}

function row(wf) {
  const took = wf.finishedAt && wf.createdAt ? wf.finishedAt - wf.createdAt : null;
  return Pingo.el("tr", { "data-id": wf.id },
    Pingo.el("td", {}, Pingo.el("a", { href: `/workflows/${encodeURIComponent(wf.id)}` }, wf.name || wf.id)),
    Pingo.el("td", { class: "mono muted" }, wf.id),
    Pingo.el("td", {}, Pingo.badge(wf.state)),
    Pingo.el("td", {}, wf.owner || "—"),
    Pingo.el("td", {}, Pingo.el("span", { class: "counts" }, counts(wf))),
    Pingo.el("td", {}, Pingo.when(wf.createdAt)),
    Pingo.el("td", { class: "num" }, took === null ? "–" : Pingo.seconds(took)),
  );
}

async function draw() {
  const current = filters();
  const query = new URLSearchParams({ limit: "100" });
  if (current.state) query.set("state", current.state);
  if (current.name) query.set("name", current.name);
  const body = await Pingo.api(`/api/v1/workflows?${query}`);
  const table = Pingo.el("table", { id: "workflows" },
    Pingo.el("thead", {}, Pingo.el("tr", {},
      ["name", "id", "state", "owner", "actions", "submitted", "took"].map((h) => Pingo.el("th", {}, h)))),
    Pingo.el("tbody", {}, body.workflows.map(row)));
  const empty = body.workflows.length ? null : Pingo.el("p", { class: "muted" }, "No workflows yet: pingo submit FILE.");
  let list = document.getElementById("list");
  if (!list) {
    // Built once, so that polling never resets what someone is typing into the filters.
    list = Pingo.el("div", { id: "list" });
    document.getElementById("main").replaceChildren(
      Pingo.el("h1", {}, "Workflows"), filterBar(current), list,
      Pingo.el("p", { class: "muted legend" }, "● computed  ♻ reused  ↷ skipped  ✗ failed or killed · updates live"));
  }
  list.replaceChildren(table, empty || "");
  return true; // keep polling: new workflows arrive
}

document.addEventListener("DOMContentLoaded", () => Pingo.poll(draw, 2000));
