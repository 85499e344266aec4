// Callbacks: the jobs parked until an outside system answers, soonest timeout first (cursor
// pages, filters in the hash), and the recent callback timeouts maintenance recorded.

import { get } from "./api.js";
import { badge, h, link, pageTitle, section, table } from "./dom.js";
import { clip, num, when } from "./format.js";
import { jobLink, stateBadge } from "./jobview.js";
import { href } from "./router.js";
import { filterButtons, submitFilters } from "./filters.js";
import { pager } from "./pager.js";

const FILTERS = ["queue", "kind"];
const PAGE_SIZE = 50;

function filtersOf(params) {
  const found = {};
  for (const name of [...FILTERS, "limit"]) {
    const value = params.get(name);
    if (value) found[name] = value;
  }
  return found;
}

function filterForm(filters) {
  const field = (name, label, placeholder) =>
    h(
      "div",
      { class: "form-field" },
      h("label", { for: `callbacks-${name}` }, label),
      h("input", { id: `callbacks-${name}`, name, value: filters[name] || "", placeholder, autocomplete: "off" }),
    );
  const form = h(
    "form",
    { class: "filters", role: "search" },
    field("queue", "Queue", "any queue"),
    field("kind", "Kind", "any kind"),
    filterButtons("callbacks"),
  );
  submitFilters(form, "callbacks", FILTERS, filters);
  return form;
}

function timesOut(w) {
  return h("span", { class: "times-out" }, when(w.timeout_at), w.overdue ? [" ", badge("overdue", "danger")] : null);
}

const WAITING = [
  { label: "Job", class: "num", cell: (w) => jobLink(w.job.id) },
  { label: "Kind", cell: (w) => h("code", { title: w.job.kind }, clip(w.job.kind, 32)) },
  { label: "Queue", cell: (w) => h("span", { title: w.job.queue }, clip(w.job.queue, 24)) },
  { label: "Times out", cell: timesOut },
  { label: "Attempt began", cell: (w) => when(w.job.attempted_at) },
  { label: "Waits", cell: (w) => (w.in_place ? h("span", { title: "a handler waits in place (job.wait_for_callback), heartbeating" }, "in place") : h("span", { title: "the attempt returned WaitForCallback" }, "parked")) },
  { label: "Attempt", class: "num", cell: (w) => `${w.job.attempt}/${w.job.max_attempts}` },
  { label: "Callback id", cell: (w) => (w.callback_id ? h("code", { class: "callback-id", title: w.callback_id }, w.callback_id) : h("span", { class: "muted" }, "—")) },
];

function outcome(t) {
  if (t.dead_lettered) return badge("dead-lettered", "danger");
  return stateBadge(t.job.state);
}

function jobOf(t) {
  return t.dead_lettered ? link(href(`dlq/${t.job.id}`), `#${t.job.id}`) : jobLink(t.job.id);
}

const TIMEOUTS = [
  { label: "Job", class: "num", cell: jobOf },
  { label: "Kind", cell: (t) => h("code", { title: t.job.kind }, clip(t.job.kind, 32)) },
  { label: "Queue", cell: (t) => h("span", { title: t.job.queue }, clip(t.job.queue, 24)) },
  { label: "Timed out", cell: (t) => when(t.timed_out_at) },
  { label: "Now", cell: outcome },
  { label: "Next attempt", cell: (t) => (!t.dead_lettered && t.job.state === "retryable" ? when(t.job.run_at) : h("span", { class: "muted" }, "—")) },
  { label: "Attempts", class: "num", cell: (t) => `${t.job.attempt}/${t.job.max_attempts}` },
];

/** Render the callbacks page. */
export async function render(root, ctx) {
  const filters = filtersOf(ctx.params);
  const cursor = ctx.params.get("after") || null;
  const limit = filters.limit || PAGE_SIZE;
  const [page, timeouts] = await Promise.all([
    get("callbacks", { queue: filters.queue, kind: filters.kind, limit, after: cursor }),
    get("callbacks/timeouts", { queue: filters.queue, kind: filters.kind, limit: 20 }),
  ]);
  const overdue = page.items.filter((w) => w.overdue).length;
  const paging = pager({ key: `callbacks:${JSON.stringify(filters)}`, path: "callbacks", params: filters, cursorParam: "after", cursor, next: page.next_after });
  paging.children[0].textContent = "← Sooner";
  paging.children[2].textContent = "Later →";
  const only = FILTERS.filter((f) => filters[f]).map((f) => `${f} = ${filters[f]}`);
  root.append(
    pageTitle("Callbacks", h("span", { class: "muted" }, only.length ? `filtered by ${only.join(", ")}` : "jobs waiting for an outside system, soonest timeout first")),
    filterForm(filters),
    section(
      "Waiting",
      overdue ? h("p", { class: "muted small" }, `${num(overdue)} on this page overdue: maintenance closes their attempts on its next rescue pass.`) : null,
      table(WAITING, page.items, { empty: cursor ? "No job times out later." : "No job waits for a callback.", rowClass: (w) => (w.overdue ? "row-flagged" : null) }),
      paging,
    ),
    section(
      "Recent timeouts",
      h("p", { class: "muted small" }, "Jobs whose last attempt ended because its callback timed out, newest first, until they run again: retryable, failed, or dead-lettered."),
      table(TIMEOUTS, timeouts.items, { empty: "No recent callback timeout." }),
    ),
  );
}
