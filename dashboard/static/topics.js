// Topics page: the list (filter, sort, kind tabs), creating a topic.
"use strict";
(async function () {
  const { api, guarded, table, el, link, showNotice } = mq;
  let all = [];
  let shown = "NORMAL";
  const box = document.getElementById("topics");

  function draw() {
    const rows = shown === "ALL" ? all : all.filter((t) => t.kind === shown);
    table(box, [
      { key: "topic", title: "Topic", render: (r) => link("/topic?topic=" + encodeURIComponent(r.topic), r.topic) },
      { key: "kind", title: "Kind", render: (r) => el("span", { class: "tag" }, r.kind) },
      { key: "actions", title: "", render: (r) => el("span", {},
          link("/messages?mode=time&topic=" + encodeURIComponent(r.topic), "messages"), " · ",
          link("/charts?topic=" + encodeURIComponent(r.topic), "chart")) },
    ], rows, { name: "topics" });
    for (const b of document.querySelectorAll("#kinds button")) b.classList.toggle("active", b.dataset.kind === shown);
  }

  async function load() {
    const data = await guarded(() => api("GET", "/api/topics"));
    if (!data) return;
    all = data.topics;
    const kinds = document.getElementById("kinds");
    kinds.replaceChildren();
    for (const kind of ["NORMAL", "RETRY", "DLQ", "SYSTEM", "ALL"]) {
      const n = kind === "ALL" ? all.length : all.filter((t) => t.kind === kind).length;
      const b = el("button", { type: "button", class: "secondary", "data-kind": kind }, `${kind} (${n})`);
      b.addEventListener("click", () => { shown = kind; draw(); });
      kinds.append(b);
    }
    draw();
  }

  document.getElementById("create-topic").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const body = {
      topic: f.get("topic").trim(), readQueueNums: Number(f.get("readQueueNums")),
      writeQueueNums: Number(f.get("writeQueueNums")), perm: Number(f.get("perm")), order: f.get("order") === "true",
    };
    const done = await guarded(() => api("POST", "/api/topics", body));
    if (done) { showNotice(`Topic ${body.topic} created on ${done.brokers.join(", ")}`); await load(); }
  });
  await load();
})();
