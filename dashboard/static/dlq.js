// Dead letters page (rocketmq-dashboard's DLQ tab): a consumer group's %DLQ% messages in a store-time range, each
// selectable; the selected ones resent to an online consumer of the group (their original messages, consumed
// directly) or exported as an .xlsx workbook.
"use strict";
(async function () {
  const { api, guarded, table, link, fmtTime, param, el, showNotice, showError, clearBanner } = mq;
  const form = document.getElementById("search");
  const actions = document.getElementById("actions");
  const toLocal = (ms) => new Date(ms - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 19);
  form.begin.value = toLocal(Date.now() - 3 * 3600000);
  form.end.value = toLocal(Date.now() + 60000);
  form.group.value = param("group");
  // The group the listed rows are dead letters of: resend and export act for it, whatever the form says since (a
  // search refused or failed leaves the rows listed), as rocketmq-dashboard's DLQ tab acts on its listed messages.
  let group = "";
  const selected = new Set();

  guarded(() => api("GET", "/api/groups")).then((d) => {
    if (!d) return;
    // Every group but the broker's own CID_RMQ_SYS_ ones, as rocketmq-dashboard's DLQ page
    // (frontend-new/src/pages/DlqMessage/dlqmessage.jsx, SYS_GROUP_TOPIC_PREFIX).
    const names = d.groups.map((g) => g.group).filter((g) => !g.startsWith("CID_RMQ_SYS_"));
    document.getElementById("group-list").replaceChildren(...names.map((g) => el("option", { value: g })));
  });

  function checkbox(row) {
    const box = el("input", { type: "checkbox", "data-msg": row.msgId });
    box.checked = selected.has(row);
    box.addEventListener("change", () => { if (box.checked) selected.add(row); else selected.delete(row); });
    return box;
  }

  function show(rows) {
    selected.clear();
    actions.hidden = rows.length === 0;
    table(document.getElementById("results"), [
      { key: "pick", title: "", render: checkbox, value: () => "" },
      { key: "msgId", title: "Message id", render: (r) => link(`/message?topic=${encodeURIComponent(r.topic)}&id=${encodeURIComponent(r.offsetMsgId)}`, r.msgId) },
      { key: "originTopic", title: "Topic" }, { key: "tags", title: "Tags" }, { key: "keys", title: "Keys" },
      { key: "reconsumeTimes", title: "Reconsumed", num: true },
      { key: "storeTimestamp", title: "Stored", render: (r) => fmtTime(r.storeTimestamp) },
      { key: "bodyLength", title: "Size", num: true },
    ], rows, { name: "dlq", sortKey: "storeTimestamp", sortDir: -1 });
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearBanner();
    document.getElementById("outcome").replaceChildren();
    const wanted = form.group.value.trim();
    const begin = new Date(form.begin.value).getTime(), end = new Date(form.end.value).getTime();
    if (end < begin) { showError(new Error("The end of the range is before its beginning.")); return; }
    const d = await guarded(() => api("GET", `/api/dlq?group=${encodeURIComponent(wanted)}&begin=${begin}&end=${end}`));
    if (!d) return;
    group = wanted;
    show(d.messages);
    if (d.messages.length === 0) showNotice(`No dead letters of ${group} in this range.`);
    else if (d.truncated) showNotice(`The range holds more: only the newest ${d.messages.length} are shown.`);
  });

  function picked() {
    if (selected.size === 0) { showError(new Error("Select one or more messages first.")); return null; }
    return [...selected];
  }

  document.getElementById("resend-selected").addEventListener("click", async () => {
    const rows = picked();
    if (!rows) return;
    clearBanner();
    const d = await guarded(() => api("POST", "/api/dlq/resend", {
      group, messages: rows.map((r) => ({ originMsgId: r.originMsgId, originTopic: r.originTopic })),
    }));
    if (!d) return;
    table(document.getElementById("outcome"), [
      { key: "originMsgId", title: "Original message id" },
      { key: "consumeResult", title: "Result", render: (r) => r.consumeResult || "FAILED" },
      { key: "clientId", title: "Consumer" },
      { key: "detail", title: "Detail", render: (r) => (r.error ? r.error.message : r.remark || "") },
    ], d.results, { name: "resent" });
    const ok = d.results.filter((r) => r.consumeResult === "CR_SUCCESS").length;
    showNotice(`${ok} of ${d.results.length} consumed again by the group.`);
  });

  document.getElementById("export-selected").addEventListener("click", async () => {
    const rows = picked();
    if (!rows) return;
    // One message is rocketmq-dashboard's exportDlqMessage.do, several its batchExportDlqMessage.do (each its own
    // permission in role-permission.yml).
    const response = await fetch(rows.length === 1 ? "/api/dlq/export" : "/api/dlq/export/batch", {
      method: "POST", headers: { "Content-Type": "application/json" },
      // Each by its own offset msgId: every copy of a message (two dead letters of it, say) shares its msgId.
      body: JSON.stringify({ group, msgIds: rows.map((r) => r.offsetMsgId) }),
    });
    if (!response.ok) { await guarded(async () => { throw new Error(((await response.json()).error || {}).message || `HTTP ${response.status}`); }); return; }
    const url = URL.createObjectURL(await response.blob());
    const a = el("a", { href: url, download: rows.length === 1 ? "dlq.xlsx" : "dlqs.xlsx", id: "export-link" });
    document.body.append(a);
    a.click();
    a.remove();
    URL.revokeObjectURL(url);
  });

  if (param("group")) form.requestSubmit();
})();
