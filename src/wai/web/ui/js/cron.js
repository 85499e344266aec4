// Periodic schedules: expression, next fire time, pause state; pause, resume, trigger and
// delete, each confirmed.

import { del, get, post, segment } from "./api.js";
import { actionButton, actionsNotice } from "./actions.js";
import { badge, h, link, pageTitle, section, table } from "./dom.js";
import { clip, when } from "./format.js";
import { href } from "./router.js";

function actions(schedule, ctx) {
  const name = schedule.name;
  const path = `cron/${segment(name)}`;
  return h(
    "div",
    { class: "row-actions" },
    schedule.paused
      ? actionButton("Resume", {
          ctx,
          confirm: { title: `Resume ${name}?`, message: `It fires again; the fire times it missed are owed by its policy (${schedule.missed_fire_policy}).` },
          run: () => post(`${path}/resume`),
          done: () => `Schedule ${name} resumed.`,
        })
      : actionButton("Pause", {
          ctx,
          confirm: { title: `Pause ${name}?`, message: "It stops firing until it is resumed." },
          run: () => post(`${path}/pause`),
          done: () => `Schedule ${name} paused.`,
        }),
    actionButton("Trigger", {
      ctx,
      confirm: { title: `Trigger ${name} now?`, message: `One ${schedule.kind} job is enqueued on ${schedule.queue} now, even while paused.`, confirmLabel: "Enqueue a job" },
      run: () => post(`${path}/trigger`),
      done: (job) => `Schedule ${name} triggered: job #${job.id} enqueued.`,
    }),
    actionButton("Delete", {
      ctx,
      tone: "danger",
      confirm: {
        title: `Delete ${name}?`,
        message: ["The stored schedule is deleted.", "A process that registers it stores it again when it starts."],
      },
      run: () => del(path),
      done: () => `Schedule ${name} deleted.`,
    }),
  );
}

/** Render the cron page. */
export async function render(root, ctx) {
  const { items } = await get("cron");
  root.append(
    pageTitle("Cron", h("span", { class: "muted" }, `${items.length} ${items.length === 1 ? "schedule" : "schedules"}`)),
    actionsNotice() || "",
    section(
      null,
      table(
        [
          { label: "Schedule", cell: (s) => h("strong", { title: s.name }, clip(s.name, 48)) },
          { label: "Expression", cell: (s) => [h("code", {}, s.expr), s.timezone !== "UTC" ? h("div", { class: "muted small" }, s.timezone) : null] },
          { label: "Job", cell: (s) => [link(href("jobs", { kind: s.kind }), h("code", { title: s.kind }, clip(s.kind, 32))), h("div", { class: "muted small" }, `on ${clip(s.queue, 40)}`)] },
          { label: "Status", cell: (s) => (s.paused ? badge("paused", "warn") : badge("active", "ok")) },
          { label: "Next fire", cell: (s) => (s.paused ? h("span", { class: "muted" }, "paused") : when(s.next_fire_at)) },
          { label: "Last fire", cell: (s) => when(s.last_fire_at) },
          { label: "Missed fires", cell: (s) => s.missed_fire_policy },
          { label: "Actions", cell: (s) => actions(s, ctx) },
        ],
        items,
        { empty: "No schedule is stored. Register one with client.periodic(...) in a process that runs maintenance." },
      ),
    ),
  );
}
