// Consumer groups page: every group (NORMAL, FIFO or SYSTEM tabs) with its lag (diff total), TPS, connections and versions.
"use strict";
(async function () {
  const { api, guarded, table, kindTabs, el, link, showNotice } = mq;
  const data = await guarded(() => api("GET", "/api/groups"));
  if (!data) return;
  if (data.unreadBrokers.length) {  // their groups are missing from the list
    const names = data.unreadBrokers.map((b) => `${b.broker} (${b.address}): ${b.error}`).join("; ");
    showNotice(`Groups of brokers that did not answer are not listed: ${names}`);
  }
  kindTabs(document.getElementById("kinds"), ["NORMAL", "FIFO", "SYSTEM"], data.groups, (rows) => table(document.getElementById("groups"), [
    { key: "group", title: "Group", render: (r) => link("/group?group=" + encodeURIComponent(r.group), r.group) },
    { key: "kind", title: "Kind", render: (r) => el("span", { class: "tag" }, r.kind) },
    { key: "online", title: "Online", num: true },
    { key: "versions", title: "Client versions", value: (r) => r.versions.join(", ") },
    { key: "consumeType", title: "Type" },
    { key: "messageModel", title: "Model" },
    { key: "consumeTps", title: "TPS", num: true },
    { key: "diffTotal", title: "Diff total", num: true },
    { key: "topics", title: "Topics", value: (r) => r.topics.join(", ") },
  ], rows, { name: "groups" }));
})();
