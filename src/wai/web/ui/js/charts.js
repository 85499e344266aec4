// Small charts drawn as inline SVG: horizontal (stacked) bars and columns. Sizes are in
// CSS pixels of the container at drawing time, so text stays its real size on a phone;
// colours come from CSS classes (the Content-Security-Policy allows no inline style).

import { h, svg } from "./dom.js";
import { clip, num } from "./format.js";

const ROW = 26;
const BAR = 16;

function widthOf(container, fallback = 640) {
  const w = container && container.clientWidth ? container.clientWidth : fallback;
  return Math.max(260, Math.floor(w));
}

function title(text) {
  return svg("title", {}, text);
}

/** A legend: a swatch and a name per series. */
export function legend(keys, classOf, labelOf = (k) => k) {
  return h(
    "ul",
    { class: "legend" },
    keys.map((key) => h("li", {}, h("span", { class: ["swatch", classOf(key)], "aria-hidden": "true" }), labelOf(key))),
  );
}

/** Horizontal bars, one row per item, each split into series.
 *  rows: [{label, values: {key: n}}]; keys: series in stacking order; classOf(key): a CSS class. */
export function stackedBars(container, { rows, keys, classOf, labelOf = (k) => k, valueText = num, unit = "jobs", ariaLabel }) {
  const width = widthOf(container);
  const labelWidth = Math.min(160, Math.floor(width * 0.3));
  const totals = rows.map((r) => keys.reduce((sum, k) => sum + (r.values[k] || 0), 0));
  const longest = Math.max(1, ...totals.map((t) => String(valueText(t)).length));
  const valueWidth = Math.min(110, longest * 7 + 14);
  const plot = width - labelWidth - valueWidth - 8;
  const max = Math.max(1, ...totals);
  const height = Math.max(ROW, rows.length * ROW);
  const chart = svg("svg", {
    class: "chart",
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": ariaLabel,
  });
  rows.forEach((row, i) => {
    const y = i * ROW;
    chart.append(svg("text", { x: labelWidth - 8, y: y + ROW / 2, class: "chart-label", "text-anchor": "end", "dominant-baseline": "middle" }, title(row.label), clip(row.label, Math.max(4, Math.floor((labelWidth - 10) / 7)))));
    chart.append(svg("rect", { x: labelWidth, y: y + (ROW - BAR) / 2, width: plot, height: BAR, rx: 3, class: "chart-track" }));
    let x = labelWidth;
    for (const key of keys) {
      const value = row.values[key] || 0;
      if (!value) continue;
      const w = Math.max(1.5, (value / max) * plot);
      const what = labelOf(key) ? `${num(value)} ${labelOf(key)}` : valueText(value);
      chart.append(svg("rect", { x, y: y + (ROW - BAR) / 2, width: w, height: BAR, class: classOf(key) }, title(`${row.label}: ${what}`)));
      x += w;
    }
    chart.append(svg("text", { x: labelWidth + plot + 8, y: y + ROW / 2, class: "chart-value", "dominant-baseline": "middle" }, valueText(totals[i])));
  });
  if (rows.length === 0) {
    chart.append(svg("text", { x: 0, y: ROW / 2, class: "chart-label", "dominant-baseline": "middle" }, `No ${unit}.`));
  }
  return chart;
}

/** Horizontal bars of one value per row: rows [{label, value}], format(value) for the text. */
export function bars(container, { rows, format = num, barClass = "fill-accent", ariaLabel }) {
  return stackedBars(container, {
    rows: rows.map((r) => ({ label: r.label, values: { v: r.value } })),
    keys: ["v"],
    classOf: () => barClass,
    labelOf: () => "",
    valueText: (total) => format(total),
    ariaLabel,
  });
}

/** Vertical columns, one per point: points [{label, values: {key: n}}] stacked by keys. */
export function columns(container, { points, keys, classOf, labelOf = (k) => k, height = 180, ariaLabel }) {
  const width = widthOf(container);
  const axis = 22;
  const top = 18;
  const plot = height - axis - top;
  const totals = points.map((p) => keys.reduce((sum, k) => sum + (p.values[k] || 0), 0));
  const max = Math.max(1, ...totals);
  const slot = width / Math.max(1, points.length);
  const barWidth = Math.max(6, Math.min(48, slot * 0.6));
  const chart = svg("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": ariaLabel });
  chart.append(svg("line", { x1: 0, x2: width, y1: top + plot + 0.5, y2: top + plot + 0.5, class: "chart-axis" }));
  points.forEach((point, i) => {
    const cx = slot * i + slot / 2;
    let y = top + plot;
    for (const key of keys) {
      const value = point.values[key] || 0;
      if (!value) continue;
      const hgt = Math.max(1.5, (value / max) * plot);
      y -= hgt;
      chart.append(svg("rect", { x: cx - barWidth / 2, y, width: barWidth, height: hgt, rx: 2, class: classOf(key) }, title(`${point.label}: ${num(value)} ${labelOf(key)}`)));
    }
    chart.append(svg("text", { x: cx, y: y - 5, class: "chart-value", "text-anchor": "middle" }, num(totals[i])));
    chart.append(svg("text", { x: cx, y: height - 6, class: "chart-label", "text-anchor": "middle" }, title(point.label), clip(point.label, Math.max(4, Math.floor(slot / 7)))));
  });
  return chart;
}

/** Lines over time: times [Date], series [{key, values: [n per time]}], one stroke class per key.
 *  The y axis starts at 0 and ends at the largest value; the x axis shows the first and last time. */
export function lines(container, { times, series, classOf, labelOf = (k) => k, format = num, height = 170, ariaLabel }) {
  const width = widthOf(container);
  const left = 44;
  const right = 8;
  const top = 10;
  const axis = 20;
  const plot = height - top - axis;
  const span = width - left - right;
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const chart = svg("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": ariaLabel });
  const x = (i) => left + (times.length > 1 ? (i / (times.length - 1)) * span : span / 2);
  const y = (v) => top + plot - (v / max) * plot;
  for (const frac of [0, 0.5, 1]) {
    const yy = Math.round(y(max * frac)) + 0.5;
    chart.append(svg("line", { x1: left, x2: width - right, y1: yy, y2: yy, class: frac ? "chart-grid" : "chart-axis" }));
    chart.append(svg("text", { x: left - 6, y: yy, class: "chart-value", "text-anchor": "end", "dominant-baseline": "middle" }, format(max * frac)));
  }
  if (times.length) {
    const clock = (t) => t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    chart.append(svg("text", { x: left, y: height - 4, class: "chart-label" }, clock(times[0])));
    chart.append(svg("text", { x: width - right, y: height - 4, class: "chart-label", "text-anchor": "end" }, clock(times[times.length - 1])));
  }
  for (const s of series) {
    if (!s.values.length) continue;
    const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    const total = s.values.reduce((a, b) => a + b, 0);
    chart.append(svg("polyline", { points, class: ["chart-line", classOf(s.key)].join(" ") }, title(`${labelOf(s.key)}: ${format(total)} in all, at most ${format(Math.max(...s.values))}`)));
  }
  if (!times.length) {
    chart.append(svg("text", { x: left + 8, y: top + plot / 2, class: "chart-label", "dominant-baseline": "middle" }, "Nothing recorded yet."));
  }
  return chart;
}
