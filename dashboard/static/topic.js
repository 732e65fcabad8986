// Topic page: route, queue offsets, consumer groups, a test message, deletion.
"use strict";
(async function () {
  const { api, guarded, table, el, link, kv, fmtTime, param, showNotice, brokerPicker } = mq;
  const topic = param("topic");
  document.getElementById("topic-name").textContent = topic;
  const enc = encodeURIComponent(topic);

  async function load() {
    const d = await guarded(() => api("GET", "/api/topic?topic=" + enc));
    if (!d) return;
    kv(document.getElementById("summary"), [
      ["Messages stored", String(d.totalMessages)], ["Queues", String(d.queues.length)],
      ["Consumer groups", String(d.consumerGroups.length)],
      ["Links", el("span", {}, link("/messages?mode=time&topic=" + enc, "search messages"), " · ", link("/charts?topic=" + enc, "chart"))],
    ]);
    table(document.getElementById("route"), [
      { key: "brokerName", title: "Broker" }, { key: "cluster", title: "Cluster" },
      { key: "addresses", title: "Addresses", render: (r) => Object.entries(r.addresses).map(([id, a]) => `${id}: ${a}`).join(", ") },
      { key: "readQueueNums", title: "Read queues", num: true },
      { key: "writeQueueNums", title: "Write queues", num: true },
      { key: "permText", title: "Perm" },
    ], d.route, { name: "route" });
    table(document.getElementById("queues"), [
      { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true },
      { key: "minOffset", title: "Min offset", num: true }, { key: "maxOffset", title: "Max offset", num: true },
      { key: "lastUpdateTimestamp", title: "Last stored", render: (r) => fmtTime(r.lastUpdateTimestamp) },
    ], d.queues, { name: "queues", sortKey: "queueId" });
    table(document.getElementById("consumers"), [
      { key: "group", title: "Group", render: (r) => link("/group?group=" + encodeURIComponent(r.group), r.group) },
      { key: "diffTotal", title: "Diff total", num: true },
      { key: "consumeTps", title: "TPS", num: true },
      { key: "error", title: "", render: (r) => (r.error ? el("span", { class: "err" }, r.error) : "") },
    ], d.consumers, { name: "consumers" });
  }

  // The config of each broker holding the topic; "edit" fills the update form with that broker's and picks it
  // alone, as rocketmq-dashboard's update dialog has one form per broker.
  const form = document.getElementById("update-topic");
  const cluster = await guarded(() => api("GET", "/api/cluster"));
  const picker = brokerPicker(document.getElementById("update-targets"), (cluster && cluster.clusters) || {}, []);

  // Selects ``value``, adding it as an option when the select does not list it (a perm such as 7, inherit and RW,
  // rocketmq-dashboard's default; a type such as MIXED): an update then sends it back rather than nothing (perm 0).
  function choose(select, value, text) {
    let option = [...select.options].find((o) => o.value === value);
    if (!option) select.add((option = new Option(text, value)));
    select.value = option.value;
  }

  function fill(c) {
    for (const k of ["readQueueNums", "writeQueueNums"]) form.elements[k].value = String(c[k]);
    choose(form.elements.perm, String(c.perm), `${c.permText} (${c.perm})`);
    form.elements.order.value = String(Boolean(c.order));
    // the broker's own type; a topic without one shows UNSPECIFIED (rocketmq-dashboard's examineTopicConfig) and is
    // sent blank, which leaves it untyped rather than writing NORMAL
    const type = c.messageType || "UNSPECIFIED";
    choose(form.elements.messageType, type === "UNSPECIFIED" ? "" : type, type);
  }

  let holders = [];  // the brokers holding the topic, as its config table lists them

  async function loadConfigs() {
    const d = await guarded(() => api("GET", "/api/topic/config?topic=" + enc));
    if (!d) return;
    holders = d.brokers.map((c) => c.brokerName);
    const held = d.brokers.filter((c) => !c.error);
    table(document.getElementById("configs"), [
      { key: "brokerName", title: "Broker" }, { key: "cluster", title: "Cluster" }, { key: "address", title: "Address" },
      { key: "readQueueNums", title: "Read queues", num: true }, { key: "writeQueueNums", title: "Write queues", num: true },
      { key: "permText", title: "Perm" }, { key: "order", title: "Order", render: (c) => (c.error ? "" : c.order ? "yes" : "no") }, { key: "messageType", title: "Type" },
      { key: "error", title: "", render: (c) => (c.error ? el("span", { class: "err" }, c.error)
          : el("button", { type: "button", class: "small secondary", "data-edit": c.brokerName, onclick: () => { fill(c); picker.set([c.brokerName]); } }, "edit")) },
    ], d.brokers, { name: "configs" });
    if (held.length) fill(held[0]);
    picker.set(d.brokers.map((c) => c.brokerName));
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const base = {
      topic, readQueueNums: Number(f.get("readQueueNums")), writeQueueNums: Number(f.get("writeQueueNums")),
      perm: Number(f.get("perm")), order: f.get("order") === "true", clusterNameList: [],
    };
    // The type is read-only: the brokers holding the topic are sent none, so each keeps its own (the broker keeps an
    // attribute an update does not name, common/src/main/java/org/apache/rocketmq/common/attribute/AttributeUtil.java
    // alterCurrentAttributes), as rocketmq-dashboard's update dialog has a form per broker sending that broker's type
    // (frontend-new/src/components/topic/TopicSingleModifyForm.jsx); a broker picked that lacks it gets the type shown.
    const clusters = (cluster && cluster.clusters) || {};
    const picked = [...new Set([...picker.brokerNameList(), ...picker.clusterNameList().flatMap((n) => clusters[n] || [])])];
    const newcomers = picked.filter((b) => !holders.includes(b));
    const writes = [];
    if (!picked.length || newcomers.length < picked.length) {
      writes.push({ ...base, messageType: "", brokerNameList: picked.filter((b) => holders.includes(b)) });
    }
    if (newcomers.length) writes.push({ ...base, messageType: form.elements.messageType.value, brokerNameList: newcomers });
    const names = [];
    for (const body of writes) {
      const done = await guarded(() => api("POST", "/api/topics", body));
      if (!done) return;
      names.push(...done.brokerNames);
    }
    showNotice(`Topic ${topic} updated on ${names.sort().join(", ")}`);
    await load();
    await loadConfigs();
  });

  document.getElementById("send").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const message = { topic, body: f.get("body"), tags: f.get("tags"), keys: f.get("keys"), traceEnabled: f.get("traceEnabled") === "on" };
    const r = await guarded(() => api("POST", "/api/topic/message", message));
    if (!r) return;
    kv(document.getElementById("sent"), [["Status", r.sendStatus], ["Message id", link(`/message?topic=${enc}&id=${encodeURIComponent(r.msgId)}`, r.msgId)],
      ["Offset message id", r.offsetMsgId], ["Queue", `${r.brokerName} / ${r.queueId} @ ${r.queueOffset}`]]);
    await load();
  });

  document.getElementById("delete").addEventListener("click", async () => {
    if (!window.confirm(`Delete topic ${topic} from every broker and the name servers?`)) return;
    const r = await guarded(() => api("DELETE", "/api/topic?topic=" + enc));
    if (r) { showNotice(`Topic ${topic} deleted.`); setTimeout(() => { location = "/topics"; }, 800); }
  });
  await load();
  await loadConfigs();
})();
