// Topics page: the list (filter, sort, kind tabs), creating a topic.
"use strict";
(async function () {
  const { api, guarded, table, kindTabs, el, link, showNotice, brokerPicker } = mq;
  let shown = "NORMAL";
  let listed = null; // the topics as last listed (a Set)
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
    if (data) listed = new Set(data.topics.map((t) => t.topic));
    if (data) kindTabs(document.getElementById("kinds"), ["NORMAL", "RETRY", "DLQ", "SYSTEM"], data.topics, draw, shown);
  }

  const cluster = await guarded(() => api("GET", "/api/cluster"));
  const clusters = (cluster && cluster.clusters) || {};
  const picker = brokerPicker(document.getElementById("create-targets"), clusters, []);

  document.getElementById("create-topic").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const body = {
      topic: f.get("topic").trim(), readQueueNums: Number(f.get("readQueueNums")),
      writeQueueNums: Number(f.get("writeQueueNums")), perm: Number(f.get("perm")), order: f.get("order") === "true",
      messageType: f.get("messageType"), clusterNameList: picker.clusterNameList(), brokerNameList: picker.brokerNameList(),
    };
    // A new topic with nothing picked goes to every cluster and broker, as rocketmq-dashboard's create dialog fills
    // them in (frontend-new/src/components/topic/TopicSingleModifyForm.jsx, handleFormSubmit): only its API refuses
    // none. A listed topic with none picked stays on the brokers holding it (before the list is read, the API decides).
    if (!body.clusterNameList.length && !body.brokerNameList.length && listed && !listed.has(body.topic)) {
      body.clusterNameList = Object.keys(clusters).filter((c) => c);
      body.brokerNameList = Object.values(clusters).flat();
    }
    const done = await guarded(() => api("POST", "/api/topics", body));
    if (done) { showNotice(`Topic ${body.topic} created or updated on ${done.brokerNames.join(", ")} (${done.brokers.join(", ")})`); await load(); }
  });
  await load();
})();
