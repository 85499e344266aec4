// Runtime instances: the live worker and maintenance processes, their health, the leader,
// their queues and registered follow-up specs; drift between them is flagged.

import { get } from "./api.js";
import { badge, h, notice, pageTitle, section, table } from "./dom.js";
import { num, when } from "./format.js";

function drifting(drift) {
  const ids = new Set();
  for (const d of drift) for (const id of Object.keys(d.specs_by_instance)) ids.add(id);
  return ids;
}

function driftBox(drift) {
  if (!drift.length) return null;
  return notice(
    "error",
    h("strong", {}, "Registry drift: "),
    "these instances register different follow-up specs for the same kind and outcome, so a job's follow-ups depend on which process finishes it. Deploy one version everywhere.",
    h(
      "ul",
      { class: "drift-list" },
      drift.map((d) =>
        h(
          "li",
          {},
          h("code", {}, d.kind),
          ` on ${d.outcome}: `,
          Object.entries(d.specs_by_instance).map(([instance, specs], i) => [
            i ? "; " : "",
            h("code", {}, instance),
            " → ",
            specs.length ? specs.join(", ") : h("em", {}, "none"),
          ]),
        ),
      ),
    ),
  );
}

function specList(instance) {
  if (!instance.specs.length) return h("span", { class: "muted" }, "none");
  return h(
    "details",
    {},
    h("summary", {}, `${instance.specs.length} ${instance.specs.length === 1 ? "spec" : "specs"}`),
    h("ul", { class: "spec-list" }, instance.specs.map((s) => h("li", {}, h("code", {}, s.kind), ` · ${s.outcome} → `, h("code", {}, s.spec)))),
  );
}

function queueList(instance) {
  const entries = Object.entries(instance.queues || {});
  if (!entries.length) return h("span", { class: "muted" }, instance.role === "maintenance" ? "maintenance only" : "none");
  return h("span", { class: "tags" }, entries.map(([q, n]) => h("span", { class: "tag" }, `${q} × ${n}`)));
}

/** Render the instances page. */
export async function render(root) {
  const { items, drift } = await get("instances");
  const flagged = drifting(drift);
  const leader = items.find((i) => i.leader);
  root.append(
    pageTitle(
      "Instances",
      h("span", { class: "muted" }, `${items.length} live · `, leader ? ["leader ", h("code", {}, `${leader.hostname}:${leader.pid}`)] : "no leader"),
    ),
    driftBox(drift) || "",
    section(
      null,
      table(
        [
          {
            label: "Instance",
            cell: (i) => [h("strong", {}, `${i.hostname}:${i.pid}`), h("div", { class: "muted small mono" }, i.instance_id)],
          },
          { label: "Role", cell: (i) => [i.role, i.leader ? [" ", badge("leader", "accent")] : null] },
          {
            label: "Health",
            cell: (i) => [
              i.healthy ? badge("healthy", "ok") : badge("unhealthy", "danger"),
              Object.keys(i.health || {}).length ? h("div", { class: "muted small mono" }, JSON.stringify(i.health)) : null,
            ],
          },
          { label: "Last seen", cell: (i) => when(i.last_seen_at) },
          { label: "Queues", cell: (i) => queueList(i) },
          { label: "In flight", class: "num", cell: (i) => `${num(i.in_flight)} / ${num(i.concurrency)}` },
          { label: "Version", cell: (i) => i.version },
          { label: "Started", cell: (i) => when(i.started_at) },
          { label: "Specs", cell: (i) => [specList(i), flagged.has(i.instance_id) ? [" ", badge("drift", "danger")] : null] },
        ],
        items,
        { empty: "No worker or maintenance process has recorded itself recently.", rowClass: (i) => (flagged.has(i.instance_id) ? "row-flagged" : null) },
      ),
    ),
  );
}
