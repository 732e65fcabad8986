// Producers page: the producers of a group connected to a topic's brokers, and every producer online.
"use strict";
(async function () {
  const { api, guarded, table, param, el, fmtTime } = mq;
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

  async function everyProducer() {
    const d = await guarded(() => api("GET", "/api/producers/all"));
    if (!d) return;
    const pick = (group) => () => { form.group.value = group; form.group.focus(); };
    table(document.getElementById("all-producers"), [
      { key: "group", title: "Producer group", render: (r) => el("a", { href: "#query", onclick: pick(r.group) }, r.group) },
      { key: "clientId", title: "Client id" }, { key: "clientAddr", title: "Address" },
      { key: "language", title: "Language" }, { key: "version", title: "Version" },
      { key: "lastUpdateTimestamp", title: "Last heartbeat", render: (r) => fmtTime(r.lastUpdateTimestamp) },
      { key: "brokers", title: "Brokers", value: (r) => r.brokers.join(", ") },
    ], d.producers, { name: "all-producers" });
  }
  everyProducer();

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
