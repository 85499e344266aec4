// Keyset paging: the API gives the cursor of the next page; going back needs the cursors
// of the pages before, kept here as a stack per listing (a deep link starts a new one).

import { button, h } from "./dom.js";
import { navigate } from "./router.js";

const trails = new Map();

/** The position of a page in its listing, and the buttons to move.
 *  key: the listing and its filters; path and params: its hash; cursorParam: the hash
 *  parameter of the cursor; cursor: this page's (null: the first page); next: the next
 *  page's (null: this is the last page). */
export function pager({ key, path, params, cursorParam, cursor, next }) {
  let trail = trails.get(key);
  if (!trail || !trail.includes(cursor)) {
    trail = cursor === null ? [null] : [null, cursor]; // a deep link: "newer" goes to the first page
    trails.set(key, trail);
  }
  const index = trail.indexOf(cursor);
  const go = (target) => navigate(path, { ...params, [cursorParam]: target });
  const newer = button("← Newer", {
    small: true,
    disabled: index === 0,
    onClick: () => go(trail[index - 1]),
  });
  newer.dataset.pager = "previous";
  const older = button("Older →", {
    small: true,
    disabled: next === null,
    onClick: () => {
      trail.splice(index + 1, trail.length, next); // the stack: what is above this page, then next
      go(next);
    },
  });
  older.dataset.pager = "next";
  return h("div", { class: "pager" }, newer, h("span", { class: "pager-page" }, `Page ${index + 1}`), older);
}
