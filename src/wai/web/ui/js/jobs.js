// Jobs: the API's filters as a form reflected in the hash, keyset pages newest first.
// The time range is a preset relative to now ("since=1h": the last hour, whenever the page
// is drawn) or a custom range of absolute times (created_after / created_before).

import { get } from "./api.js";
import { button, h, link, notice, pageTitle, section, table } from "./dom.js";
import { absolute, clip, when } from "./format.js";
import { STATES, jobLink, stateBadge, stateLabel, tagList } from "./jobview.js";
import { href, navigate } from "./router.js";
import { pager } from "./pager.js";

const TEXT_FILTERS = ["state", "kind", "queue", "tag", "trigger_job_id", "search"];
const TIME_FILTERS = ["since", "created_after", "created_before"];
const FILTERS = [...TEXT_FILTERS, ...TIME_FILTERS];
const PAGE_SIZE = 50;

/** The time presets: hash value, label, length in milliseconds. */
const PRESETS = [
  ["15m", "last 15 min", 15 * 60_000],
  ["1h", "last hour", 3_600_000],
  ["24h", "last 24 h", 86_400_000],
  ["7d", "last 7 days", 7 * 86_400_000],
];

function filtersOf(params) {
  const found = {};
  for (const name of [...FILTERS, "limit"]) {
    const value = params.get(name);
    if (value) found[name] = value;
  }
  return found;
}

/** The API's time bounds for the hash's filters: a preset counts back from now. */
function timeBounds(filters) {
  const preset = PRESETS.find(([value]) => value === filters.since);
  if (preset) return { created_after: new Date(Date.now() - preset[2]).toISOString() };
  return { created_after: filters.created_after, created_before: filters.created_before };
}

/** "2026-05-01T12:00" in local time (a datetime-local input's value) of an ISO string. */
function localInput(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The ISO string (UTC) of a datetime-local input's value, read as local time; "" if none. */
function fromLocalInput(value) {
  if (!value) return "";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

function input(name, label, value, attrs = {}) {
  const id = `filter-${name}`;
  return h("div", { class: "form-field" }, h("label", { for: id }, label), h("input", { id, name, ...attrs, value: value || "" }));
}

function rangeMode(filters) {
  if (filters.since) return filters.since;
  return filters.created_after || filters.created_before ? "custom" : "";
}

function filterForm(filters) {
  const state = h(
    "select",
    { id: "filter-state", name: "state" },
    h("option", { value: "" }, "any state"),
    STATES.map((s) => h("option", { value: s, selected: filters.state === s }, stateLabel(s))),
  );
  const mode = rangeMode(filters);
  const from = input("created_after", "From", localInput(filters.created_after), { type: "datetime-local" });
  const to = input("created_before", "Until", localInput(filters.created_before), { type: "datetime-local" });
  const showCustom = (on) => {
    from.hidden = !on;
    to.hidden = !on;
  };
  const range = h(
    "select",
    { id: "filter-range", name: "range", on: { change: (event) => showCustom(event.target.value === "custom") } },
    h("option", { value: "" }, "any time"),
    PRESETS.map(([value, label]) => h("option", { value, selected: mode === value }, label)),
    h("option", { value: "custom", selected: mode === "custom" }, "custom range…"),
  );
  showCustom(mode === "custom");
  const form = h(
    "form",
    { class: "filters", role: "search" },
    input("search", "Search", filters.search, { type: "search", placeholder: "kind or job id", autocomplete: "off" }),
    h("div", { class: "form-field" }, h("label", { for: "filter-state" }, "State"), state),
    input("kind", "Kind", filters.kind, { placeholder: "any kind", autocomplete: "off" }),
    input("queue", "Queue", filters.queue, { placeholder: "any queue", autocomplete: "off" }),
    input("tag", "Tag", filters.tag, { placeholder: "any tag", autocomplete: "off" }),
    input("trigger_job_id", "Trigger job", filters.trigger_job_id, { placeholder: "id", inputmode: "numeric", autocomplete: "off" }),
    h("div", { class: "form-field" }, h("label", { for: "filter-range" }, "Created"), range),
    from,
    to,
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
    for (const name of TEXT_FILTERS) {
      const value = String(data.get(name) || "").trim();
      if (value) params[name] = value;
    }
    const chosen = String(data.get("range") || "");
    if (chosen === "custom") {
      params.created_after = fromLocalInput(String(data.get("created_after") || ""));
      params.created_before = fromLocalInput(String(data.get("created_before") || ""));
    } else if (chosen) {
      params.since = chosen;
    }
    if (filters.limit) params.limit = filters.limit;
    navigate("jobs", params);
  });
  return form;
}

function describe(filters) {
  const parts = TEXT_FILTERS.filter((f) => filters[f]).map((f) => `${f.replace("_job_id", "")} = ${filters[f]}`);
  const preset = PRESETS.find(([value]) => value === filters.since);
  if (preset) parts.push(`created in the ${preset[1]}`);
  if (filters.created_after) parts.push(`created from ${absolute(filters.created_after)}`);
  if (filters.created_before) parts.push(`created before ${absolute(filters.created_before)}`);
  return parts;
}

/** A search that names a job id ("123", "#123"): that id, else null. */
function searchedId(search) {
  const found = /^#?([0-9]{1,19})$/.exec(search || "");
  return found ? found[1] : null;
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

function emptyText(cursor, next) {
  // A search, kind, queue or tag filter looks through a bounded run of ids per page.
  if (next !== null) return "No match among these jobs; older ones may match: Older → looks further.";
  return cursor ? "No older jobs." : "No job matches these filters.";
}

/** Render the jobs page. */
export async function render(root, ctx) {
  const filters = filtersOf(ctx.params);
  const cursor = ctx.params.get("before_id") || null;
  const limit = filters.limit || PAGE_SIZE;
  const query = {};
  for (const name of TEXT_FILTERS) query[name] = filters[name];
  const page = await get("jobs", { ...query, ...timeBounds(filters), limit, before_id: cursor });
  const next = page.next_before_id === null ? null : String(page.next_before_id);
  const described = describe(filters);
  const id = searchedId(filters.search);
  root.append(
    pageTitle("Jobs", h("span", { class: "muted" }, described.length ? `filtered by ${described.join(", ")}` : "newest first")),
    filterForm(filters),
    id ? notice("info", "The search names a job id: ", link(href(`jobs/${id}`), `open job #${id}`), ". Below, the jobs whose kind holds it, and that job if it matches the filters.") : "",
    section(
      null,
      table(COLUMNS, page.items, { empty: emptyText(cursor, next) }),
      pager({
        key: JSON.stringify(filters),
        path: "jobs",
        params: filters,
        cursorParam: "before_id",
        cursor,
        next,
      }),
    ),
  );
}
