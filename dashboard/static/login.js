// Login page: the dashboard's own users (users file), then back to the page asked for.
"use strict";
document.getElementById("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const r = await mq.guarded(() => mq.api("POST", "/api/login", { username: f.get("username"), password: f.get("password") }));
  if (!r) return;
  const next = mq.param("next");
  // Only a path of this site: not "//host" nor "/\host", which a browser reads as another site.
  window.location = /^\/(?![\/\\])/.test(next) ? next : "/cluster";
});
