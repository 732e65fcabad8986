// mqdashboard's shared front end: JSON calls with the broker's error shown in the banner, sortable and filterable
// tables, formatting. Each page script (static/<page>.js) builds on `window.mq`. No build step, no dependency.
"use strict";

(function () {
  const banner = () => document.getElementById("banner");

  function showError(err) {
    const b = banner();
    b.className = "banner error";
    b.textContent = err && err.message ? err.message : String(err);
  }

  function showNotice(text) {
    const b = banner();
    b.className = "banner notice";
    b.textContent = text;
  }

  function clearBanner() {
    banner().className = "banner";
    banner().textContent = "";
  }

  // The banner's text for an endpoint's error body: a broker's refusal as its code and remark (and, for an edit over
  // several brokers, what happened on each), else the message.
  function errorText(e, status) {
    if (e.code === undefined) return e.message || ("HTTP " + status);
    const text = "The broker refused (code " + e.code + "): " + (e.remark || "") + (e.address ? " [" + e.address + "]" : "");
    return e.detail ? text + "\n" + e.detail : text;
  }

  // One JSON call. A non-2xx answer throws an Error whose message is the server's (the broker's code and remark).
  async function api(method, url, body) {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(url, init);
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      if (response.status === 401 && location.pathname !== "/login") { window.location = "/login?next=" + encodeURIComponent(location.pathname + location.search); }
      throw new Error(errorText((data && data.error) || {}, response.status));
    }
    return data;
  }

  // Runs an async page action, showing its error in the banner instead of failing silently.
  async function guarded(action) {
    try { return await action(); } catch (err) { showError(err); return undefined; }
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "onclick") node.addEventListener("click", v);
      else if (v !== undefined && v !== null) node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c === undefined || c === null ? "" : String(c)));
    return node;
  }

  function link(href, text) { return el("a", { href }, text); }

  function fmtTime(ms) {
    if (!ms || ms <= 0) return "";
    const d = new Date(ms);
    const p = (n, w = 2) => String(n).padStart(w, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }

  function param(name) { return new URLSearchParams(location.search).get(name) || ""; }

  // A table that sorts on a header click and filters on any cell's text.
  // columns: [{key, title, num, render(row) -> Node|string, value(row) -> sortable}]
  function table(container, columns, rows, options = {}) {
    container.replaceChildren();
    const state = { key: options.sortKey || (columns[0] && columns[0].key), dir: options.sortDir || 1, filter: "" };
    const filterInput = el("input", { type: "search", placeholder: "Filter", "data-role": "filter" });
    const count = el("span", { class: "count" });
    const tools = el("div", { class: "table-tools" }, filterInput, count);
    const tbl = el("table", { "data-table": options.name || "" });
    const thead = el("thead");
    const tbody = el("tbody");
    tbl.append(thead, tbody);
    container.append(tools, tbl);
    const valueOf = (c, r) => (c.value ? c.value(r) : r[c.key]);
    const textOf = (c, r) => {
      const v = c.render ? c.render(r) : valueOf(c, r);
      return v instanceof Node ? v.textContent : String(v === undefined || v === null ? "" : v);
    };

    function draw() {
      const headRow = el("tr");
      for (const c of columns) {
        const th = el("th", { class: (c.num ? "num " : "") + (state.key === c.key ? (state.dir > 0 ? "sorted-asc" : "sorted-desc") : ""), "data-key": c.key }, c.title);
        th.addEventListener("click", () => { state.dir = state.key === c.key ? -state.dir : 1; state.key = c.key; draw(); });
        headRow.append(th);
      }
      thead.replaceChildren(headRow);
      const needle = state.filter.toLowerCase();
      const col = columns.find((c) => c.key === state.key) || columns[0];
      const shown = rows.filter((r) => !needle || columns.some((c) => textOf(c, r).toLowerCase().includes(needle)));
      shown.sort((a, b) => {
        const x = valueOf(col, a), y = valueOf(col, b);
        if (typeof x === "number" && typeof y === "number") return (x - y) * state.dir;
        return String(x === undefined || x === null ? "" : x).localeCompare(String(y === undefined || y === null ? "" : y)) * state.dir;
      });
      const limit = options.limit || 2000;
      const body = document.createDocumentFragment();
      for (const r of shown.slice(0, limit)) {
        const tr = el("tr");
        for (const c of columns) {
          const v = c.render ? c.render(r) : valueOf(c, r);
          tr.append(el("td", { class: c.num ? "num" : "" }, v));
        }
        body.append(tr);
      }
      tbody.replaceChildren(body);
      count.textContent = `${shown.length} of ${rows.length}` + (shown.length > limit ? ` (first ${limit} shown)` : "");
    }

    filterInput.addEventListener("input", () => { state.filter = filterInput.value; draw(); });
    draw();
    return { redraw: draw, setFilter: (v) => { filterInput.value = v; state.filter = v; draw(); } };
  }

  // Tabs over the kinds of a list's rows ("NORMAL (5)", ..., "ALL (n)"), each row having a `kind`. A click, and the
  // start with `initial`, calls draw(rowsOfThatKind, kind).
  function kindTabs(container, kinds, rows, draw, initial) {
    function pick(kind) {
      for (const b of container.querySelectorAll("button")) b.classList.toggle("active", b.dataset.kind === kind);
      draw(kind === "ALL" ? rows : rows.filter((r) => r.kind === kind), kind);
    }
    container.replaceChildren(...[...kinds, "ALL"].map((kind) => {
      const n = kind === "ALL" ? rows.length : rows.filter((r) => r.kind === kind).length;
      const b = el("button", { type: "button", class: "secondary", "data-kind": kind }, `${kind} (${n})`);
      b.addEventListener("click", () => pick(kind));
      return b;
    }));
    pick(initial || kinds[0]);
  }

  function kv(container, entries) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of entries) dl.append(el("dt", {}, k), el("dd", {}, v));
    container.replaceChildren(dl);
  }

  // Checkboxes picking clusters and brokers, as rocketmq-dashboard's create-or-update dialogs: one per cluster
  // (name clusterNameList) and one per broker under it (name brokerNameList). clusters: {cluster: [broker...]};
  // checked: the broker names checked at first. Returns {clusterNameList, brokerNameList, set(brokerNames)}.
  function brokerPicker(container, clusters, checked) {
    const box = (name, value, label) => el("label", { class: "pick" },
      el("input", { type: "checkbox", name, value }), " " + label);
    // A cluster named "" lists its brokers without a cluster box.
    container.replaceChildren(...Object.entries(clusters).map(([cluster, brokers]) => el("div", { class: "picks" },
      ...(cluster ? [box("clusterNameList", cluster, `cluster ${cluster}:`)] : []), ...brokers.map((b) => box("brokerNameList", b, b)))));
    const picked = (name) => [...container.querySelectorAll(`input[name=${name}]:checked`)].map((i) => i.value);
    const set = (brokers) => {
      for (const i of container.querySelectorAll("input")) i.checked = i.name === "brokerNameList" && brokers.includes(i.value);
    };
    set(checked || []);
    return { clusterNameList: () => picked("clusterNameList"), brokerNameList: () => picked("brokerNameList"), set };
  }

  async function logout() {
    await guarded(() => api("POST", "/api/logout"));
    window.location = "/login";
  }

  window.mq = { api, errorText, guarded, showError, showNotice, clearBanner, el, link, fmtTime, param, table, kindTabs, kv, brokerPicker, logout };
})();
