// A hash router: "#/jobs?state=failed", "#/jobs/123". Deep links work without a server route
// per page, and every page's state lives in the hash, so the back button and reloads keep it.

import { clearFlash, errorBox, h } from "./dom.js";

const routes = [];
let main = null;
let active = null; // the context of the page on screen
let lastPath = null;
let keepFlash = false; // the next page change keeps the flash message (an action's result)

/** Register a page: pattern "jobs/:id", its nav name, and render(root, ctx). */
export function route(pattern, page, render, label) {
  routes.push({ parts: pattern ? pattern.split("/") : [], page, render, label });
}

/** The hash of a page: href("jobs", {state: "failed"}) is "#/jobs?state=failed". */
export function href(path, params = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(name, String(value));
  }
  const encoded = String(path)
    .split("/")
    .filter((p) => p !== "")
    .map((p) => encodeURIComponent(p))
    .join("/");
  const q = query.toString();
  return `#/${encoded}${q ? `?${q}` : ""}`;
}

/** Go to a page; keep: the flash message stays (it tells what just happened). */
export function navigate(path, params = {}, { keep = false } = {}) {
  const target = href(path, params);
  keepFlash = keep;
  if (location.hash === target) refresh();
  else location.hash = target;
}

function parse() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?", 2);
  let segments;
  try {
    segments = path.split("/").filter((p) => p !== "").map((p) => decodeURIComponent(p));
  } catch {
    segments = ["?"];
  }
  return { path, segments, params: new URLSearchParams(query) };
}

function match(segments) {
  for (const r of routes) {
    if (r.parts.length !== segments.length) continue;
    const args = {};
    let ok = true;
    r.parts.forEach((part, i) => {
      if (part.startsWith(":")) args[part.slice(1)] = segments[i];
      else if (part !== segments[i]) ok = false;
    });
    if (ok) return { r, args };
  }
  return null;
}

// A count of drawn pages on <body data-renders>: what a test waits for after a navigation.
function drawn() {
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
}

function stop(ctx) {
  if (!ctx) return;
  ctx.dead = true;
  ctx.timers.forEach((t) => clearInterval(t));
  ctx.cleanups.forEach((fn) => fn());
}

function markNav(page) {
  document.querySelectorAll(".nav a").forEach((a) => {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  });
}

/** Draw the page of the current hash again (after an action, or a sign-in). */
export function refresh({ quiet = true } = {}) {
  const { path, segments, params } = parse();
  if (path !== lastPath && !keepFlash) clearFlash();
  keepFlash = false;
  lastPath = path;
  stop(active);
  const found = match(segments);
  const root = h("div", { class: "page" });
  const ctx = {
    params,
    args: found ? found.args : {},
    dead: false,
    timers: [],
    cleanups: [],
    shown: [],
    root,
    alive() {
      return !this.dead;
    },
    every(ms, fn) {
      this.timers.push(setInterval(fn, ms));
    },
    onLeave(fn) {
      this.cleanups.push(fn);
    },
    onShown(fn) {
      this.shown.push(fn);
    },
    refresh,
  };
  active = ctx;
  if (!quiet || !main.firstChild) main.replaceChildren(root);
  if (!found) {
    markNav(null);
    document.title = "Not found · wai";
    root.append(errorBox("find this page", new Error(`there is no page at #/${path}`)));
    main.replaceChildren(root);
    drawn();
    return;
  }
  markNav(found.r.page);
  document.title = `${found.r.label} · wai`;
  root.dataset.page = found.r.page;
  root.append(h("p", { class: "muted loading" }, "Loading…"));
  // The old page stays on screen until the new one is drawn: a refresh does not flicker.
  Promise.resolve()
    .then(() => found.r.render(root, ctx))
    .then(() => {
      if (ctx.alive()) {
        root.querySelector(":scope > .loading")?.remove();
        main.replaceChildren(root);
        ctx.shown.forEach((fn) => fn());
        drawn();
      }
    })
    .catch((error) => {
      if (!ctx.alive()) return;
      root.replaceChildren(errorBox(`show this page`, error, () => refresh()));
      main.replaceChildren(root);
      drawn();
    });
}

/** Start routing into the element main. */
export function start(element) {
  main = element;
  window.addEventListener("hashchange", () => refresh({ quiet: false }));
  refresh({ quiet: false });
}
