// Topics page: the list (filter, sort, kind tabs), creating a topic.
"use strict";
(async function () {
  const { api, guarded, table, kindTabs, el, link, showNotice, brokerPicker } = mq;
  let shown = "NORMAL";
  const box = document.getElementById("topics");

  function draw(rows, kind) {
    shown = kind;
    table(box, [
      { key: "topic", title: "Topic", render: (r) => link("/topic?topic=" + encodeURIComponent(r.topic), r.topic) },
      { key: "kind", title: "Kind", render: (r) => el("span", { class: "tag" }, r.kind) },
      { key: "actions", title: "", render: (r) => el("span", {},
          link("/messages?mode=time&topic=" + encodeURIComponent(r.topic), "messages"), " · ",
          link("/charts?topic=" + encodeURIComponent(r.topic), "chart")) },
    ], rows, { name: "topics" });
  }

  async function load() {
    const data = await guarded(() => api("GET", "/api/topics"));
    if (data) kindTabs(document.getElementById("kinds"), ["NORMAL", "RETRY", "DLQ", "SYSTEM"], data.topics, draw, shown);
  }

  const cluster = await guarded(() => api("GET", "/api/cluster"));
  const picker = brokerPicker(document.getElementById("create-targets"), (cluster && cluster.clusters) || {}, []);

  document.getElementById("create-topic").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const body = {
      topic: f.get("topic").trim(), readQueueNums: Number(f.get("readQueueNums")),
      writeQueueNums: Number(f.get("writeQueueNums")), perm: Number(f.get("perm")), order: f.get("order") === "true",
      messageType: f.get("messageType"), clusterNameList: picker.clusterNameList(), brokerNameList: picker.brokerNameList(),
    };
    const done = await guarded(() => api("POST", "/api/topics", body));
    if (done) { showNotice(`Topic ${body.topic} created or updated on ${done.brokerNames.join(", ")} (${done.brokers.join(", ")})`); await load(); }
  });
  await load();
})();
