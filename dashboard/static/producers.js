// Producers page: the producers of a group connected to a topic's brokers.
"use strict";
(async function () {
  const { api, guarded, table, param, el } = mq;
  const form = document.getElementById("query");
  // The topic names for the input's suggestions arrive on their own, without delaying the search.
  guarded(() => api("GET", "/api/topics")).then((topics) => {
    if (topics) document.getElementById("topic-list").replaceChildren(...topics.topics.map((t) => el("option", { value: t.topic })));
  });

  async function search(topic, group) {
    const q = `/api/producers?topic=${encodeURIComponent(topic)}&group=${encodeURIComponent(group)}`;
    const d = await guarded(() => api("GET", q));
    if (!d) return;
    table(document.getElementById("producers"), [
      { key: "clientId", title: "Client id" }, { key: "clientAddr", title: "Address" },
      { key: "language", title: "Language" }, { key: "version", title: "Version" },
    ], d.connections, { name: "producers" });
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    history.replaceState(null, "", `?topic=${encodeURIComponent(f.get("topic"))}&group=${encodeURIComponent(f.get("group"))}`);
    mq.clearBanner();
    search(f.get("topic"), f.get("group"));
  });
  if (param("topic") && param("group")) {
    form.topic.value = param("topic");
    form.group.value = param("group");
    await search(param("topic"), param("group"));
  }
})();
