// Charts page: put and get TPS per broker and per topic over a day the dashboard sampled (uPlot); the date picker
// reads a past day's files (rocketmq-dashboard's DatePicker and ?date=).
"use strict";
(async function () {
  const { api, guarded, el, table, param, link } = mq;
  const charts = [];
  const picker = document.getElementById("chart-date");
  const dated = (url) => url + (url.includes("?") ? "&" : "?") + "date=" + encodeURIComponent(picker.value);
  function remember(topicName) {
    const query = new URLSearchParams({ date: picker.value });
    if (topicName) query.set("topic", topicName);
    history.replaceState(null, "", "?" + query);
  }

  function draw(box, title, series) {
    const holder = el("div", { class: "chart", "data-chart": title });
    holder.append(el("h3", {}, title));
    box.append(holder);
    const data = [series.t.map((t) => t / 1000), series.put, series.get];
    const opts = {
      width: Math.max(420, Math.floor((box.clientWidth - 20) / 2)), height: 220,
      series: [{}, { label: "put TPS", stroke: "#2f6fdf", width: 2 }, { label: "get TPS", stroke: "#1e8e3e", width: 2 }],
      axes: [{}, { label: "msg/s" }],
      scales: { x: { time: true } },
    };
    charts.push(new uPlot(opts, data, holder));
    holder.dataset.points = String(series.t.length);
  }

  async function brokers() {
    const d = await guarded(() => api("GET", dated("/api/charts/brokers")));
    if (!d) return;
    picker.max = d.today;
    if (!picker.value) picker.value = d.date;
    document.getElementById("sampling").textContent = d.collecting
      ? `Sampled by the dashboard every ${d.interval} s (${d.samples} samples since it started), kept in a file per day.`
      : "The dashboard does not sample the charts (rocketmq.config.enableDashBoardCollect=false).";
    const box = document.getElementById("broker-charts");
    box.replaceChildren();
    const names = Object.keys(d.series);
    if (!names.length) box.append(el("p", { class: "muted" }, `No sample on ${d.date}.`));
    for (const name of names) draw(box, "Broker " + name, d.series[name]);
  }

  async function topic(name) {
    const d = await guarded(() => api("GET", dated("/api/charts/topics?topic=" + encodeURIComponent(name))));
    if (!d) return;
    const select = document.getElementById("topic-select");
    select.replaceChildren(...d.topics.map((t) => new Option(t, t)));
    select.value = name;
    const box = document.getElementById("topic-charts");
    box.replaceChildren();
    if (d.series) draw(box, "Topic " + name, d.series);
    else box.append(el("p", { class: "muted" }, name ? `No sample of ${name} yet (a topic needs two samples).` : "Pick a topic."));
    table(document.getElementById("busiest"), [
      { key: "topic", title: "Topic", render: (r) => link(dated("/charts?topic=" + encodeURIComponent(r.topic)), r.topic) },
      { key: "put", title: "Put TPS", num: true }, { key: "get", title: "Get TPS", num: true },
    ], d.busiest, { name: "busiest", sortKey: "put", sortDir: -1 });
    return d;
  }

  async function show(topicName) {
    charts.splice(0).forEach((chart) => chart.destroy());
    await brokers();
    const first = await guarded(() => api("GET", dated("/api/charts/topics")));
    const chosen = topicName || (first && first.busiest.length ? first.busiest[0].topic : (first && first.topics[0]) || "");
    await topic(chosen);
  }

  const select = document.getElementById("topic-select");
  select.addEventListener("change", () => { remember(select.value); topic(select.value); });
  picker.addEventListener("change", () => { remember(param("topic")); show(param("topic")); });
  picker.value = param("date");
  await show(param("topic"));
})();
