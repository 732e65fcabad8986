// Login page: the dashboard's own users (users file), then back to the page asked for.
"use strict";

// Where to go after logging in: "next" as the browser's URL parser reads it (which drops tabs and newlines and takes
// "//host" or "/\host" as another site), followed only when it stays on this origin.
function sameOriginPath(next) {
  if (!next) return "/cluster";
  let url;
  try { url = new URL(next, location.origin); } catch (_) { return "/cluster"; }
  return url.origin === location.origin ? url.pathname + url.search + url.hash : "/cluster";
}

document.getElementById("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const r = await mq.guarded(() => mq.api("POST", "/api/login", { username: f.get("username"), password: f.get("password") }));
  if (!r) return;
  window.location = sameOriginPath(mq.param("next"));
});
