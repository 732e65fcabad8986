// Cluster page: every broker with its role, address, version, rates, disk use and replication state.
"use strict";
(async function () {
  const { api, guarded, table, el, kv } = mq;
  const pct = (r) => (r === null || r === undefined ? "" : (r * 100).toFixed(1) + " %");

  async function showBroker(addr) {
    const d = await guarded(() => api("GET", "/api/broker?addr=" + encodeURIComponent(addr)));
    if (!d) return;
    const title = document.getElementById("detail-title");
    title.hidden = false;
    title.textContent = "Broker " + addr;
    const box = document.getElementById("detail");
    const runtime = el("div"), config = el("div");
    box.replaceChildren(el("h3", {}, "Runtime"), runtime, el("h3", {}, "Settings"), config);
    const rows = (o) => Object.entries(o).map(([k, v]) => ({ key: k, value: v }));
    table(runtime, [{ key: "key", title: "Key" }, { key: "value", title: "Value" }], rows(d.runtime), { name: "runtime" });
    table(config, [{ key: "key", title: "Property" }, { key: "value", title: "Value" }], rows(d.config), { name: "config" });
  }

  const data = await guarded(() => api("GET", "/api/cluster"));
  if (!data) return;
  table(document.getElementById("brokers"), [
    { key: "cluster", title: "Cluster" },
    { key: "brokerName", title: "Broker" },
    { key: "brokerId", title: "Id", num: true },
    { key: "role", title: "Role", render: (r) => el("span", { class: "tag " + r.role }, r.role) },
    { key: "address", title: "Address", render: (r) => el("a", { href: "#detail", onclick: () => showBroker(r.address) }, r.address) },
    { key: "version", title: "Version" },
    { key: "putTps", title: "Put TPS", num: true },
    { key: "getTps", title: "Get TPS", num: true },
    { key: "msgPutToday", title: "Put today", num: true },
    { key: "msgGetToday", title: "Got today", num: true },
    { key: "msgPutYesterday", title: "Put yesterday", num: true },
    { key: "msgGetYesterday", title: "Got yesterday", num: true },
    { key: "diskRatio", title: "Disk used", num: true, render: (r) => pct(r.diskRatio) },
    { key: "replication", title: "Replication", render: (r) => r.error ? el("span", { class: "err" }, r.error) : r.replication },
  ], data.brokers, { name: "brokers" });
})();
