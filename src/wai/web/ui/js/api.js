// The client of the admin API. Its base is computed from the page's own URL, so the UI works
// wherever the app is mounted ("/", "/admin/", ...): no URL here starts with "/".

export const API_BASE = new URL("api/v1/", document.baseURI);

/** An answer that was not a success: the API's error code and message, or a network failure. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

let csrfToken = null;
const unauthorizedListeners = [];

/** The CSRF token of the signed-in session (null: signed out). */
export function setCsrf(token) {
  csrfToken = token || null;
}

/** Run fn when a mutation is refused with 401 (the session expired or was signed out). */
export function onUnauthorized(fn) {
  unauthorizedListeners.push(fn);
}

/** The URL of an API path ("jobs", "jobs/12"), with query parameters (empty ones left out). */
export function apiUrl(path, params = {}) {
  if (path.startsWith("/")) throw new Error("API paths are relative");
  const url = new URL(path, API_BASE);
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, String(value));
  }
  return url;
}

/** One path segment, encoded (a schedule name may hold "/"). */
export function segment(value) {
  return encodeURIComponent(String(value));
}

async function request(method, url, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET" && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    throw new ApiError(0, "network_error", "the server did not answer (is wai serve running?)");
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    const message = error.message || `the server answered ${response.status} ${response.statusText}`.trim();
    const failure = new ApiError(response.status, error.code || "http_error", message);
    if (response.status === 401 && method !== "GET") unauthorizedListeners.forEach((fn) => fn(failure));
    throw failure;
  }
  if (data === null) throw new ApiError(response.status, "bad_answer", "the server answered something that is not JSON");
  return data;
}

/** GET an API path. */
export function get(path, params = {}) {
  return request("GET", apiUrl(path, params));
}

/** POST to an API path, with a JSON body (an empty object when none is given). */
export function post(path, body = {}) {
  return request("POST", apiUrl(path), body);
}

/** DELETE an API path. */
export function del(path) {
  return request("DELETE", apiUrl(path));
}

/** Every page of a listing, up to maxItems items: {items, complete}. */
export async function collect(path, params, cursorOf, maxPages = 10) {
  const items = [];
  let cursor = {};
  for (let page = 0; page < maxPages; page += 1) {
    const data = await get(path, { ...params, ...cursor, limit: 1000 });
    items.push(...data.items);
    const next = cursorOf(data);
    if (next === null) return { items, complete: true };
    cursor = next;
  }
  return { items, complete: false };
}
