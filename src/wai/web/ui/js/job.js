// One job: its fields and data, the timeline of its attempts, cancel and retry, and its
// lineage as a tree: the ancestors above, the job, its follow-ups below, owed outbox rows.

import { get, post } from "./api.js";
import { actionButton, actionsNotice } from "./actions.js";
import { badge, errorBox, h, link, notice, pageTitle, section } from "./dom.js";
import { clip, firstLine, num } from "./format.js";
import { TERMINAL, callbackSection, dataSections, jobFields, stateBadge, timeline } from "./jobview.js";
import { href } from "./router.js";

const RETRYABLE = new Set(["failed", "cancelled", "waiting_external"]);

function actions(job, ctx) {
  const cancellable = !TERMINAL.has(job.state);
  return h(
    "div",
    { class: "page-actions" },
    actionButton("Cancel", {
      ctx,
      tone: "danger",
      small: false,
      applicable: cancellable,
      notApplicable: `A ${job.state} job cannot be cancelled.`,
      confirm: {
        title: `Cancel job #${job.id}?`,
        message: job.state === "running" ? "Its worker is told to stop; whatever it writes after is fenced off." : "It will not run.",
        confirmLabel: "Cancel job",
      },
      run: () => post(`jobs/${job.id}/cancel`),
      done: () => `Job #${job.id} cancelled.`,
    }),
    actionButton("Retry", {
      ctx,
      small: false,
      applicable: RETRYABLE.has(job.state),
      notApplicable: "Only a failed, cancelled or waiting job can be retried.",
      confirm: { title: `Retry job #${job.id}?`, message: "It becomes available to run again now.", confirmLabel: "Retry job" },
      run: () => post(`jobs/${job.id}/retry`),
      done: () => `Job #${job.id} is available to run again.`,
    }),
  );
}

// -- lineage ---------------------------------------------------------------------------------

function origin(job) {
  return job.trigger ? h("span", { class: "lineage-origin" }, `${job.trigger.outcome} → ${job.trigger.spec}`) : null;
}

function owedRows(entries) {
  if (!entries.length) return null;
  return h(
    "ul",
    { class: "owed" },
    entries.map((entry) =>
      h(
        "li",
        { class: ["owed-row", entry.state === "failed" ? "owed-failed" : null] },
        badge(entry.state === "failed" ? "owed: failed" : "owed: pending", entry.state === "failed" ? "danger" : "warn"),
        ` the follow-ups of its ${entry.outcome} outcome, not enqueued yet · ${num(entry.attempts)} ${entry.attempts === 1 ? "attempt" : "attempts"} · `,
        link(href("outbox", { state: entry.state }), `outbox row #${entry.id}`),
        entry.last_error ? h("div", { class: "owed-error" }, h("span", { class: "muted" }, "last error: "), h("code", { title: entry.last_error }, firstLine(entry.last_error, 160))) : null,
      ),
    ),
  );
}

function node(job, { current = false, owed = [] } = {}) {
  const label = [
    current ? h("strong", {}, `#${job.id}`) : link(href(`jobs/${job.id}`), `#${job.id}`),
    " ",
    h("code", { class: "lineage-kind", title: job.kind }, clip(job.kind, 48)),
    " ",
    stateBadge(job.state),
    " ",
    origin(job),
  ];
  return h(
    "div",
    { class: ["lineage-node", current ? "lineage-current" : null], dataset: { jobId: job.id }, "aria-current": current ? "true" : null },
    h("div", { class: "lineage-label" }, label),
    owedRows(owed.filter((e) => e.job_id === job.id)),
  );
}

/** The lineage tree: ancestors (root first) each nesting the next, the job, its follow-ups. */
function lineageTree(data) {
  const owed = data.owed || [];
  const children = new Map();
  for (const f of data.followups) {
    const parent = f.trigger ? f.trigger.job_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(f);
  }
  const seen = new Set();
  const subtree = (job, current) => {
    seen.add(job.id);
    const kids = (children.get(job.id) || []).filter((k) => !seen.has(k.id));
    return h(
      "li",
      {},
      node(job, { current, owed }),
      kids.length ? h("ul", { class: "tree" }, kids.map((k) => subtree(k, false))) : null,
    );
  };
  let inner = h("ul", { class: "tree" }, subtree(data.job, true));
  for (const ancestor of data.ancestors) {
    inner = h("ul", { class: "tree" }, h("li", {}, node(ancestor, { owed }), inner));
  }
  inner.classList.add("tree-root");
  return inner;
}

async function lineage(job, box, ctx) {
  try {
    const data = await get(`jobs/${job.id}/lineage`);
    if (!ctx.alive()) return;
    const none = data.ancestors.length === 0 && data.followups.length === 0 && (data.owed || []).length === 0;
    box.replaceChildren(
      none ? h("p", { class: "muted" }, "No trigger job and no follow-ups: this job stands alone.") : lineageTree(data),
      data.truncated ? notice("info", "The lineage is longer than shown here: follow the links to see the rest.") : "",
    );
  } catch (error) {
    if (!ctx.alive()) return;
    box.replaceChildren(errorBox("load the lineage", error));
  }
}

/** Render one job's page. */
export async function render(root, ctx) {
  const id = ctx.args.id;
  if (!/^[0-9]{1,19}$/.test(id)) {
    root.append(errorBox("show this job", new Error(`${JSON.stringify(id)} is not a job id`)));
    return;
  }
  let job;
  try {
    job = await get(`jobs/${id}`);
  } catch (error) {
    root.append(pageTitle(`Job #${id}`), errorBox("load this job", error));
    if (error.status === 404 && /dead-letter/.test(error.message)) {
      root.append(h("p", {}, link(href(`dlq/${id}`), `See dead-letter entry #${id}`)));
    }
    return;
  }
  const lineageBox = h("div", { class: "lineage" }, h("p", { class: "muted" }, "Loading the lineage…"));
  root.append(
    pageTitle(`Job #${job.id}`, stateBadge(job.state), h("code", { class: "title-kind" }, job.kind), actions(job, ctx)),
    actionsNotice() || "",
    h(
      "div",
      { class: "grid-2 detail-grid" },
      section("Fields", jobFields(job)),
      section("Lineage", h("p", { class: "muted small" }, "The trigger jobs above, this job, and the follow-ups its outcomes enqueued below."), lineageBox),
    ),
    callbackSection(job) || "",
    timeline(job),
    dataSections(job),
  );
  lineage(job, lineageBox, ctx);
}
