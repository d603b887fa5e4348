// The runs list: filters, pages by the protocol's cursor, and a refresh every few
// seconds of the page on screen.
import { getJson, runPath } from "./api.js";
import { el, formatCost, formatDuration, formatTime, replace, runLink, tokens } from "./dom.js";

const STATUSES = ["", "running", "paused", "completed", "failed", "cancelled"];
const KINDS = ["", "agent", "workflow", "team", "task"];
const PAGE_SIZE = 20;
const REFRESH_MS = 2000;
const ENDED = new Set(["completed", "failed", "cancelled"]);
// The cost a finished run's last event recorded, by run id: it never changes.
const costs = new Map();

export function showRuns(main, signal) {
  const filters = { status: "", kind: "", name: "" };
  const cursors = [null];
  const status = el("select", { name: "status" }, STATUSES.map((s) => el("option", { value: s }, s || "any")));
  const kind = el("select", { name: "kind" }, KINDS.map((k) => el("option", { value: k }, k || "any")));
  const name = el("input", { name: "name", placeholder: "name" });
  const body = el("tbody");
  const notice = el("p", { class: "notice", id: "runs-notice" });
  const previous = el("button", { type: "button", id: "previous-page" }, "Previous page");
  const next = el("button", { type: "button", id: "next-page" }, "Next page");
  let nextAfter = null;

  const form = el("form", { class: "filters", id: "filters" },
    el("label", {}, "Status ", status), el("label", {}, "Kind ", kind), el("label", {}, "Name ", name),
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    Object.assign(filters, { status: status.value, kind: kind.value, name: name.value.trim() });
    cursors.length = 1;
    load();
  });
  next.addEventListener("click", () => { if (nextAfter) { cursors.push(nextAfter); load(); } });
  previous.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); load(); } });

  replace(main,
    el("h1", {}, "Runs"), form,
    el("table", { id: "runs" }, el("thead", {}, el("tr", {}, ["Status", "Kind", "Name", "Run", "Started", "Duration", "Tokens", "Cost"].map((h) => el("th", {}, h)))), body),
    el("div", { class: "pager" }, previous, next), notice);

  async function load() {
    try {
      const page = await getJson("/v1/runs", { ...filters, limit: String(PAGE_SIZE), after: cursors[cursors.length - 1] });
      if (signal.aborted) return;
      nextAfter = page.next_after;
      next.disabled = !nextAfter;
      previous.disabled = cursors.length === 1;
      replace(body, page.runs.map(row));
      replace(notice, page.runs.length ? "" : "No runs match.");
      await Promise.all(page.runs.filter((r) => ENDED.has(r.status) && !costs.has(r.id)).map(fetchCost));
      if (!signal.aborted) for (const cell of body.querySelectorAll("td[data-cost-of]")) replace(cell, formatCost(costs.get(cell.dataset.costOf)));
    } catch (error) {
      if (!signal.aborted) replace(notice, el("span", { class: "error" }, `${error.code || "ERROR"}: ${error.message}`));
    }
  }

  load();
  const timer = setInterval(load, REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}

function row(run) {
  const ended = ENDED.has(run.status);
  const duration = ended ? Date.parse(run.updated_at) - Date.parse(run.created_at) : Date.now() - Date.parse(run.created_at);
  const count = tokens(run.usage);
  return el("tr", { "data-run-id": run.id },
    el("td", { class: `status status-${run.status}` }, run.status),
    el("td", {}, run.kind), el("td", {}, run.name), el("td", {}, runLink(run.id)),
    el("td", {}, formatTime(run.created_at)), el("td", {}, formatDuration(duration)),
    el("td", {}, count === null ? "" : String(count)),
    el("td", { "data-cost-of": run.id }, formatCost(costs.get(run.id))));
}

async function fetchCost(run) {
  try {
    const page = await getJson(runPath(run.id, "/events"), { order: "desc", limit: "1" });
    const last = page.events[0];
    costs.set(run.id, last && last.payload ? last.payload.cost || null : null);
  } catch {
    // The cost column stays empty; the list itself still shows.
  }
}
