// Buttons that change something: disabled with the reason while the API is read-only or the
// browser is signed out; each asks for a confirmation, then says what happened.

import { button, confirmDialog, flash, notice } from "./dom.js";
import { canMutate, whyDisabled } from "./session.js";

/** A notice saying why actions are disabled, or null when they are enabled. */
export function actionsNotice() {
  const why = whyDisabled();
  return why ? notice("info", why) : null;
}

/** A button for an action, disabled (with the reason as its title) when actions are. */
export function guardedButton(label, { tone = null, small = true, applicable = true, notApplicable = null } = {}) {
  const allowed = canMutate();
  const btn = button(label, {
    tone,
    small,
    disabled: !allowed || !applicable,
    title: !allowed ? whyDisabled() : !applicable ? notApplicable : null,
  });
  btn.dataset.action = label.toLowerCase();
  return btn;
}

/** A confirmed action button.
 *  confirm: {title, message, confirmLabel}; run(): the API call; done(result): the message;
 *  after(result): what then (default: draw the page again). */
export function actionButton(label, { ctx, confirm, run, done, after = null, tone = null, small = true, applicable = true, notApplicable = null }) {
  const btn = guardedButton(label, { tone, small, applicable, notApplicable });
  btn.addEventListener("click", async () => {
    const ok = await confirmDialog({ title: confirm.title, message: confirm.message, confirmLabel: confirm.confirmLabel || label, danger: tone === "danger" });
    if (!ok) return;
    btn.disabled = true;
    try {
      const result = await run();
      flash("success", done(result));
      if (after) after(result);
      else ctx.refresh();
    } catch (error) {
      const why = error.status === 401 ? "you are signed out (the session expired or was ended elsewhere): sign in again" : error.message;
      flash("error", `${label} failed: ${why}`);
      btn.disabled = !canMutate();
    }
  });
  return btn;
}
