// The web UI of wai's admin API: the pages, the session control, the router.

import * as callbacks from "./callbacks.js";
import * as cron from "./cron.js";
import * as dashboard from "./dashboard.js";
import * as dlq from "./dlq.js";
import { flash } from "./dom.js";
import * as instances from "./instances.js";
import * as job from "./job.js";
import * as jobs from "./jobs.js";
import * as outbox from "./outbox.js";
import * as queues from "./queues.js";
import { refresh, route, start } from "./router.js";
import { loadSession, onSessionChange, renderSessionControl } from "./session.js";

route("", "dashboard", dashboard.render, "Dashboard");
route("queues", "queues", queues.render, "Queues");
route("jobs", "jobs", jobs.render, "Jobs");
route("jobs/:id", "jobs", job.render, "Job");
route("callbacks", "callbacks", callbacks.render, "Callbacks");
route("dlq", "dlq", dlq.render, "Dead letters");
route("dlq/:id", "dlq", dlq.render, "Dead letter");
route("cron", "cron", cron.render, "Cron");
route("instances", "instances", instances.render, "Instances");
route("outbox", "outbox", outbox.render, "Outbox");

window.addEventListener("unhandledrejection", (event) => {
  const reason = event.reason;
  flash("error", `Something went wrong: ${reason && reason.message ? reason.message : String(reason)}`);
});

const sessionBox = document.getElementById("session");
let started = false;
onSessionChange(() => {
  renderSessionControl(sessionBox);
  if (started) refresh(); // buttons follow the session: enabled, or disabled with the reason
});

await loadSession();
started = true;
start(document.getElementById("main"));
