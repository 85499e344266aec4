// The follow-up outbox: pending and failed rows with their last error; retry and discard.

import { del, get, post } from "./api.js";
import { actionButton, actionsNotice } from "./actions.js";
import { badge, card, h, link, pageTitle, section, table } from "./dom.js";
import { absolute, clip, firstLine, num, when } from "./format.js";
import { jobLink } from "./jobview.js";
import { href } from "./router.js";
import { pager } from "./pager.js";

function actions(entry, ctx) {
  return h(
    "div",
    { class: "row-actions" },
    actionButton("Retry", {
      ctx,
      confirm: { title: `Retry outbox row #${entry.id}?`, message: "It becomes due now, with a fresh attempt budget." },
      run: () => post(`outbox/${entry.id}/retry`),
      done: () => `Outbox row #${entry.id} is due again.`,
    }),
    actionButton("Discard", {
      ctx,
      tone: "danger",
      confirm: { title: `Discard outbox row #${entry.id}?`, message: [`The ${entry.outcome} follow-ups of job #${entry.job_id} are never inserted.`, "This cannot be undone."] },
      run: () => del(`outbox/${entry.id}`),
      done: () => `Outbox row #${entry.id} discarded.`,
    }),
  );
}

function nextAttempt(entry) {
  if (entry.state === "failed") return h("span", { class: "muted" }, "—");
  if (new Date(entry.next_attempt_at).getTime() <= Date.now()) return h("span", { title: absolute(entry.next_attempt_at) }, "due now");
  return when(entry.next_attempt_at);
}

function tabs(state) {
  const tab = (label, value) =>
    h("a", { class: ["tab", (state || "") === value ? "tab-active" : null], href: href("outbox", value ? { state: value } : {}), "aria-current": (state || "") === value ? "page" : null }, label);
  return h("nav", { class: "tabs", "aria-label": "Outbox rows" }, tab("All", ""), tab("Pending", "pending"), tab("Failed", "failed"));
}

/** Render the outbox page. */
export async function render(root, ctx) {
  const state = ctx.params.get("state") || null;
  const kind = ctx.params.get("kind") || null;
  const limit = ctx.params.get("limit") || 50;
  const cursor = ctx.params.get("after_id") || null;
  const [stats, page] = await Promise.all([get("outbox/stats"), get("outbox", { state, kind, limit, after_id: cursor })]);
  const params = { state, kind, limit: ctx.params.get("limit") };
  const paging = pager({ key: `outbox:${state}:${kind}`, path: "outbox", params, cursorParam: "after_id", cursor, next: page.next_after_id === null ? null : String(page.next_after_id) });
  paging.children[0].textContent = "← Earlier";
  paging.children[2].textContent = "Later →";
  root.append(
    pageTitle("Outbox", h("span", { class: "muted" }, "follow-ups waiting for a process that holds their specs")),
    h(
      "div",
      { class: "cards" },
      card("Pending", num(stats.pending), { sub: stats.oldest_pending_at ? ["oldest ", when(stats.oldest_pending_at)] : "none waiting", href: href("outbox", { state: "pending" }) }),
      card("Failed", num(stats.failed), { tone: stats.failed ? "danger" : null, sub: "retry or discard them", href: href("outbox", { state: "failed" }) }),
    ),
    actionsNotice() || "",
    tabs(state),
    section(
      null,
      table(
        [
          { label: "Row", class: "num", cell: (e) => `#${e.id}` },
          { label: "Job", class: "num", cell: (e) => jobLink(e.job_id) },
          { label: "Kind", cell: (e) => h("code", { title: e.kind }, clip(e.kind, 32)) },
          { label: "Outcome", cell: (e) => e.outcome },
          { label: "State", cell: (e) => badge(e.state, e.state === "failed" ? "danger" : "warn") },
          { label: "Attempts", class: "num", cell: (e) => num(e.attempts) },
          { label: "Next attempt", cell: (e) => nextAttempt(e) },
          { label: "Created", cell: (e) => when(e.created_at) },
          { label: "Last error", class: "error-cell", cell: (e) => (e.last_error ? h("span", { title: clip(e.last_error, 2000) }, firstLine(e.last_error, 90)) : h("span", { class: "muted" }, "—")) },
          { label: "Actions", cell: (e) => actions(e, ctx) },
        ],
        page.items,
        { empty: state ? `No ${state} row.` : "The outbox is empty: every follow-up was inserted." },
      ),
      paging,
    ),
    h("p", { class: "muted small" }, "A row holds the follow-ups one job outcome owes, until a process that registers their specs inserts them. ", link(href("instances"), "Which processes hold which specs"), "."),
  );
}
