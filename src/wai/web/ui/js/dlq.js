// The dead-letter queue: entries with filters and cursor pages, one entry's page, retry and
// purge of one entry or of every entry the filters match (confirmed with their count).

import { collect, del, get, post } from "./api.js";
import { actionButton, actionsNotice, guardedButton } from "./actions.js";
import { badge, confirmDialog, errorBox, fields, flash, h, link, pageTitle, section, table } from "./dom.js";
import { at, clip, firstLine, num, when } from "./format.js";
import { callbackSection, dataSections, jobFields, jobLink, tagList, timeline } from "./jobview.js";
import { href, navigate } from "./router.js";
import { filterButtons, submitFilters } from "./filters.js";
import { pager } from "./pager.js";
import { canMutate } from "./session.js";

const FILTERS = ["queue", "kind", "tag", "reason"];
const REASONS = ["terminal_error", "max_attempts_exhausted", "manual"];

function filtersOf(params) {
  const found = {};
  for (const name of [...FILTERS, "limit"]) {
    const value = params.get(name);
    if (value) found[name] = value;
  }
  return found;
}

function lastError(job) {
  const errors = job.errors || [];
  return errors.length ? String(errors[errors.length - 1].error ?? "") : "";
}

function filterForm(filters) {
  const field = (name, label, control) => h("div", { class: "form-field" }, h("label", { for: `dlq-${name}` }, label), control);
  const text = (name, placeholder) => h("input", { id: `dlq-${name}`, name, value: filters[name] || "", placeholder, autocomplete: "off" });
  const reason = h(
    "select",
    { id: "dlq-reason", name: "reason" },
    h("option", { value: "" }, "any reason"),
    REASONS.map((r) => h("option", { value: r, selected: filters.reason === r }, r)),
    filters.reason && !REASONS.includes(filters.reason) ? h("option", { value: filters.reason, selected: true }, filters.reason) : null,
  );
  const form = h(
    "form",
    { class: "filters", role: "search" },
    field("queue", "Queue", text("queue", "any queue")),
    field("kind", "Kind", text("kind", "any kind")),
    field("tag", "Tag", text("tag", "any tag")),
    field("reason", "Reason", reason),
    filterButtons("dlq"),
  );
  submitFilters(form, "dlq", FILTERS, filters);
  return form;
}

/** How many entries the filters match: the per-queue depths when only a queue is given,
 *  else counted over the pages (at most 10,000). */
async function countMatching(filters) {
  const only = FILTERS.filter((f) => filters[f]);
  if (only.length === 0 || (only.length === 1 && filters.queue)) {
    const stats = await get("dlq/stats");
    return { count: filters.queue ? stats.queues[filters.queue] || 0 : stats.total, exact: true };
  }
  const params = {};
  for (const f of only) params[f] = filters[f];
  const { items, complete } = await collect("dlq", params, (d) => (d.next_before === null ? null : { before: d.next_before }));
  return { count: items.length, exact: complete };
}

function describe(filters) {
  const only = FILTERS.filter((f) => filters[f]);
  return only.length ? `matching ${only.map((f) => `${f} = ${filters[f]}`).join(", ")}` : "in the dead-letter queue";
}

function bulkButton(label, filters, ctx, { tone, path, resultKey, verb }) {
  const btn = guardedButton(label, { tone });
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    try {
      const { count, exact } = await countMatching(filters);
      if (count === 0) {
        flash("info", `No entry ${describe(filters)}.`);
        return;
      }
      const many = `${exact ? "" : "at least "}${num(count)} ${count === 1 ? "entry" : "entries"}`;
      const ok = await confirmDialog({
        title: `${verb} ${many}?`,
        message: [`Every entry ${describe(filters)}: ${many}.`, tone === "danger" ? "Purged entries are deleted for good." : "Each job goes back to run with a fresh retry budget."],
        confirmLabel: `${verb} ${num(count)}`,
        danger: tone === "danger",
      });
      if (!ok) return;
      const body = {};
      for (const f of FILTERS) if (filters[f]) body[f] = filters[f];
      if (Object.keys(body).length === 0) body.all = true;
      const result = await post(path, body);
      flash("success", `${verb === "Retry" ? "Retried" : "Purged"} ${num(result[resultKey])} ${result[resultKey] === 1 ? "entry" : "entries"}.`);
      ctx.refresh();
    } catch (error) {
      const why = error.status === 401 ? "you are signed out: sign in again" : error.message;
      flash("error", `${label} failed: ${why}`);
    } finally {
      btn.disabled = !canMutate();
    }
  });
  return btn;
}

function rowActions(entry, ctx) {
  const id = entry.job.id;
  return h(
    "div",
    { class: "row-actions" },
    actionButton("Retry", {
      ctx,
      confirm: { title: `Retry job #${id}?`, message: "It goes back to run with its id, errors and lineage, and a fresh retry budget." },
      run: () => post(`dlq/${id}/retry`),
      done: () => `Job #${id} is back in queue ${entry.job.queue}.`,
    }),
    actionButton("Purge", {
      ctx,
      tone: "danger",
      confirm: { title: `Purge entry #${id}?`, message: "The entry is deleted for good." },
      run: () => del(`dlq/${id}`),
      done: () => `Entry #${id} purged.`,
    }),
  );
}

const COLUMNS = (ctx) => [
  { label: "Job", class: "num", cell: (e) => link(href(`dlq/${e.job.id}`), `#${e.job.id}`) },
  { label: "Kind", cell: (e) => h("code", { title: e.job.kind }, clip(e.job.kind, 32)) },
  { label: "Queue", cell: (e) => h("span", { title: e.job.queue }, clip(e.job.queue, 24)) },
  { label: "Reason", cell: (e) => badge(e.reason, e.reason === "manual" ? "neutral" : "danger") },
  { label: "Dead since", cell: (e) => when(e.dlq_at) },
  { label: "Attempts", class: "num", cell: (e) => `${e.job.attempt}/${e.job.max_attempts}` },
  { label: "Tags", cell: (e) => tagList(e.job.tags) },
  { label: "Last error", class: "error-cell", cell: (e) => h("span", { title: clip(lastError(e.job), 2000) }, firstLine(lastError(e.job), 90) || "—") },
  { label: "Actions", cell: (e) => rowActions(e, ctx) },
];

async function list(root, ctx) {
  const filters = filtersOf(ctx.params);
  const cursor = ctx.params.get("before") || null;
  const page = await get("dlq", { ...filters, limit: filters.limit || 50, before: cursor });
  root.append(
    pageTitle("Dead letters", h("span", { class: "muted" }, FILTERS.some((f) => filters[f]) ? describe(filters) : "newest first")),
    actionsNotice() || "",
    filterForm(filters),
    h(
      "div",
      { class: "bulk-actions" },
      h("span", { class: "muted small" }, `Every entry ${describe(filters)}:`),
      bulkButton("Retry all", filters, ctx, { tone: null, path: "dlq/retry", resultKey: "retried", verb: "Retry" }),
      bulkButton("Purge all", filters, ctx, { tone: "danger", path: "dlq/purge", resultKey: "purged", verb: "Purge" }),
    ),
    section(
      null,
      table(COLUMNS(ctx), page.items, { empty: cursor ? "No older entries." : "No dead-lettered job matches." }),
      pager({ key: `dlq:${JSON.stringify(filters)}`, path: "dlq", params: filters, cursorParam: "before", cursor, next: page.next_before }),
    ),
  );
}

async function entry(root, ctx) {
  const id = ctx.args.id;
  if (!/^[0-9]{1,19}$/.test(id)) {
    root.append(errorBox("show this entry", new Error(`${JSON.stringify(id)} is not a job id`)));
    return;
  }
  let found;
  try {
    found = await get(`dlq/${id}`);
  } catch (error) {
    root.append(pageTitle(`Dead-letter entry #${id}`), errorBox("load this entry", error));
    if (error.status === 404) root.append(h("p", {}, "It may have been retried: ", jobLink(id), " · ", link(href("dlq"), "all dead letters")));
    return;
  }
  const job = found.job;
  const back = () => navigate("dlq", {}, { keep: true });
  root.append(
    pageTitle(
      `Dead-letter entry #${job.id}`,
      badge(found.reason, found.reason === "manual" ? "neutral" : "danger"),
      h("code", { class: "title-kind" }, job.kind),
      h(
        "div",
        { class: "page-actions" },
        actionButton("Retry", {
          ctx,
          small: false,
          confirm: { title: `Retry job #${job.id}?`, message: "It goes back to run with its id, errors and lineage, and a fresh retry budget." },
          run: () => post(`dlq/${job.id}/retry`),
          done: () => `Job #${job.id} is back in queue ${job.queue}.`,
          after: () => navigate(`jobs/${job.id}`, {}, { keep: true }),
        }),
        actionButton("Purge", {
          ctx,
          small: false,
          tone: "danger",
          confirm: { title: `Purge entry #${job.id}?`, message: "The entry and its job are deleted for good." },
          run: () => del(`dlq/${job.id}`),
          done: () => `Entry #${job.id} purged.`,
          after: back,
        }),
      ),
    ),
    actionsNotice() || "",
    section("Entry", fields([["Reason", found.reason], ["Dead-lettered", at(found.dlq_at)], ["Job", h("span", {}, `#${job.id} (its row left the jobs table)`)]])),
    section("Job", jobFields(job)),
    callbackSection(job) || "",
    timeline(job),
    dataSections(job),
  );
}

/** Render the dead-letter list (#/dlq) or one entry (#/dlq/ID). */
export function render(root, ctx) {
  return ctx.args.id === undefined ? list(root, ctx) : entry(root, ctx);
}
