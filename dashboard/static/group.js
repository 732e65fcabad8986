// Consumer group page: progress per queue (with the client holding it), connections (each client's running info and
// stacks), subscriptions, offset reset by time or to the end (skipping the backlog), deletion.
"use strict";
(async function () {
  const { api, guarded, table, kv, fmtTime, param, showNotice, link, el, brokerPicker } = mq;
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
      { key: "clientInfo", title: "Client" },
      { key: "brokerOffset", title: "Broker offset", num: true }, { key: "consumerOffset", title: "Consumer offset", num: true },
      { key: "diff", title: "Diff", num: true },
      { key: "lastTimestamp", title: "Last consumed", render: (r) => fmtTime(r.lastTimestamp) },
    ], d.queues, { name: "progress", sortKey: "topic" });
    table(document.getElementById("connections"), [
      { key: "clientId", title: "Client id" }, { key: "clientAddr", title: "Address" },
      { key: "language", title: "Language" }, { key: "version", title: "Version" },
      { key: "actions", title: "", render: (r) => el("span", {},
          el("button", { type: "button", class: "small secondary", "data-running": r.clientId, onclick: () => running(r.clientId, false) }, "running info"), " ",
          el("button", { type: "button", class: "small secondary", "data-stacks": r.clientId, onclick: () => running(r.clientId, true) }, "stacks")) },
    ], d.connections, { name: "connections" });
    table(document.getElementById("subscriptions"), [
      { key: "topic", title: "Topic" }, { key: "expression", title: "Expression" }, { key: "expressionType", title: "Type" },
    ], d.subscriptions, { name: "subscriptions" });
    const topics = [...new Set([...d.queues.map((q) => q.topic), ...d.subscriptions.map((s) => s.topic)])].sort();
    const select = document.querySelector("#reset select[name=topic]");
    select.replaceChildren(...topics.map((t) => new Option(t, t)));
  }

  // One client's ConsumerRunningInfo, with its thread stacks when `jstack` (rocketmq-dashboard's
  // consumerRunningInfo.query), as mqadmin consumerStatus prints it.
  async function running(clientId, jstack) {
    const shown = document.getElementById("running-info");
    const q = `/api/group/client?group=${enc}&clientId=${encodeURIComponent(clientId)}&jstack=${jstack}`;
    const r = await guarded(() => api("GET", q));
    if (!r) return;
    shown.textContent = `Client ${r.clientId}\n\n${r.text}`;
    shown.hidden = false;
  }

  const when = document.querySelector("#reset input[name=time]");
  const local = new Date(Date.now() - new Date().getTimezoneOffset() * 60000 - 3600000);
  when.value = local.toISOString().slice(0, 19);

  // A reset of the group on the form's topic to `timestamp` (-1: its end, rocketmq-dashboard's "skip message
  // accumulate"), once confirmed with `question`.
  async function reset(timestamp, question) {
    const topic = new FormData(document.getElementById("reset")).get("topic");
    if (!window.confirm(question(topic))) return;
    const r = await guarded(() => api("POST", "/api/group/reset", { group, topic, timestamp }));
    if (!r) return;
    showNotice(`Offsets reset: ${r.way}.`);
    table(document.getElementById("reset-result"), [
      { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true }, { key: "offset", title: "New offset", num: true },
    ], r.offsets, { name: "reset" });
    await load();
  }

  document.getElementById("reset").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const timestamp = new Date(new FormData(ev.target).get("time")).getTime();
    await reset(timestamp, (topic) => `Reset ${group} on ${topic} to ${fmtTime(timestamp)}? Consumers will re-read or skip messages.`);
  });
  document.getElementById("skip").addEventListener("click", () =>
    reset(-1, (topic) => `Skip every message of ${topic} that ${group} has not consumed yet? Its offsets move to the end.`));

  // The group's SubscriptionGroupConfig on each broker having it (rocketmq-dashboard's consumer config dialog);
  // "edit" fills the form with one broker's and picks that broker alone.
  const FLAGS = ["consumeEnable", "consumeMessageOrderly", "consumeBroadcastEnable", "consumeFromMinEnable"];
  const NUMBERS = ["retryQueueNums", "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly"];
  const form = document.getElementById("update-group");
  const cluster = await guarded(() => api("GET", "/api/cluster"));
  const picker = brokerPicker(document.getElementById("update-targets"), (cluster && cluster.clusters) || {}, []);
  const yes = (v) => (v ? "yes" : "no");

  function fill(c) {
    for (const k of FLAGS) form.elements[k].value = String(Boolean(c[k]));
    for (const k of NUMBERS) form.elements[k].value = String(c[k]);
  }
  fill({ consumeEnable: true, consumeMessageOrderly: false, consumeBroadcastEnable: true, consumeFromMinEnable: true, retryQueueNums: 1,
         retryMaxTimes: 16, brokerId: 0, whichBrokerWhenConsumeSlowly: 1 });  // SubscriptionGroupConfig's defaults

  async function loadConfigs() {
    const d = await guarded(() => api("GET", "/api/group/config?group=" + enc));
    if (!d) return;
    const c = (r, k) => (r.config ? r.config[k] : "");
    table(document.getElementById("configs"), [
      { key: "brokerName", title: "Broker" }, { key: "cluster", title: "Cluster" }, { key: "address", title: "Address" },
      { key: "consumeEnable", title: "Consume", render: (r) => (r.config ? yes(r.config.consumeEnable) : "") },
      { key: "consumeBroadcastEnable", title: "Broadcast", render: (r) => (r.config ? yes(r.config.consumeBroadcastEnable) : "") },
      { key: "consumeFromMinEnable", title: "From min", render: (r) => (r.config ? yes(r.config.consumeFromMinEnable) : "") },
      { key: "retryQueueNums", title: "Retry queues", num: true, value: (r) => c(r, "retryQueueNums") },
      { key: "retryMaxTimes", title: "Retry max", num: true, value: (r) => c(r, "retryMaxTimes") },
      { key: "brokerId", title: "Broker id", num: true, value: (r) => c(r, "brokerId") },
      { key: "whichBrokerWhenConsumeSlowly", title: "When slow", num: true, value: (r) => c(r, "whichBrokerWhenConsumeSlowly") },
      { key: "consumeMessageOrderly", title: "Orderly", render: (r) => (r.config ? yes(r.config.consumeMessageOrderly) : "") },
      { key: "error", title: "", render: (r) => (r.error ? el("span", { class: "err" }, r.error)
          : el("button", { type: "button", class: "small secondary", "data-edit": r.brokerName, onclick: () => { fill(r.config); picker.set([r.brokerName]); } }, "edit")) },
    ], d.brokers, { name: "configs" });
    const having = d.brokers.filter((r) => r.config);
    if (having.length) fill(having[0].config);
    picker.set(having.map((r) => r.brokerName));
    const names = having.map((r) => r.brokerName);
    const del = brokerPicker(document.getElementById("delete-targets"), names.length ? { "": names } : {}, names);
    document.getElementById("delete-on").onsubmit = async (ev) => {
      ev.preventDefault();
      const brokerNameList = del.brokerNameList();
      if (!window.confirm(`Delete consumer group ${group} with its offsets, retry and dead-letter topics on ${brokerNameList.join(", ") || "no broker"}?`)) return;
      const r = await guarded(() => api("POST", "/api/group/delete", { groupName: group, brokerNameList }));
      if (!r) return;
      showNotice(`Group ${group} deleted on ${r.brokerNames.join(", ")}` + (r.namesrvCleaned ? " and its retry and dead-letter topics from the name servers." : "."));
      await loadConfigs();
    };
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const config = { groupName: group };
    for (const k of FLAGS) config[k] = f.get(k) === "true";
    for (const k of NUMBERS) config[k] = Number(f.get(k));
    const body = { subscriptionGroupConfig: config, clusterNameList: picker.clusterNameList(), brokerNameList: picker.brokerNameList() };
    const done = await guarded(() => api("POST", "/api/group/config", body));
    if (!done) return;
    showNotice(`Group ${group} created or updated on ${done.brokerNames.join(", ")}`);
    await loadConfigs();
  });

  document.getElementById("delete").addEventListener("click", async () => {
    if (!window.confirm(`Delete consumer group ${group}, its offsets and its retry and dead-letter topics on every broker?`)) return;
    const r = await guarded(() => api("DELETE", "/api/group?group=" + enc));
    if (r) { showNotice(`Group ${group} deleted.`); setTimeout(() => { location = "/groups"; }, 800); }
  });
  await load();
  await loadConfigs();
})();
