// Message page: summary, body (text or hex), properties, consume state per group with resend, trace.
"use strict";
(async function () {
  const { api, guarded, table, kv, fmtTime, param, el, showNotice } = mq;
  const id = param("id"), topic = param("topic");
  document.getElementById("msg-id").textContent = id;
  const d = await guarded(() => api("GET", `/api/message?topic=${encodeURIComponent(topic)}&id=${encodeURIComponent(id)}`));
  if (!d) return;
  kv(document.getElementById("summary"), [
    ["Topic", d.topic], ["Message id", d.msgId], ["Offset message id", d.offsetMsgId], ["Tags", d.tags || "-"],
    ["Keys", d.keys || "-"], ["Queue", `${d.queueId} @ ${d.queueOffset}`], ["Born", `${fmtTime(d.bornTimestamp)} from ${d.bornHost}`],
    ["Stored", `${fmtTime(d.storeTimestamp)} on ${d.storeHost}`], ["Reconsumed", String(d.reconsumeTimes)],
    ["Body size", `${d.body.length} B`],
  ]);
  const bodyBox = document.getElementById("body");
  let hex = d.body.encoding === "hex";
  const toggle = document.getElementById("toggle-hex");
  function drawBody() {
    bodyBox.textContent = hex ? d.body.hex : d.body.text;
    document.getElementById("body-kind").textContent = hex ? "(hex)" : "(text)";
    toggle.textContent = hex ? "Show text" : "Show hex";
  }
  toggle.addEventListener("click", () => { hex = !hex; drawBody(); });
  drawBody();
  table(document.getElementById("properties"), [{ key: "key", title: "Property" }, { key: "value", title: "Value" }],
    Object.entries(d.properties).map(([key, value]) => ({ key, value })), { name: "properties" });

  async function resend(group) {
    if (!window.confirm(`Hand this message to a consumer of ${group} once more?`)) return;
    const r = await guarded(() => api("POST", "/api/message/resend", { group, offsetMsgId: d.offsetMsgId }));
    if (r) showNotice(`Consumer ${r.clientId} answered ${r.consumeResult || JSON.stringify(r)}${r.remark ? ": " + r.remark : ""}`);
  }
  table(document.getElementById("consumers"), [
    { key: "group", title: "Group" },
    { key: "state", title: "State", render: (r) => el("span", { class: "tag " + r.state }, r.state) },
    { key: "consumerOffset", title: "Group offset in queue", num: true },
    { key: "error", title: "Detail" },
    { key: "resend", title: "", render: (r) => el("button", { type: "button", class: "secondary", onclick: () => resend(r.group) }, "Resend") },
  ], d.consumers, { name: "consumers" });

  // The trace from the default trace topics, or from the one typed (rocketmq-dashboard's traceTopic).
  const traceForm = document.getElementById("trace-form");
  traceForm.elements.traceTopic.value = param("traceTopic") || "";
  traceForm.addEventListener("submit", (ev) => { ev.preventDefault(); mq.clearBanner(); drawTrace(); });
  await drawTrace();

  async function drawTrace() {
    const traceTopic = traceForm.elements.traceTopic.value.trim();
    const q = `/api/message/trace?id=${encodeURIComponent(d.msgId)}&traceTopic=${encodeURIComponent(traceTopic)}`;
    const t = await guarded(() => api("GET", q));
    const box = document.getElementById("trace");
    if (!t) return;
    if (!t.available) { box.replaceChildren(el("p", { class: "muted" }, "No trace: " + t.reason)); return; }
    if (!t.records.length) { box.replaceChildren(el("p", { class: "muted" }, "No trace recorded for this message.")); return; }
    table(box, [
      { key: "type", title: "Type" }, { key: "group", title: "Group" }, { key: "clientHost", title: "Client" },
      { key: "timestamp", title: "Time", render: (r) => fmtTime(r.timestamp) }, { key: "costTime", title: "Cost (ms)", num: true },
      { key: "status", title: "Status" }, { key: "msgType", title: "Message type" },
      { key: "retryTimes", title: "Retries", num: true }, { key: "transactionState", title: "Transaction" },
      { key: "transactionId", title: "Transaction id" },
    ], t.records, { name: "trace", sortKey: "timestamp" });
  }
})();
