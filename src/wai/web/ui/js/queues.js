// Queues: counts by state, pause, lag and flow control; pause, resume and drain, each confirmed.

import { get, post, segment } from "./api.js";
import { actionButton, actionsNotice } from "./actions.js";
import { badge, h, link, pageTitle, section, table } from "./dom.js";
import { duration, num, when } from "./format.js";
import { STATES, stateLabel } from "./jobview.js";
import { href } from "./router.js";

function actions(queue, ctx) {
  const name = queue.name;
  const toggle = queue.paused
    ? actionButton("Resume", {
        ctx,
        confirm: { title: `Resume queue ${name}?`, message: "Workers will claim its jobs again." },
        run: () => post(`queues/${segment(name)}/resume`),
        done: () => `Queue ${name} resumed.`,
      })
    : actionButton("Pause", {
        ctx,
        confirm: { title: `Pause queue ${name}?`, message: "Workers stop claiming its jobs; inserts still succeed. Running attempts finish." },
        run: () => post(`queues/${segment(name)}/pause`),
        done: () => `Queue ${name} paused.`,
      });
  const waiting = ["available", "scheduled", "retryable", "waiting_external"].reduce((sum, s) => sum + (queue.counts[s] || 0), 0);
  const drain = actionButton("Drain", {
    ctx,
    tone: "danger",
    confirm: {
      title: `Drain queue ${name}?`,
      message: [`Every job of ${name} that waits to run (about ${num(waiting)} now) is cancelled. Running attempts finish.`, "This cannot be undone."],
      confirmLabel: "Drain",
    },
    run: () => post(`queues/${segment(name)}/drain`),
    done: (result) => `Queue ${name} drained: ${num(result.cancelled)} ${result.cancelled === 1 ? "job" : "jobs"} cancelled.`,
  });
  return h("div", { class: "row-actions" }, toggle, drain);
}

// Counts of finished jobs are estimates on a large table (the API lists them in `estimated`).
function count(queue, state) {
  const n = queue.counts[state];
  const approx = queue.estimated.includes(state);
  const text = `${approx ? "≈ " : ""}${num(n)}`;
  if (!n) return h("span", { class: "muted" }, text);
  const cell = link(href("jobs", { queue: queue.name, state }), text);
  if (approx) cell.title = "an estimate from the table's statistics";
  return cell;
}

// "50 / s", "3 / 60 s": a rate limit's jobs per period.
function rate(limit) {
  return `${num(limit.limit)} / ${limit.per === 1 ? "" : `${limit.per} `}s`;
}

// Flow control, one line per part the queue has: its rate limit with the tokens its bucket
// holds now, the attempts running against its global concurrency, its ordering keys at work,
// and a line per kind with a rate limit of its own.
function flow(q) {
  const parts = [];
  if (q.rate_limit) {
    const tokens = q.rate_tokens === null ? "—" : q.rate_tokens.toFixed(1);
    parts.push(h("div", { dataset: { flow: "rate" } }, `rate ${rate(q.rate_limit)}`, h("span", { class: "muted" }, ` · ${tokens} of ${num(q.rate_limit.burst)} tokens`)));
  }
  if (q.global_concurrency !== null) {
    parts.push(h("div", { dataset: { flow: "concurrency" } }, `${num(q.counts.running || 0)} of ${num(q.global_concurrency)} running`));
  }
  if (q.keys_running || q.waiting_turn) {
    const keys = `${num(q.keys_running)} ${q.keys_running === 1 ? "key" : "keys"} running`;
    parts.push(h("div", { dataset: { flow: "keys" } }, keys, h("span", { class: "muted" }, ` · ${num(q.waiting_turn)} waiting their turn`)));
  }
  // The rate limits of its kinds, by name, each with the tokens its own bucket holds now.
  for (const kind of Object.keys(q.kind_rate_limits).sort()) {
    const limit = q.kind_rate_limits[kind];
    const tokens = kind in q.kind_tokens ? q.kind_tokens[kind].toFixed(1) : "—";
    parts.push(h("div", { dataset: { flow: "kind", kind } }, `${kind} ${rate(limit)}`, h("span", { class: "muted" }, ` · ${tokens} of ${num(limit.burst)} tokens`)));
  }
  return parts.length ? h("div", { class: "flow small" }, parts) : h("span", { class: "muted" }, "—");
}

/** Render the queues page. */
export async function render(root, ctx) {
  const { items } = await get("queues");
  root.append(
    pageTitle("Queues", h("span", { class: "muted" }, `${items.length} ${items.length === 1 ? "queue" : "queues"}`)),
    actionsNotice() || "",
    section(
      null,
      table(
        [
          { label: "Queue", cell: (q) => link(href("jobs", { queue: q.name }), q.name) },
          { label: "Status", cell: (q) => (q.paused ? [badge("paused", "warn"), " ", h("span", { class: "muted small" }, when(q.paused_at))] : badge("active", "ok")) },
          ...STATES.map((s) => ({
            label: stateLabel(s),
            class: "num",
            cell: (q) => count(q, s),
          })),
          { label: "Total", class: "num", cell: (q) => h("strong", {}, `${q.estimated.length ? "≈ " : ""}${num(q.total)}`) },
          { label: "Lag", class: "num", cell: (q) => (q.oldest_available_lag ? duration(q.oldest_available_lag) : "—") },
          { label: "Flow control", cell: flow },
          { label: "Actions", cell: (q) => actions(q, ctx) },
        ],
        items,
        { empty: "No queue has jobs or was paused yet." },
      ),
      items.some((q) => q.estimated.length)
        ? h("p", { class: "muted small" }, "≈: counts of finished jobs are estimated from PostgreSQL's statistics of the jobs table, so that this page stays fast over millions of them; counts of unfinished jobs are exact.")
        : "",
    ),
  );
}
