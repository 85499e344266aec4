// Formatting of times, durations and numbers. Times are shown relative ("3 min ago") with
// the absolute local time in the element's title.

import { h } from "./dom.js";

const NUMBER = new Intl.NumberFormat("en-US");

/** A whole number with thousands separators. */
export function num(value) {
  return value === null || value === undefined ? "—" : NUMBER.format(value);
}

function pad(n) {
  return String(n).padStart(2, "0");
}

/** The local date and time of an ISO 8601 string, "2026-05-01 14:03:09". */
export function absolute(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A duration in seconds, short: "42 s", "3 min", "2 h 5 min", "3 d 4 h". */
export function duration(seconds) {
  const s = Math.abs(Number(seconds));
  if (!Number.isFinite(s)) return "—";
  if (s < 1) return s === 0 ? "0 s" : "< 1 s";
  if (s < 60) return `${Math.round(s)} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** "3 min ago" or "in 3 min" for an ISO 8601 string. */
export function relative(iso, now = Date.now()) {
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  const seconds = (t - now) / 1000;
  if (Math.abs(seconds) < 5) return "just now";
  return seconds < 0 ? `${duration(-seconds)} ago` : `in ${duration(seconds)}`;
}

/** A <time> element: relative text, the absolute time as its title; "—" for null. */
export function when(iso) {
  if (iso === null || iso === undefined) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: absolute(iso) }, relative(iso));
}

/** A <time> element showing the absolute time, the relative one as its title. */
export function at(iso) {
  if (iso === null || iso === undefined) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: relative(iso) }, absolute(iso));
}

/** The first line of a text, cut to max characters. */
export function firstLine(text, max = 120) {
  const line = String(text ?? "").split("\n").find((l) => l.trim()) ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** Text cut to max characters. */
export function clip(text, max = 60) {
  const s = String(text ?? "");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
