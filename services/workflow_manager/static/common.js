// Shared by every page: reading the API (with the user's token once users are on),
// building DOM nodes without innerHTML, formatting, polling, the nav (docs/web-ui.md).
"use strict";

const TOKEN_KEY = "pingo.token";

const Pingo = {
  token() {
    return window.localStorage.getItem(TOKEN_KEY);
  },

  async api(path, options = {}) {
    const headers = { Accept: "application/json" };
    if (options.body) headers["Content-Type"] = "application/json";
    const token = Pingo.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { ...options, headers });
    if (response.status === 401) {
      Pingo.signIn(await response.json().catch(() => ({})));
      throw Object.assign(new Error("sign in to see this"), { status: 401 });
    }
    return Pingo.read(response);
  },

  async text(path) {
    const headers = {};
    const token = Pingo.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { headers });
    if (!response.ok) await Pingo.read(response);
    return response.text();
  },

  async read(response) {
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      throw Object.assign(new Error(body.detail || `${response.status} ${response.statusText}`), {
        status: response.status,
        problem: body,
      });
    }
    return body;
  },

  // With users on, the API asks for a token: ask once, keep it for this origin.
  signIn(problem) {
    if (document.getElementById("sign-in")) return;
    const input = Pingo.el("input", { type: "password", id: "token", placeholder: "pingo_…", autocomplete: "off" });
    const form = Pingo.el(
      "form",
      { id: "sign-in", class: "card sign-in" },
      Pingo.el("h2", {}, "Sign in"),
      Pingo.el("p", { class: "muted" }, problem.detail || "This Pingo needs a token.",
        " Paste the API token an admin gave you (pingo users add)."),
      input,
      Pingo.el("button", { type: "submit" }, "Use token"),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      window.localStorage.setItem(TOKEN_KEY, input.value.trim());
      window.location.reload();
    });
    document.getElementById("main").replaceChildren(form);
  },

  signOut() {
    window.localStorage.removeItem(TOKEN_KEY);
    window.location.reload();
  },

  // el("td", {class: "x", title: "y"}, child, "text", ...): text is always a text node.
  el(tag, attrs = {}, ...children) {
    const svg = ["svg", "g", "rect", "path", "text", "title", "defs", "marker", "line", "circle", "tspan"];
    const node = svg.includes(tag)
      ? document.createElementNS("http://www.w3.org/2000/svg", tag)
      : document.createElement(tag);
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
    return `${v.toFixed(i && Math.abs(v) < 10 ? 1 : 0)} ${units[i]}`;
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

  stateClass(state) {
    return `state state-${String(state || "").toLowerCase()}`;
  },

  badge(state) {
    return Pingo.el("span", { class: Pingo.stateClass(state) }, state);
  },

  // Run ``draw`` now and every ``ms`` while it answers true (the thing is still live).
  async poll(draw, ms = 1500) {
    let again = true;
    try {
      again = await draw();
    } catch (error) {
      if (error.status === 401) return;
      Pingo.error(error);
    }
    if (again) window.setTimeout(() => Pingo.poll(draw, ms), ms);
  },

  error(error) {
    const box = document.getElementById("error") || Pingo.el("p", { id: "error", class: "error" });
    box.textContent = error.message;
    document.getElementById("main").prepend(box);
  },
};

document.addEventListener("DOMContentLoaded", () => {
  const current = document.body.dataset.page;
  const active = current === "workflow" ? "workflows" : current;
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === active) a.classList.add("active");
  }
  if (Pingo.token()) {
    document.getElementById("who").append(
      Pingo.el("button", { class: "link", type: "button", onclick: Pingo.signOut }, "sign out"),
    );
  }
});
