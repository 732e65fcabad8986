// Messages page: search by topic and store-time range, by key, or by message id.
"use strict";
(async function () {
  const { api, guarded, table, link, fmtTime, param, el, showNotice } = mq;
  const form = document.getElementById("search");
  let mode = param("mode") || "time";
  const toLocal = (ms) => new Date(ms - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 19);
  form.begin.value = toLocal(Date.now() - 3600000);
  form.end.value = toLocal(Date.now() + 60000);
  form.topic.value = param("topic");
  form.key.value = param("key");
  form.id.value = param("id");

  // The topic names for the input's suggestions arrive on their own, without delaying the search.
  guarded(() => api("GET", "/api/topics")).then((topics) => {
    if (topics) document.getElementById("topic-list").replaceChildren(...topics.topics.map((t) => el("option", { value: t.topic })));
  });

  function setMode(m) {
    mode = m;
    for (const b of document.querySelectorAll("#modes button")) b.classList.toggle("active", b.dataset.mode === m);
    for (const l of form.querySelectorAll("label[data-for]")) l.hidden = l.dataset.for !== m;
  }
  for (const b of document.querySelectorAll("#modes button")) b.addEventListener("click", () => setMode(b.dataset.mode));
  setMode(mode);

  function show(rows) {
    table(document.getElementById("results"), [
      { key: "msgId", title: "Message id", render: (r) => link(`/message?topic=${encodeURIComponent(r.topic)}&id=${encodeURIComponent(r.msgId)}`, r.msgId) },
      { key: "tags", title: "Tags" }, { key: "keys", title: "Keys" },
      { key: "queueId", title: "Queue", num: true }, { key: "queueOffset", title: "Offset", num: true },
      { key: "storeTimestamp", title: "Stored", render: (r) => fmtTime(r.storeTimestamp) },
      { key: "bodyLength", title: "Size", num: true },
    ], rows, { name: "messages", sortKey: "storeTimestamp", sortDir: -1 });
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    mq.clearBanner();
    const topic = form.topic.value.trim();
    const t = encodeURIComponent(topic);
    if (mode === "id") {
      location = `/message?topic=${t}&id=${encodeURIComponent(form.id.value.trim())}`;
      return;
    }
    if (mode === "key") {
      const d = await guarded(() => api("GET", `/api/messages/key?topic=${t}&key=${encodeURIComponent(form.key.value.trim())}`));
      if (d) show(d.messages);
      return;
    }
    const begin = new Date(form.begin.value).getTime(), end = new Date(form.end.value).getTime();
    const d = await guarded(() => api("GET", `/api/messages/time?topic=${t}&begin=${begin}&end=${end}`));
    if (!d) return;
    show(d.messages);
    if (d.truncated) showNotice(`The range holds more: only the newest ${d.messages.length} messages are shown; narrow it to see older ones.`);
  });
  if (param("topic") && (mode !== "key" || param("key"))) form.requestSubmit();
})();
