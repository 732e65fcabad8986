// Proxy page: the proxy addresses the dashboard knows, the current one (picked here), adding one
// (rocketmq-dashboard's ProxyController).
"use strict";
(async function () {
  const { api, guarded, table, el, showNotice } = mq;

  function draw(d) {
    const addrs = d.currentProxyAddr && !d.proxyAddrList.includes(d.currentProxyAddr)
      ? [...d.proxyAddrList, d.currentProxyAddr] : d.proxyAddrList;
    const rows = addrs.map((addr) => ({ addr, current: addr === d.currentProxyAddr }));
    table(document.getElementById("proxies"), [
      { key: "addr", title: "Proxies" },
      { key: "current", title: "", render: (r) => (r.current ? el("span", { class: "tag MASTER" }, "current")
          : el("button", { type: "button", class: "small", "data-use": r.addr, onclick: () => use(r.addr) }, "use")) },
    ], rows, { name: "proxies" });
  }

  async function use(addr) {
    const d = await guarded(() => api("POST", "/api/proxy/current", { proxyAddr: addr }));
    if (d) { showNotice(`${d.currentProxyAddr} is now the current proxy.`); draw(d); }
  }

  document.getElementById("add-proxy").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const addr = new FormData(ev.target).get("newProxyAddr").trim();
    const d = await guarded(() => api("POST", "/api/proxy/add", { newProxyAddr: addr }));
    if (d) { showNotice(`${addr} added to the list.`); ev.target.reset(); draw(d); }
  });

  const d = await guarded(() => api("GET", "/api/proxy"));
  if (d) draw(d);
})();
