// Ops page: the name servers the dashboard knows, the one in use (switched at run time), adding one; TLS and the VIP
// channel on or off.
"use strict";
(async function () {
  const { api, guarded, table, el, showNotice } = mq;
  let shown = null;

  function draw(d) {
    const rows = d.namesvrAddrList.map((addr) => ({ addr, current: addr === d.currentNamesrv }));
    table(document.getElementById("namesrvs"), [
      { key: "addr", title: "Name servers" },
      { key: "current", title: "", render: (r) => (r.current ? el("span", { class: "tag MASTER" }, "in use")
          : el("button", { type: "button", class: "small", "data-use": r.addr, onclick: () => use(r.addr) }, "use")) },
    ], rows, { name: "namesrvs" });
    document.querySelector("#tls input[name=useTLS]").checked = d.useTLS;
    document.querySelector("#tls input[name=useVIPChannel]").checked = d.useVIPChannel;
    for (const meta of document.querySelectorAll("header .meta .namesrv")) meta.textContent = d.currentNamesrv;
    shown = d;
  }

  async function use(addr) {
    const d = await guarded(() => api("POST", "/api/ops/namesrv", { nameSvrAddrList: addr }));
    if (d) { showNotice(`The dashboard now reads the cluster through ${d.currentNamesrv}.`); draw(d); }
  }

  document.getElementById("add-namesrv").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const addr = new FormData(ev.target).get("newNamesrvAddr").trim();
    const d = await guarded(() => api("POST", "/api/ops/namesrv/add", { newNamesrvAddr: addr }));
    if (d) { showNotice(`${addr} added to the list.`); ev.target.reset(); draw(d); }
  });

  document.getElementById("tls").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const tls = ev.target.elements.useTLS.checked, vip = ev.target.elements.useVIPChannel.checked;
    let d = shown;
    if (d && vip !== d.useVIPChannel) d = await guarded(() => api("POST", "/api/ops/vip", { useVIPChannel: vip }));
    if (d && tls !== d.useTLS) d = await guarded(() => api("POST", "/api/ops/tls", { useTLS: tls }));
    if (d) {
      showNotice(`TLS ${d.useTLS ? "on" : "off"}, VIP channel ${d.useVIPChannel ? "on" : "off"} from the next request.`);
      draw(d);
    }
  });

  const d = await guarded(() => api("GET", "/api/ops"));
  if (d) draw(d);
})();
