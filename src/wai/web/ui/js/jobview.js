// How a job is shown: its state badge, its fields, its data, and the timeline of its attempts.
// Shared by the job page and the dead-letter entry page.

import { badge, fields, h, jsonBlock, link, section } from "./dom.js";
import { at, duration, num, when } from "./format.js";
import { href } from "./router.js";

/** The eight job states, in the order of a job's life. */
export const STATES = ["scheduled", "available", "running", "retryable", "waiting_external", "completed", "failed", "cancelled"];

/** The states a job waits or runs in: a queue's depth. */
export const LIVE_STATES = ["scheduled", "available", "running", "retryable", "waiting_external"];

export const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** A state's readable name. */
export function stateLabel(state) {
  return state === "waiting_external" ? "waiting" : state;
}

/** A job state badge. */
export function stateBadge(state) {
  const b = badge(stateLabel(state), `state-${state}`);
  b.title = state;
  return b;
}

/** A link to a job's page: "#12". */
export function jobLink(id) {
  return link(href(`jobs/${id}`), `#${id}`);
}

/** Tags as small chips. */
export function tagList(tags) {
  if (!tags || tags.length === 0) return h("span", { class: "muted" }, "—");
  return h("span", { class: "tags" }, tags.map((t) => h("span", { class: "tag" }, t)));
}

/** The fields of a job. */
export function jobFields(job) {
  const trigger = job.trigger
    ? h(
        "span",
        {},
        "follow-up of ",
        jobLink(job.trigger.job_id),
        ` (${job.trigger.outcome} → ${job.trigger.spec}, lease ${job.trigger.run_lease})`,
      )
    : null;
  return fields([
    ["Kind", h("code", {}, job.kind)],
    ["Queue", h("code", {}, job.queue)],
    ["State", stateBadge(job.state)],
    ["Attempt", `${num(job.attempt)} of ${num(job.max_attempts)}`],
    ["Priority", String(job.priority)],
    ["Run lease", String(job.run_lease)],
    ["Created", at(job.created_at)],
    ["Run at", at(job.run_at)],
    ["Attempted", job.attempted_at ? at(job.attempted_at) : null],
    ["Heartbeat", job.heartbeat_at ? when(job.heartbeat_at) : null],
    ["Deadline", job.deadline_at ? at(job.deadline_at) : null],
    ["Finished", job.finalized_at ? at(job.finalized_at) : null],
    ["Tags", tagList(job.tags)],
    ["Trigger", trigger],
    ["Ordering key", job.ordering_key !== null ? h("code", {}, job.ordering_key) : null],
    ["Unique key", job.unique_key !== null ? h("code", { class: "wrap" }, job.unique_key) : null],
  ]);
}

/** The external callback a waiting job is parked on, or null. */
export function callbackSection(job) {
  if (job.callback_id === null && job.callback_result === null) return null;
  return section(
    "Callback",
    fields([
      ["Callback id", job.callback_id !== null ? h("code", { class: "wrap" }, job.callback_id) : null],
      ["Times out", job.callback_timeout_at ? at(job.callback_timeout_at) : null],
    ]),
    job.callback_result !== null ? [h("h3", {}, "Result"), jsonBlock(job.callback_result)] : null,
  );
}

/** Args, metadata and progress, as pretty-printed JSON. */
export function dataSections(job) {
  const blocks = [h("div", { class: "data-block" }, h("h3", {}, "Args"), jsonBlock(job.args))];
  blocks.push(h("div", { class: "data-block" }, h("h3", {}, "Metadata"), jsonBlock(job.metadata)));
  if (job.progress !== null) blocks.push(h("div", { class: "data-block" }, h("h3", {}, "Progress"), jsonBlock(job.progress)));
  return section("Data", h("div", { class: "data-grid" }, blocks));
}

function marker(tone) {
  return h("span", { class: ["timeline-dot", `dot-${tone}`], "aria-hidden": "true" });
}

function event(tone, title, time, ...body) {
  return h(
    "li",
    { class: ["timeline-item", `timeline-${tone}`] },
    marker(tone),
    h("div", { class: "timeline-body" }, h("div", { class: "timeline-head" }, h("strong", {}, title), time ? [" · ", when(time)] : null), ...body),
  );
}

/** The attempts of a job as a timeline: creation, each recorded error, and where it is now. */
export function timeline(job) {
  const items = [event("neutral", "Created", job.created_at)];
  for (const entry of job.errors || []) {
    const markers = [];
    if (entry.terminal) markers.push(badge("terminal", "danger"));
    if (entry.rescued) markers.push(badge(`rescued: ${entry.rescued}`, "warn"));
    if (entry.expression) markers.push(h("code", { class: "muted" }, entry.expression));
    const tone = entry.terminal ? "danger" : entry.rescued ? "warn" : "retry";
    const attempt = entry.attempt !== undefined ? `Attempt ${entry.attempt}` : "Error";
    items.push(
      event(
        tone,
        attempt,
        entry.at || null,
        markers.length ? h("div", { class: "timeline-markers" }, markers) : null,
        h("pre", { class: "error-text" }, String(entry.error ?? "")),
      ),
    );
  }
  const ran = job.attempted_at && job.finalized_at ? (new Date(job.finalized_at) - new Date(job.attempted_at)) / 1000 : null;
  const took = ran !== null && ran >= 0 ? ` (ran ${duration(ran)})` : "";
  const now = {
    scheduled: ["neutral", `Scheduled: attempt ${job.attempt + 1} of ${job.max_attempts} runs`, job.run_at],
    available: ["info", `Available: attempt ${job.attempt + 1} waits for a worker`, job.run_at],
    running: ["info", `Running attempt ${job.attempt} of ${job.max_attempts}`, job.attempted_at],
    retryable: ["retry", `Retry: attempt ${job.attempt + 1} of ${job.max_attempts} runs`, job.run_at],
    waiting_external: ["info", "Waiting for an external callback", job.attempted_at],
    completed: ["ok", `Completed on attempt ${job.attempt}${took}`, job.finalized_at],
    failed: ["danger", `Failed after ${job.attempt} ${job.attempt === 1 ? "attempt" : "attempts"}`, job.finalized_at],
    cancelled: ["neutral", "Cancelled", job.finalized_at],
  }[job.state];
  if (now) items.push(event(now[0], now[1], now[2]));
  const count = (job.errors || []).length;
  return section(
    "Attempts",
    h("p", { class: "muted small timeline-note" }, count ? `${count} ${count === 1 ? "error" : "errors"} recorded, oldest first.` : "No error recorded."),
    h("ol", { class: "timeline" }, items),
  );
}
