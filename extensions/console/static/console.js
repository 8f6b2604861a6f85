// The console's pages: live regions refreshed in place, charts, and actions
// posted as JSON with the session's CSRF token. Text from Redis only ever
// reaches the page escaped by the server's templates, or through textContent.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]')?.content || "";
const refreshSeconds = parseFloat(
  document.querySelector('meta[name="refresh-seconds"]')?.content || "3");

function flash(message, isError) {
  const box = document.getElementById("flash");
  if (!box) return;
  box.textContent = message;
  box.className = isError ? "error" : "ok";
  box.hidden = false;
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await response.json(); } catch (e) { data = {error: await response.text()}; }
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function describe(result) {
  return Object.entries(result)
    .filter(([, v]) => v !== null && !(Array.isArray(v) && v.length === 0))
    .map(([k, v]) => `${k.replace(/_/g, " ")}: ${Array.isArray(v) ? v.length : v}`)
    .join(", ");
}

async function refreshLive() {
  const live = document.getElementById("live");
  if (!live || !live.innerHTML.trim()) return;
  const url = new URL(window.location.href);
  url.searchParams.set("partial", "1");
  try {
    const response = await fetch(url, {credentials: "same-origin"});
    if (!response.ok) return;
    // the server's template escaped every value: this is our own markup
    live.innerHTML = await response.text();
    const stamp = document.getElementById("updated");
    if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) { /* the next refresh tries again */ }
}

const charts = new Map();

async function drawChart(box) {
  let data;
  try {
    const response = await fetch(box.dataset.series, {credentials: "same-origin"});
    if (!response.ok) return;
    data = await response.json();
  } catch (e) { return; }
  const columns = [data.minutes, data.pages, data.items, data.errors];
  const old = charts.get(box);
  if (old) { old.setData(columns); return; }
  const total = [data.pages, data.items, data.errors]
    .reduce((sum, column) => sum + (column || []).reduce((a, b) => a + b, 0), 0);
  if (!total) {
    // an empty frame says nothing: say why, and draw once there is a minute to show
    box.textContent = "no data yet: nodes add a point a minute while they crawl";
    box.classList.add("empty");
    return;
  }
  box.textContent = "";
  box.classList.remove("empty");
  const options = {
    width: Math.max(box.clientWidth, 300), height: 220,
    scales: {x: {time: true}},
    series: [
      {},
      {label: "pages/min", stroke: "#1f6feb", width: 2},
      {label: "items/min", stroke: "#2da44e", width: 2},
      {label: "errors/min", stroke: "#cf222e", width: 2},
    ],
  };
  charts.set(box, new uPlot(options, columns, box));
}

function selectedIds() {
  return [...document.querySelectorAll('table.dlq input[name="id"]:checked')].map(b => b.value);
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-action], button[data-bulk]");
  if (!button) {
    if (event.target.id === "select-all") {
      document.querySelectorAll('table.dlq input[name="id"]')
        .forEach(b => { b.checked = event.target.checked; });
    }
    return;
  }
  event.preventDefault();
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  try {
    let result;
    if (button.dataset.action) {
      result = await post(button.dataset.action, {});
      flash(`${button.textContent.trim()}: done${result.removed ? `, ${result.removed} queued requests removed` : ""}`);
      await refreshLive();
    } else {
      const endpoint = button.closest("[data-endpoint]").dataset.endpoint + "/" + button.dataset.bulk;
      let body;
      if (button.dataset.all) {
        const form = new FormData(document.getElementById("dlq-filter"));
        body = {all: true, filter: {reason: form.get("reason"), host: form.get("host"), q: form.get("q")}};
      } else {
        const ids = selectedIds();
        if (!ids.length) { flash("tick the dead letters first", true); return; }
        body = {ids};
      }
      result = await post(endpoint, body);
      flash(describe(result));
      setTimeout(() => window.location.reload(), 1500);
    }
  } catch (e) {
    flash(`refused: ${e.message}`, true);
  }
});

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (form.id !== "scope") return;
  event.preventDefault();
  const data = new FormData(form);
  const body = {crawl: data.get("crawl") || "", clear: data.get("clear") === "on"};
  for (const name of ["exclude", "include"]) {
    const value = String(data.get(name) || "").trim();
    body[name] = value ? [value] : [];
  }
  const assignment = String(data.get("set") || "").trim();
  if (assignment) {
    const at = assignment.indexOf("=");
    body.set = {[assignment.slice(0, at < 0 ? assignment.length : at)]: at < 0 ? "" : assignment.slice(at + 1)};
  }
  try {
    const result = await post(form.dataset.endpoint, body);
    flash(`scope ${result.scope ? JSON.stringify(result.scope) : "removed"}; ` +
          `${result.removed} queued requests removed`);
    setTimeout(() => window.location.reload(), 1500);
  } catch (e) {
    flash(`refused: ${e.message}`, true);
  }
});

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (form.id !== "seed") return;
  event.preventDefault();
  const data = new FormData(form);
  const urls = String(data.get("urls") || "").split("\n").map(s => s.trim()).filter(Boolean);
  const body = {urls, crawl: data.get("crawl") || ""};
  const scopeText = String(data.get("scope") || "").trim();
  if (scopeText) body.scope = scopeText;
  try {
    const result = await post(form.dataset.endpoint, body);
    const refused = result.refused.map(r => `${r.entry}: ${r.reason}`).join("; ");
    flash(`pushed ${result.pushed} start URLs` + (refused ? `; refused ${refused}` : ""),
          result.refused.length > 0);
    form.reset();
    await refreshLive();
  } catch (e) {
    flash(`refused: ${e.message}`, true);
  }
});

document.querySelectorAll(".chart[data-series]").forEach(box => {
  drawChart(box);
  setInterval(() => drawChart(box), 30000);
});
if (document.querySelector("#live")) {
  setInterval(refreshLive, Math.max(refreshSeconds, 0.5) * 1000);
}
