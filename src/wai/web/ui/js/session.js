// The browser's session with the admin API: read-only or not, signed in or not, and the
// header control to sign in with the admin token and out again.

import { del, get, onUnauthorized, post, setCsrf } from "./api.js";
import { button, flash, h } from "./dom.js";

const state = { loaded: false, read_only: true, signed_in: false, error: null };
const listeners = [];

function update(data) {
  state.loaded = true;
  state.read_only = Boolean(data.read_only);
  state.signed_in = Boolean(data.signed_in);
  setCsrf(data.signed_in ? data.csrf : null);
  listeners.forEach((fn) => fn());
}

/** Call fn after each change of the session. */
export function onSessionChange(fn) {
  listeners.push(fn);
}

/** Ask the API whether it is read-only and this browser signed in. */
export async function loadSession() {
  try {
    update(await get("session"));
    state.error = null;
  } catch (error) {
    state.loaded = true;
    state.error = error;
    listeners.forEach((fn) => fn());
  }
}

/** Whether mutations can be sent now. */
export function canMutate() {
  return state.loaded && !state.read_only && state.signed_in;
}

/** Why mutations are disabled, for a tooltip or a notice (null when they are not). */
export function whyDisabled() {
  if (canMutate()) return null;
  if (!state.loaded) return "Checking the session…";
  if (state.error) return "The session could not be checked: actions are disabled.";
  if (state.read_only) return "This admin API is read-only: actions are disabled. Start it with a token (wai serve --token-env NAME) to enable them.";
  return "Sign in with the admin token to use actions.";
}

onUnauthorized(() => {
  if (state.signed_in) {
    update({ read_only: state.read_only, signed_in: false });
    flash("error", "Your session has expired: sign in again.");
  }
});

async function signIn(input, errorLine) {
  const token = input.value;
  if (!token) {
    errorLine.textContent = "Enter the admin token.";
    return;
  }
  try {
    update(await post("session", { token }));
    input.value = "";
    flash("success", "Signed in: actions are enabled.");
  } catch (error) {
    errorLine.textContent = error.status === 401 ? "Wrong token." : error.message;
    input.select();
  }
}

async function signOut() {
  try {
    update(await del("session"));
    flash("success", "Signed out.");
  } catch (error) {
    flash("error", `Could not sign out: ${error.message}`);
  }
}

/** Draw the header's session control into container. */
export function renderSessionControl(container) {
  if (!state.loaded) {
    container.replaceChildren();
  } else if (state.error) {
    container.replaceChildren(h("span", { class: "pill pill-warn", title: state.error.message }, "Session unknown"));
  } else if (state.read_only) {
    container.replaceChildren(h("span", { class: "pill", title: whyDisabled() }, "Read-only"));
  } else if (state.signed_in) {
    container.replaceChildren(
      h("span", { class: "pill pill-ok" }, "Signed in"),
      button("Sign out", { small: true, onClick: signOut }),
    );
  } else {
    const input = h("input", {
      type: "password",
      name: "token",
      placeholder: "Admin token",
      autocomplete: "current-password",
      "aria-label": "Admin token",
      required: true,
    });
    const errorLine = h("span", { class: "signin-error", role: "alert" });
    // A username field password managers (and Chromium's form checks) expect; never sent.
    const user = h("input", { type: "text", name: "username", autocomplete: "username", value: "admin", hidden: true });
    const form = h(
      "form",
      { class: "signin", on: { submit: (event) => { event.preventDefault(); signIn(input, errorLine); } } },
      user,
      input,
      button("Sign in", { type: "submit", small: true, tone: "primary" }),
      errorLine,
    );
    container.replaceChildren(form);
  }
}
