// ACL page (RocketMQ 4.x ACL 1.0, rocketmq-dashboard's ACL page): whether the brokers have ACL on, the accounts of
// the first master with their topic and group permissions, the global white addresses; adding, updating and deleting
// an account or a permission, editing the white addresses. Every edit goes to every broker; the banner says what
// happened on each. Without the right to change things (a logged-in user who is not an administrator) the page only
// reads, and the secret keys are not sent.
"use strict";
(async function () {
  const { api, errorText, guarded, table, el, showNotice, showError, clearBanner, kv } = mq;
  const accountForm = document.getElementById("account-form");
  const permForm = document.getElementById("perm-form");
  const whiteForm = document.getElementById("white-form");
  const revealed = new Set(); // access keys whose secret is shown
  let data = null;
  let editing = null; // the account the form updates, null when it adds

  const where = (brokers) => brokers.map((b) => `${b.brokerName} ${b.address} ${b.done}`).join(", ");
  const button = (text, onclick, cls, attrs) => el("button", { type: "button", class: cls || "secondary", onclick, ...(attrs || {}) }, text);

  function fillPerms(perms) {
    for (const select of document.querySelectorAll("select[data-perms]")) {
      const chosen = select.value || select.dataset.perms;
      select.replaceChildren(...perms.filter((p) => p !== "SUB|PUB").map((p) => el("option", { value: p }, p)));
      select.value = chosen;
    }
  }

  function secretCell(row) {
    if (row.secretKey === null) return el("span", { class: "muted" }, "hidden");
    const shown = revealed.has(row.accessKey);
    const text = el("code", { "data-secret": row.accessKey }, shown ? row.secretKey : "••••••••");
    const toggle = button(shown ? "hide" : "show", () => {
      if (revealed.has(row.accessKey)) revealed.delete(row.accessKey); else revealed.add(row.accessKey);
      drawAccounts();
    }, "secondary small", { "data-reveal": row.accessKey });
    return el("span", { class: "nowrap" }, text, " ", toggle);
  }

  function drawAccounts() {
    const columns = [
      { key: "accessKey", title: "Access key" },
      { key: "secretKey", title: "Secret key", render: secretCell, value: () => "" },
      { key: "whiteRemoteAddress", title: "White remote address" },
      { key: "admin", title: "Admin", render: (r) => (r.admin ? "yes" : "no") },
      { key: "defaultTopicPerm", title: "Default topic perm" },
      { key: "defaultGroupPerm", title: "Default group perm" },
      { key: "topicPerms", title: "Topic perms", render: (r) => r.topicPerms.join(", "), value: (r) => r.topicPerms.join(",") },
      { key: "groupPerms", title: "Group perms", render: (r) => r.groupPerms.join(", "), value: (r) => r.groupPerms.join(",") },
    ];
    if (data.writable) {
      columns.push({ key: "actions", title: "", value: () => "", render: (r) => el("span", { class: "nowrap" },
        button("Edit", () => editAccount(r), "secondary small", { "data-edit-account": r.accessKey }), " ",
        button("Delete", () => deleteAccount(r.accessKey), "danger small", { "data-delete-account": r.accessKey })) });
    }
    table(document.getElementById("accounts"), columns, data.accounts, { name: "accounts" });
  }

  function drawPerms() {
    const rows = data.accounts.flatMap((a) => [
      ...a.topicPerms.map((e) => ({ accessKey: a.accessKey, kind: "topic", entry: e })),
      ...a.groupPerms.map((e) => ({ accessKey: a.accessKey, kind: "group", entry: e })),
    ]).map((r) => ({ ...r, resource: r.entry.split("=")[0].trim(), perm: r.entry.split("=").filter((p) => p).slice(1).join("=").trim() }));
    const columns = [
      { key: "accessKey", title: "Access key" }, { key: "kind", title: "Kind" },
      { key: "resource", title: "Topic or group" }, { key: "perm", title: "Permission" },
    ];
    if (data.writable) {
      columns.push({ key: "actions", title: "", value: () => "", render: (r) => el("span", { class: "nowrap" },
        button("Edit", () => editPerm(r), "secondary small"), " ",
        button("Delete", () => deletePerm(r), "danger small", { "data-delete-perm": `${r.accessKey}/${r.kind}/${r.resource}` })) });
    }
    table(document.getElementById("perms"), columns, rows, { name: "perms" });
    const select = permForm.accessKey;
    const chosen = select.value;
    select.replaceChildren(...data.accounts.map((a) => el("option", { value: a.accessKey }, a.accessKey)));
    if (chosen) select.value = chosen;
  }

  function drawWhite() {
    const columns = [{ key: "address", title: "Address" }];
    if (data.writable) {
      columns.push({ key: "actions", title: "", value: () => "", render: (r) =>
        button("Delete", () => deleteWhite(r.address), "danger small", { "data-delete-white": r.address }) });
    }
    table(document.getElementById("white"), columns, data.globalWhiteAddrs.map((address) => ({ address })), { name: "white" });
  }

  function drawStatus() {
    const on = data.brokers.filter((b) => b.aclEnable).length;
    const source = data.brokers.find((b) => b.address === data.source);
    kv(document.getElementById("status"), [
      ["ACL", data.aclEnabled ? `on (aclEnable) on ${on} of ${data.brokers.length} brokers`
        : data.aclEnabled === false ? "off on every broker (aclEnable=false)" : "unknown: no broker answered"],
      ["Accounts read from", source ? `${source.brokerName} ${source.address}` : "no broker"],
      ["The dashboard signs as", data.signedAs || "nobody (rocketmq.config.accessKey is not set)"],
      ["Edits", data.writable ? "go to every broker, masters and slaves" : "not allowed to this user (read only)"],
    ]);
    table(document.getElementById("brokers"), [
      { key: "brokerName", title: "Broker" }, { key: "brokerId", title: "Id", num: true },
      { key: "address", title: "Address" },
      { key: "role", title: "Role", render: (r) => el("span", { class: "tag " + r.role }, r.role) },
      { key: "aclEnable", title: "aclEnable", render: (r) => (r.aclEnable === null ? "?" : String(r.aclEnable)) },
      { key: "error", title: "", render: (r) => (r.error ? el("span", { class: "err" }, errorText(r.error)) : "") },
    ], data.brokers, { name: "acl-brokers", sortKey: "role" });
  }

  async function load() {
    const d = await guarded(() => api("GET", "/api/acl"));
    if (!d) return;
    data = d;
    fillPerms(d.perms);
    for (const panel of document.querySelectorAll("[data-edit]")) panel.hidden = !d.writable;
    drawStatus();
    drawAccounts();
    drawPerms();
    drawWhite();
    if (d.error) showError(new Error(errorText(d.error)));
    else if (d.aclEnabled === false) showNotice("ACL is off on every broker: there are no accounts to show.");
  }

  // Runs an edit and reloads, then says what happened on each broker, or shows the failure (which names them).
  async function edit(method, url, body, what) {
    clearBanner();
    let done = null, failure = null;
    try { done = await api(method, url, body); } catch (err) { failure = err; }
    await load();
    if (failure) showError(failure);
    else showNotice(`${what}: ${where(done.brokers)}.`);
    return done;
  }

  function resetAccountForm() {
    editing = null;
    accountForm.reset();
    accountForm.dataset.mode = "add";
    accountForm.accessKey.readOnly = false;
    fillPerms(data ? data.perms : []);
    accountForm.defaultTopicPerm.value = "DENY";
    accountForm.defaultGroupPerm.value = "SUB";
    document.getElementById("account-submit").textContent = "Add account";
    document.getElementById("account-cancel").hidden = true;
  }

  function editAccount(row) {
    editing = row;
    accountForm.dataset.mode = "update";
    accountForm.accessKey.value = row.accessKey;
    accountForm.accessKey.readOnly = true;
    accountForm.secretKey.value = row.secretKey || "";
    accountForm.whiteRemoteAddress.value = row.whiteRemoteAddress || "";
    accountForm.admin.value = String(row.admin);
    accountForm.defaultTopicPerm.value = row.defaultTopicPerm || "DENY";
    accountForm.defaultGroupPerm.value = row.defaultGroupPerm || "SUB";
    document.getElementById("account-submit").textContent = "Update account";
    document.getElementById("account-cancel").hidden = false;
    accountForm.scrollIntoView({ block: "center" });
  }

  accountForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(accountForm);
    const body = {
      accessKey: f.get("accessKey").trim(), secretKey: f.get("secretKey").trim(),
      whiteRemoteAddress: f.get("whiteRemoteAddress").trim(), admin: f.get("admin") === "true",
      defaultTopicPerm: f.get("defaultTopicPerm"), defaultGroupPerm: f.get("defaultGroupPerm"),
    };
    if (editing) {
      Object.assign(body, { topicPerms: editing.topicPerms, groupPerms: editing.groupPerms });
      if (await edit("POST", "/api/acl/account", body, `Account ${body.accessKey} updated`)) resetAccountForm();
    } else if (await edit("POST", "/api/acl/accounts", body, `Account ${body.accessKey} added`)) {
      resetAccountForm();
    }
  });
  document.getElementById("account-cancel").addEventListener("click", resetAccountForm);

  async function deleteAccount(accessKey) {
    if (!window.confirm(`Delete account ${accessKey} from every broker?`)) return;
    await edit("DELETE", "/api/acl/account?accessKey=" + encodeURIComponent(accessKey), undefined, `Account ${accessKey} deleted`);
  }

  function editPerm(row) {
    permForm.accessKey.value = row.accessKey;
    permForm.kind.value = row.kind;
    permForm.resource.value = row.resource;
    permForm.perm.value = row.perm;
    permForm.scrollIntoView({ block: "center" });
  }

  permForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(permForm);
    const body = { accessKey: f.get("accessKey"), kind: f.get("kind"), resource: f.get("resource").trim(), perm: f.get("perm") };
    if (!body.accessKey) { showError(new Error("Add an account first.")); return; }
    const what = `${body.kind} ${body.resource}=${body.perm} set for ${body.accessKey}`;
    if (await edit("POST", "/api/acl/permission", body, what)) permForm.resource.value = "";
  });

  async function deletePerm(row) {
    if (!window.confirm(`Delete the ${row.kind} permission ${row.entry} of ${row.accessKey} on every broker?`)) return;
    const q = new URLSearchParams({ accessKey: row.accessKey, kind: row.kind, resource: row.resource });
    await edit("DELETE", "/api/acl/permission?" + q, undefined, `${row.kind} permission ${row.resource} of ${row.accessKey} deleted`);
  }

  whiteForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const address = whiteForm.address.value.trim();
    const addresses = [...data.globalWhiteAddrs.filter((a) => a !== address), address];
    if (await edit("POST", "/api/acl/white", { addresses }, `Global white addresses set to ${addresses.join(", ")}`)) whiteForm.reset();
  });

  async function deleteWhite(address) {
    if (!window.confirm(`Delete the global white address ${address} on every broker?`)) return;
    const addresses = data.globalWhiteAddrs.filter((a) => a !== address);
    await edit("POST", "/api/acl/white", { addresses }, `Global white address ${address} deleted`);
  }

  await load();
  if (data) resetAccountForm();
})();
