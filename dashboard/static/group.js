// Consumer group page: progress per queue, connections, subscriptions, offset reset by time, deletion.
"use strict";
(async function () {
  const { api, guarded, table, kv, fmtTime, param, showNotice, link } = mq;
  const group = param("group");
  document.getElementById("group-name").textContent = group;
  const enc = encodeURIComponent(group);

  async function load() {
    const d = await guarded(() => api("GET", "/api/group?group=" + enc));
    if (!d) return;
    kv(document.getElementById("summary"), [
      ["Diff total", String(d.diffTotal)], ["Consume TPS", String(d.consumeTps)],
      ["Online consumers", String(d.connections.length)], ["Type", d.consumeType || "-"], ["Model", d.messageModel || "-"],
    ]);
    table(document.getElementById("queues"), [
      { key: "topic", title: "Topic", render: (r) => link("/topic?topic=" + encodeURIComponent(r.topic), r.topic) },
      { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true },
      { key: "brokerOffset", title: "Broker offset", num: true }, { key: "consumerOffset", title: "Consumer offset", num: true },
      { key: "diff", title: "Diff", num: true },
      { key: "lastTimestamp", title: "Last consumed", render: (r) => fmtTime(r.lastTimestamp) },
    ], d.queues, { name: "progress", sortKey: "topic" });
    table(document.getElementById("connections"), [
      { key: "clientId", title: "Client id" }, { key: "clientAddr", title: "Address" },
      { key: "language", title: "Language" }, { key: "version", title: "Version" },
    ], d.connections, { name: "connections" });
    table(document.getElementById("subscriptions"), [
      { key: "topic", title: "Topic" }, { key: "expression", title: "Expression" }, { key: "expressionType", title: "Type" },
    ], d.subscriptions, { name: "subscriptions" });
    const topics = [...new Set([...d.queues.map((q) => q.topic), ...d.subscriptions.map((s) => s.topic)])].sort();
    const select = document.querySelector("#reset select[name=topic]");
    select.replaceChildren(...topics.map((t) => new Option(t, t)));
  }

  const when = document.querySelector("#reset input[name=time]");
  const local = new Date(Date.now() - new Date().getTimezoneOffset() * 60000 - 3600000);
  when.value = local.toISOString().slice(0, 19);

  document.getElementById("reset").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const timestamp = new Date(f.get("time")).getTime();
    if (!window.confirm(`Reset ${group} on ${f.get("topic")} to ${fmtTime(timestamp)}? Consumers will re-read or skip messages.`)) return;
    const r = await guarded(() => api("POST", "/api/group/reset", { group, topic: f.get("topic"), timestamp }));
    if (!r) return;
    showNotice(`Offsets reset: ${r.way}.`);
    table(document.getElementById("reset-result"), [
      { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true }, { key: "offset", title: "New offset", num: true },
    ], r.offsets, { name: "reset" });
    await load();
  });

  document.getElementById("delete").addEventListener("click", async () => {
    if (!window.confirm(`Delete consumer group ${group}, its offsets and its retry and dead-letter topics on every broker?`)) return;
    const r = await guarded(() => api("DELETE", "/api/group?group=" + enc));
    if (r) { showNotice(`Group ${group} deleted.`); setTimeout(() => { location = "/groups"; }, 800); }
  });
  await load();
})();
