// Jobs: the API's filters as a form reflected in the hash, keyset pages newest first.

import { get } from "./api.js";
import { button, h, pageTitle, section, table } from "./dom.js";
import { clip, when } from "./format.js";
import { STATES, jobLink, stateBadge, stateLabel, tagList } from "./jobview.js";
import { navigate } from "./router.js";
import { pager } from "./pager.js";

const FILTERS = ["state", "kind", "queue", "tag", "trigger_job_id"];
const PAGE_SIZE = 50;

function filtersOf(params) {
  const found = {};
  for (const name of [...FILTERS, "limit"]) {
    const value = params.get(name);
    if (value) found[name] = value;
  }
  return found;
}

function input(name, label, value, attrs = {}) {
  const id = `filter-${name}`;
  return h("div", { class: "form-field" }, h("label", { for: id }, label), h("input", { id, name, value: value || "", ...attrs }));
}

function filterForm(filters) {
  const state = h(
    "select",
    { id: "filter-state", name: "state" },
    h("option", { value: "" }, "any state"),
    STATES.map((s) => h("option", { value: s, selected: filters.state === s }, stateLabel(s))),
  );
  const form = h(
    "form",
    { class: "filters", role: "search" },
    h("div", { class: "form-field" }, h("label", { for: "filter-state" }, "State"), state),
    input("kind", "Kind", filters.kind, { placeholder: "any kind", autocomplete: "off" }),
    input("queue", "Queue", filters.queue, { placeholder: "any queue", autocomplete: "off" }),
    input("tag", "Tag", filters.tag, { placeholder: "any tag", autocomplete: "off" }),
    input("trigger_job_id", "Trigger job", filters.trigger_job_id, { placeholder: "id", inputmode: "numeric", autocomplete: "off" }),
    h(
      "div",
      { class: "form-buttons" },
      button("Apply", { type: "submit", tone: "primary", small: true }),
      button("Clear", { small: true, onClick: () => navigate("jobs", filters.limit ? { limit: filters.limit } : {}) }),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const params = {};
    for (const name of FILTERS) {
      const value = String(data.get(name) || "").trim();
      if (value) params[name] = value;
    }
    if (filters.limit) params.limit = filters.limit;
    navigate("jobs", params);
  });
  return form;
}

const COLUMNS = [
  { label: "ID", class: "num", cell: (j) => jobLink(j.id) },
  { label: "Kind", cell: (j) => h("code", { title: j.kind }, clip(j.kind, 32)) },
  { label: "Queue", cell: (j) => h("span", { title: j.queue }, clip(j.queue, 24)) },
  { label: "State", cell: (j) => stateBadge(j.state) },
  { label: "Attempt", class: "num", cell: (j) => `${j.attempt}/${j.max_attempts}` },
  { label: "Priority", class: "num", cell: (j) => String(j.priority) },
  { label: "Tags", cell: (j) => tagList(j.tags) },
  { label: "Created", cell: (j) => when(j.created_at) },
  {
    label: "Runs / finished",
    cell: (j) => (j.finalized_at ? when(j.finalized_at) : j.state === "running" ? when(j.attempted_at) : when(j.run_at)),
  },
];

/** Render the jobs page. */
export async function render(root, ctx) {
  const filters = filtersOf(ctx.params);
  const cursor = ctx.params.get("before_id") || null;
  const limit = filters.limit || PAGE_SIZE;
  const page = await get("jobs", { ...filters, limit, before_id: cursor });
  const described = FILTERS.filter((f) => filters[f]).map((f) => `${f.replace("_job_id", "")} = ${filters[f]}`);
  root.append(
    pageTitle("Jobs", h("span", { class: "muted" }, described.length ? `filtered by ${described.join(", ")}` : "newest first")),
    filterForm(filters),
    section(
      null,
      table(COLUMNS, page.items, { empty: cursor ? "No older jobs." : "No job matches these filters." }),
      pager({
        key: JSON.stringify(filters),
        path: "jobs",
        params: filters,
        cursorParam: "before_id",
        cursor,
        next: page.next_before_id === null ? null : String(page.next_before_id),
      }),
    ),
  );
}
