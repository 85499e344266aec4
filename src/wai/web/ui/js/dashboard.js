// The dashboard: throughput per minute, depth and lag over the last hour and now per queue,
// dead letters, the outbox, the live instances and the leader. It refreshes every 5
// seconds while the tab is visible.

import { get } from "./api.js";
import { legend, bars, stackedBars, columns, lines } from "./charts.js";
import { badge, card, errorBox, h, link, pageTitle, section, table } from "./dom.js";
import { duration, num, when } from "./format.js";
import { LIVE_STATES, STATES, stateBadge, stateLabel } from "./jobview.js";
import { href } from "./router.js";

const REFRESH_MS = 5000;

async function load() {
  const [queues, dlq, outbox, instances, throughput, depth] = await Promise.all([
    get("queues"),
    get("dlq/stats"),
    get("outbox/stats"),
    get("instances"),
    get("stats/throughput", { minutes: 60 }),
    get("stats/depth", { minutes: 60 }),
  ]);
  // A queue whose only jobs are dead letters has no row in the queue stats: give it one.
  const known = new Set(queues.items.map((q) => q.name));
  const empty = { counts: {}, estimated: [], total: 0, paused: false, paused_at: null, oldest_available_lag: null };
  const rows = [...queues.items, ...Object.keys(dlq.queues).filter((n) => !known.has(n)).map((name) => ({ ...empty, name }))];
  rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { queues: rows, dlq, outbox, instances, throughput: throughput.items, depth: depthSeries(depth.items) };
}

const EVENTS = ["completed", "retried", "failed", "rescued"];
const EVENT_LABELS = { completed: "completed", retried: "retried", failed: "failed", rescued: "rescued" };

// Depth samples (one item per queue and time) summed per time over queues: lines per state,
// and the largest lag of any queue.
function depthSeries(items) {
  const byTime = new Map();
  for (const item of items) {
    let point = byTime.get(item.at);
    if (!point) {
      point = { counts: {}, lag: 0 };
      byTime.set(item.at, point);
    }
    for (const s of LIVE_STATES) point.counts[s] = (point.counts[s] || 0) + (item.counts[s] || 0);
    point.lag = Math.max(point.lag, item.oldest_available_lag || 0);
  }
  const times = [...byTime.keys()];
  return { times: times.map((t) => new Date(t)), points: times.map((t) => byTime.get(t)) };
}

function throughputChart(data, host) {
  const minutes = data.throughput;
  const shown = EVENTS.filter((e) => e !== "rescued" || minutes.some((m) => m.counts.rescued));
  const totals = Object.fromEntries(shown.map((e) => [e, minutes.reduce((sum, m) => sum + m.counts[e], 0)]));
  const box = h("div", { class: "chart-box" });
  host.append(
    section(
      "Throughput per minute, last hour",
      box,
      legend(shown, (e) => `fill-event-${e}`, (e) => `${EVENT_LABELS[e]} (${num(totals[e])})`),
    ),
  );
  box.append(
    lines(box, {
      times: minutes.map((m) => new Date(m.minute)),
      series: shown.map((e) => ({ key: e, values: minutes.map((m) => m.counts[e]) })),
      classOf: (e) => `stroke-event-${e}`,
      labelOf: (e) => EVENT_LABELS[e],
      ariaLabel: "Jobs completed, retried and failed per minute over the last hour",
    }),
  );
}

function historyCharts(data, host) {
  const { times, points } = data.depth;
  const depthBox = h("div", { class: "chart-box" });
  const lagBox = h("div", { class: "chart-box" });
  host.append(
    h(
      "div",
      { class: "grid-2" },
      section("Depth, last hour", depthBox, legend(LIVE_STATES, (s) => stateClass(s), stateLabel)),
      section("Oldest available job, last hour", lagBox, h("p", { class: "muted small" }, "The longest any queue's oldest available job had waited, per sample.")),
    ),
  );
  depthBox.append(
    lines(depthBox, {
      times,
      series: LIVE_STATES.map((s) => ({ key: s, values: points.map((p) => p.counts[s]) })),
      classOf: (s) => `stroke-state-${s}`,
      labelOf: stateLabel,
      ariaLabel: "Jobs waiting or running over the last hour, all queues, per state",
    }),
  );
  lagBox.append(
    lines(lagBox, {
      times,
      series: [{ key: "lag", values: points.map((p) => p.lag) }],
      classOf: () => "stroke-lag",
      labelOf: () => "lag",
      format: (v) => (v ? duration(v) : "0 s"),
      ariaLabel: "Lag of the oldest available job over the last hour",
    }),
  );
}

function depth(queue) {
  return LIVE_STATES.reduce((sum, s) => sum + (queue.counts[s] || 0), 0);
}

function cards(data) {
  const total = (state) => data.queues.reduce((sum, q) => sum + (q.counts[state] || 0), 0);
  const approx = (state) => data.queues.some((q) => (q.estimated || []).includes(state));
  const waiting = total("available") + total("scheduled") + total("retryable");
  const leader = data.instances.items.find((i) => i.leader);
  const unhealthy = data.instances.items.filter((i) => !i.healthy).length;
  return h(
    "div",
    { class: "cards" },
    card("Waiting", num(waiting), { sub: `${num(total("available"))} available now`, href: href("jobs", { state: "available" }) }),
    card("Running", num(total("running")), { sub: `${num(total("waiting_external"))} waiting on callbacks`, href: href("jobs", { state: "running" }) }),
    card("Failed", `${approx("failed") ? "≈ " : ""}${num(total("failed"))}`, { tone: total("failed") ? "danger" : null, href: href("jobs", { state: "failed" }) }),
    card("Dead letters", num(data.dlq.total), { tone: data.dlq.total ? "warn" : null, href: href("dlq") }),
    card("Outbox", `${num(data.outbox.pending)} pending`, {
      sub: `${num(data.outbox.failed)} failed`,
      tone: data.outbox.failed ? "danger" : null,
      href: href("outbox"),
    }),
    card("Instances", num(data.instances.items.length), {
      sub: leader ? `leader: ${leader.hostname}:${leader.pid}` : "no leader",
      tone: unhealthy || !leader ? "warn" : null,
      href: href("instances"),
    }),
  );
}

function stateClass(state) {
  return `fill-state-${state}`;
}

function charts(data, host) {
  throughputChart(data, host);
  historyCharts(data, host);
  const rows = data.queues.map((q) => ({ label: q.name, values: q.counts }));
  const depthBox = h("div", { class: "chart-box" });
  const lagBox = h("div", { class: "chart-box" });
  const stateBox = h("div", { class: "chart-box" });
  host.append(
    h(
      "div",
      { class: "grid-2" },
      section("Depth by queue, now", depthBox, legend(LIVE_STATES, (s) => stateClass(s), stateLabel)),
      section("Oldest available job by queue, now", lagBox, h("p", { class: "muted small" }, "How long the oldest available job of each queue has waited for a worker.")),
    ),
    section(
      "All jobs by state",
      stateBox,
      data.queues.some((q) => (q.estimated || []).length) ? h("p", { class: "muted small" }, "Finished jobs (completed, failed, cancelled) are counted by estimate on a large table.") : "",
    ),
  );
  // Drawn once the boxes are in the page: the charts take the width they are given.
  depthBox.append(stackedBars(depthBox, { rows, keys: LIVE_STATES, classOf: stateClass, labelOf: stateLabel, ariaLabel: "Jobs waiting or running, per queue and state" }));
  lagBox.append(
    bars(lagBox, {
      rows: data.queues.map((q) => ({ label: q.name, value: q.oldest_available_lag || 0 })),
      format: (v) => (v ? duration(v) : "—"),
      barClass: "fill-lag",
      ariaLabel: "Lag of the oldest available job, per queue",
    }),
  );
  const totals = STATES.map((s) => ({ label: stateLabel(s), values: { [s]: data.queues.reduce((sum, q) => sum + (q.counts[s] || 0), 0) } }));
  stateBox.append(columns(stateBox, { points: totals, keys: STATES, classOf: stateClass, labelOf: stateLabel, ariaLabel: "Jobs per state, all queues" }));
}

function queueTable(data) {
  return section(
    "Queues",
    table(
      [
        { label: "Queue", cell: (q) => link(href("jobs", { queue: q.name }), q.name) },
        { label: "Status", cell: (q) => (q.paused ? badge("paused", "warn") : badge("active", "ok")) },
        ...LIVE_STATES.map((s) => ({ label: stateLabel(s), class: "num", cell: (q) => num(q.counts[s] || 0) })),
        { label: "Depth", class: "num", cell: (q) => h("strong", {}, num(depth(q))) },
        { label: "Lag", class: "num", cell: (q) => (q.oldest_available_lag ? duration(q.oldest_available_lag) : "—") },
        {
          label: "Dead letters",
          class: "num",
          cell: (q) => (data.dlq.queues[q.name] ? link(href("dlq", { queue: q.name }), num(data.dlq.queues[q.name])) : h("span", { class: "muted" }, "0")),
        },
      ],
      data.queues,
      { empty: "No queue has jobs yet." },
    ),
  );
}

function instanceList(data) {
  const items = data.instances.items;
  return section(
    "Live instances",
    table(
      [
        { label: "Instance", cell: (i) => link(href("instances"), `${i.hostname}:${i.pid}`) },
        { label: "Role", cell: (i) => [i.role, i.leader ? [" ", badge("leader", "accent")] : null] },
        { label: "Health", cell: (i) => (i.healthy ? badge("healthy", "ok") : badge("unhealthy", "danger")) },
        { label: "In flight", class: "num", cell: (i) => `${num(i.in_flight)} / ${num(i.concurrency)}` },
        { label: "Last seen", cell: (i) => when(i.last_seen_at) },
      ],
      items,
      { empty: "No worker or maintenance process is running." },
    ),
    data.instances.drift.length
      ? h("p", { class: "drift-note" }, badge("drift", "danger"), " The instances disagree on follow-up specs: ", link(href("instances"), "see Instances"), ".")
      : null,
  );
}

function draw(body, data) {
  const fresh = h("div", { class: "dashboard" });
  fresh.append(cards(data));
  body.replaceChildren(fresh); // in the page first: the charts measure their boxes
  charts(data, fresh);
  fresh.append(queueTable(data), instanceList(data));
}

/** Render the dashboard. */
export async function render(root, ctx) {
  const status = h("span", { class: "muted small refresh-note" });
  const body = h("div", {});
  root.append(pageTitle("Dashboard", status), body);
  const update = async () => {
    if (document.hidden || !ctx.alive()) return;
    try {
      const data = await load();
      if (!ctx.alive()) return;
      draw(body, data);
      status.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 5 s`;
    } catch (error) {
      if (!ctx.alive()) return;
      body.replaceChildren(errorBox("load the dashboard", error, update));
      status.textContent = "Retrying every 5 s";
    }
  };
  const data = await load(); // a failure here is the page's error, with its "Try again"
  const onVisible = () => {
    if (!document.hidden) update();
  };
  document.addEventListener("visibilitychange", onVisible);
  ctx.onLeave(() => document.removeEventListener("visibilitychange", onVisible));
  ctx.every(REFRESH_MS, update);
  // Drawn once the page is in the document: the charts take the width of their boxes.
  ctx.onShown(() => {
    draw(body, data);
    status.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 5 s`;
  });
}
