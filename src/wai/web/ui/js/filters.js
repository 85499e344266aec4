// The filter forms of the list pages: their buttons, and a submit that puts the non-empty
// values in the page's URL (the page is drawn again from there).

import { button, h } from "./dom.js";
import { navigate } from "./router.js";

/** Apply and Clear; Clear goes back to the page with no filter. */
export function filterButtons(page) {
  return h(
    "div",
    { class: "form-buttons" },
    button("Apply", { type: "submit", tone: "primary", small: true }),
    button("Clear", { small: true, onClick: () => navigate(page) }),
  );
}

/** On submit, go to `page` with the form's non-empty `names` (and the current limit). */
export function submitFilters(form, page, names, filters) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const params = {};
    for (const name of names) {
      const value = String(data.get(name) || "").trim();
      if (value) params[name] = value;
    }
    if (filters.limit) params.limit = filters.limit;
    navigate(page, params);
  });
}
