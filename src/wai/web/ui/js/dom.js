// DOM helpers. Every element is built with createElement and every piece of data goes in
// as a text node: nothing here parses HTML, so a job's args, errors, tags or names can only
// ever show as text. Links take internal hrefs ("#/..." built by router.href) only.

const BOOLEAN_PROPS = new Set(["disabled", "checked", "selected", "hidden", "open", "required"]);
const VALUE_PROPS = new Set(["value"]);
// The attributes the UI sets: nothing that takes code, markup or inline style.
const PLAIN_ATTRIBUTE = /^(id|for|name|type|title|placeholder|autocomplete|inputmode|role|colspan|scope|datetime|aria-[a-z]+)$/;

function safeHref(value) {
  const text = String(value);
  if (!text.startsWith("#")) {
    throw new Error(`refusing a link that is not internal: ${text.slice(0, 40)}`);
  }
  return text;
}

function setAttributes(el, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
    } else if (name === "class") {
      el.className = Array.isArray(value) ? value.filter(Boolean).join(" ") : String(value);
    } else if (name === "dataset") {
      for (const [key, v] of Object.entries(value)) el.dataset[key] = String(v);
    } else if (BOOLEAN_PROPS.has(name)) {
      el[name] = Boolean(value);
    } else if (VALUE_PROPS.has(name)) {
      el.value = String(value);
    } else if (name === "href") {
      el.setAttribute("href", safeHref(value));
    } else if (PLAIN_ATTRIBUTE.test(name)) {
      el.setAttribute(name, String(value));
    } else {
      throw new Error(`refusing the attribute ${name}`); // handlers go through "on"
    }
  }
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/** An HTML element: h("a", {href: "#/jobs", class: "x"}, "text", otherNode, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs || {});
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element, attributes set as they are (numbers and class names from the chart code). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (name.startsWith("on") || name === "style" || name === "href") {
      throw new Error(`refusing the SVG attribute ${name}`);
    }
    el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

/** An internal link. */
export function link(href, ...children) {
  return h("a", { href }, ...children);
}

/** A coloured badge for a job state (or any word with a class of its own). */
export function badge(text, kind = text) {
  return h("span", { class: ["badge", `badge-${String(kind).replace(/[^a-z_-]/g, "")}`] }, text);
}

/** A page heading with optional trailing elements (badges, actions). */
export function pageTitle(text, ...after) {
  return h("div", { class: "page-title" }, h("h1", {}, text), ...after);
}

/** A titled section. */
export function section(title, ...children) {
  return h("section", { class: "panel" }, title ? h("h2", {}, title) : null, ...children);
}

/** A table in a box of its own that scrolls sideways on a narrow screen.
 *  columns: [{label, cell: row => node|text, class}]; rows: the data. */
export function table(columns, rows, { empty = "Nothing to show.", caption = null, rowClass } = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.class }, c.label))));
  const body = h(
    "tbody",
    {},
    rows.length === 0
      ? h("tr", { class: "empty" }, h("td", { colspan: columns.length }, empty))
      : rows.map((row) =>
          h("tr", { class: rowClass ? rowClass(row) : null }, columns.map((c) => h("td", { class: c.class }, c.cell(row)))),
        ),
  );
  return h("div", { class: "table-wrap" }, h("table", {}, caption ? h("caption", {}, caption) : null, head, body));
}

/** A definition list of [label, value] pairs (values: text or nodes; null ones are skipped). */
export function fields(pairs) {
  return h(
    "dl",
    { class: "fields" },
    pairs
      .filter(([, value]) => value !== null && value !== undefined)
      .map(([label, value]) => h("div", { class: "field" }, h("dt", {}, label), h("dd", {}, value))),
  );
}

/** A small statistic card. */
export function card(label, value, { sub = null, tone = null, href = null } = {}) {
  const body = [h("div", { class: "card-label" }, label), h("div", { class: "card-value" }, value), sub ? h("div", { class: "card-sub" }, sub) : null];
  return href ? h("a", { class: ["card", tone && `tone-${tone}`], href }, body) : h("div", { class: ["card", tone && `tone-${tone}`] }, body);
}

/** Pretty-printed JSON in a <pre>, as text. */
export function jsonBlock(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/** A notice box: tone is "info", "warn" or "error". */
export function notice(tone, ...children) {
  return h("div", { class: ["notice", `notice-${tone}`], role: tone === "error" ? "alert" : null }, ...children);
}

/** A readable message for an error thrown while loading something. */
export function errorBox(what, error, retry = null) {
  const detail = error && error.status ? `HTTP ${error.status}${error.code ? ` · ${error.code}` : ""}` : null;
  return notice(
    "error",
    h("strong", {}, `Could not ${what}.`),
    " ",
    error && error.message ? error.message : String(error),
    detail ? h("span", { class: "muted" }, ` (${detail})`) : null,
    retry ? h("button", { type: "button", class: "btn btn-small", on: { click: retry } }, "Try again") : null,
  );
}

/** A button. */
export function button(label, { tone = null, small = false, disabled = false, title = null, onClick = null, type = "button" } = {}) {
  return h(
    "button",
    {
      type,
      class: ["btn", tone && `btn-${tone}`, small && "btn-small"],
      disabled,
      title,
      on: onClick ? { click: onClick } : undefined,
    },
    label,
  );
}

/** Ask for a confirmation in a modal dialog; resolves true when confirmed. */
export function confirmDialog({ title, message, confirmLabel = "Confirm", danger = false }) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "dialog", "aria-labelledby": "dialog-title" });
    const finish = (ok) => {
      if (dialog.open) dialog.close();
      dialog.remove();
      resolve(ok);
    };
    const cancel = button("Cancel", { onClick: () => finish(false) });
    const confirm = button(confirmLabel, { tone: danger ? "danger" : "primary", onClick: () => finish(true) });
    confirm.dataset.confirm = "true";
    dialog.append(
      h("h2", { id: "dialog-title" }, title),
      ...(Array.isArray(message) ? message : [message]).map((m) => h("p", {}, m)),
      h("div", { class: "dialog-actions" }, cancel, confirm),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    confirm.focus();
  });
}

let flashTimer = null;

/** A message in the flash bar under the header (success fades after a while, errors stay). */
export function flash(tone, message) {
  const bar = document.getElementById("flash");
  if (!bar) return;
  clearTimeout(flashTimer);
  const close = h("button", { type: "button", class: "flash-close", "aria-label": "Dismiss", on: { click: () => bar.replaceChildren() } }, "×");
  bar.replaceChildren(h("div", { class: ["flash-message", `flash-${tone}`], role: tone === "error" ? "alert" : null }, h("span", {}, message), close));
  if (tone !== "error") flashTimer = setTimeout(() => bar.replaceChildren(), 8000);
}

/** Clear the flash bar. */
export function clearFlash() {
  clearTimeout(flashTimer);
  document.getElementById("flash")?.replaceChildren();
}
