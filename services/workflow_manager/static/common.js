// Shared by every page: reading the API, building DOM nodes without innerHTML, the nav.
"use strict";

const Pingo = {
  async api(path, options = {}) {
    const response = await fetch(path, {
      ...options,
      headers: { Accept: "application/json", ...(options.body ? { "Content-Type": "application/json" } : {}) },
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = new Error(body.detail || `${response.status} ${response.statusText}`);
      error.status = response.status;
      error.problem = body;
      throw error;
    }
    return body;
  },

  // el("td", {class: "x", title: "y"}, child, "text", ...): text is always a text node.
  el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  },

  bytes(n) {
    if (n === undefined || n === null) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    let v = Number(n);
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${v.toFixed(i && v < 10 ? 1 : 0)} ${units[i]}`;
  },

  seconds(s) {
    if (s === undefined || s === null) return "–";
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 120) return `${s.toFixed(1)} s`;
    if (s < 7200) return `${(s / 60).toFixed(1)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  },

  when(t) {
    if (!t) return "–";
    return new Date(t * 1000).toLocaleString();
  },
};

document.addEventListener("DOMContentLoaded", () => {
  const current = document.body.dataset.page;
  const active = current === "workflow" ? "workflows" : current;
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === active) a.classList.add("active");
  }
});
