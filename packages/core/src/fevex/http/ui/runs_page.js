// The runs list: filters, pages by the protocol's cursor, and a refresh every few
// seconds of the page on screen. By default only root runs are listed, each with its
// child runs nested under it (expandable), and its tokens and cost are its tree's: the
// totals of the server's view, which adds up every model step of the run and its
// descendants once.
import { getJson, runPath } from "./api.js";
import { el, formatCost, formatDuration, formatTime, replace, runLink, tokens } from "./dom.js";

const STATUSES = ["", "running", "paused", "completed", "failed", "cancelled"];
const KINDS = ["", "agent", "workflow", "team", "task"];
const PAGE_SIZE = 20;
// With "roots only", a page of the store holds children too: read more to fill it.
const ROOT_SCAN = 100;
const MAX_DEPTH = 4;
const REFRESH_MS = 2000;
const ENDED = new Set(["completed", "failed", "cancelled"]);
// The totals of a finished tree and its children, by run id: they never change.
const finished = new Map();
const collapsed = new Set();

export function showRuns(main, signal) {
  const filters = { status: "", kind: "", name: "" };
  let rootsOnly = true;
  const cursors = [null];
  const status = el("select", { name: "status" }, STATUSES.map((s) => el("option", { value: s }, s || "any")));
  const kind = el("select", { name: "kind" }, KINDS.map((k) => el("option", { value: k }, k || "any")));
  const name = el("input", { name: "name", placeholder: "name" });
  const roots = el("input", { type: "checkbox", name: "roots", id: "roots-only", checked: true });
  const body = el("tbody");
  const notice = el("p", { class: "notice", id: "runs-notice" });
  const previous = el("button", { type: "button", id: "previous-page" }, "Previous page");
  const next = el("button", { type: "button", id: "next-page" }, "Next page");
  let nextAfter = null;
  // Loads overlap (the refresh timer, a new filter); only the latest one may draw the list.
  let latest = 0;

  const form = el("form", { class: "filters", id: "filters" },
    el("label", {}, "Status ", status), el("label", {}, "Kind ", kind), el("label", {}, "Name ", name),
    el("label", {}, roots, " roots only"),
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    Object.assign(filters, { status: status.value, kind: kind.value, name: name.value.trim() });
    rootsOnly = roots.checked;
    cursors.length = 1;
    load();
  });
  roots.addEventListener("change", () => form.requestSubmit());
  next.addEventListener("click", () => { if (nextAfter) { cursors.push(nextAfter); load(); } });
  previous.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); load(); } });

  replace(main,
    el("h1", {}, "Runs"), form,
    el("table", { id: "runs" }, el("thead", {}, el("tr", {}, ["Status", "Kind", "Name", "Run", "Parent", "Started", "Duration", "Tokens", "Cost"].map((h) => el("th", {}, h)))), body),
    el("div", { class: "pager" }, previous, next), notice);

  async function load() {
    const mine = ++latest;
    const stale = () => signal.aborted || mine !== latest;
    try {
      const limit = rootsOnly ? ROOT_SCAN : PAGE_SIZE;
      const page = await getJson("/v1/runs", { ...filters, limit: String(limit), after: cursors[cursors.length - 1] });
      if (stale()) return;
      let listed = page.runs;
      let after = page.next_after;
      if (rootsOnly) {
        const shown = [];
        for (const run of page.runs) {
          if (shown.length === PAGE_SIZE) break;
          if (!run.parent_run_id) shown.push(run);
        }
        if (shown.length === PAGE_SIZE) after = shown[shown.length - 1].id;
        listed = shown;
      }
      const rows = [];
      for (const run of listed) rows.push(...(await tree(run, rootsOnly ? 0 : null)));
      if (stale()) return;
      nextAfter = after;
      next.disabled = !nextAfter;
      previous.disabled = cursors.length === 1;
      replace(body, rows);
      replace(notice, listed.length ? "" : "No runs match.");
    } catch (error) {
      if (!stale()) replace(notice, el("span", { class: "error" }, `${error.code || "ERROR"}: ${error.message}`));
    }
  }

  // A run's row and, in the tree, its children's rows under it (oldest first).
  async function tree(run, depth) {
    const totals = await totalsOf(run);
    const own = row(run, depth, totals);
    if (depth === null || depth >= MAX_DEPTH || !totals || totals.runs < 2) return [own];
    const children = await childrenOf(run);
    own.querySelector("button.toggle").hidden = !children.length;
    const rows = [own];
    if (!collapsed.has(run.id)) for (const child of children) rows.push(...(await tree(child, depth + 1)));
    return rows;
  }

  function row(run, depth, totals) {
    const ended = ENDED.has(run.status);
    // A paused run's clock stopped at its pause, as an ended run's did at its end.
    const stopped = ended || run.status === "paused";
    const duration = (stopped ? Date.parse(run.updated_at) : Date.now()) - Date.parse(run.created_at);
    const count = totals ? tokens(totals.usage) : tokens(run.usage);
    const toggle = el("button", { type: "button", class: "toggle", hidden: true, "aria-expanded": String(!collapsed.has(run.id)), title: "Show or hide its child runs",
      onclick: () => { if (collapsed.has(run.id)) collapsed.delete(run.id); else collapsed.add(run.id); load(); } }, collapsed.has(run.id) ? "▸" : "▾");
    return el("tr", { "data-run-id": run.id, "data-depth": depth === null ? "" : depth, class: depth ? "child" : "" },
      el("td", { class: `status status-${run.status}` }, run.status),
      el("td", {}, run.kind), el("td", {}, run.name),
      el("td", { class: "run-cell" }, depth ? el("span", { class: `indent depth-${Math.min(depth, MAX_DEPTH)}` }, "↳") : null, depth === null ? null : toggle, runLink(run.id)),
      el("td", { class: "parent" }, run.parent_run_id ? runLink(run.parent_run_id) : ""),
      el("td", {}, formatTime(run.created_at)), el("td", {}, formatDuration(duration)),
      el("td", { "data-tokens-of": run.id, title: totals && totals.runs > 1 ? `with its ${totals.runs - 1} descendant runs` : null }, count === null ? "" : String(count)),
      el("td", { "data-cost-of": run.id }, totals ? formatCost(totals.cost) : ""));
  }

  load();
  const timer = setInterval(load, REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}

async function totalsOf(run) {
  const known = finished.get(run.id);
  if (known) return known.totals;
  try {
    const view = await getJson(runPath(run.id, "/view"));
    if (ENDED.has(run.status)) finished.set(run.id, { totals: view.totals, children: null });
    return view.totals;
  } catch {
    return null; // the tokens and cost cells stay empty; the list itself still shows
  }
}

async function childrenOf(run) {
  const known = finished.get(run.id);
  if (known && known.children) return known.children;
  const page = await getJson("/v1/runs", { parent_run_id: run.id, limit: String(ROOT_SCAN) });
  const children = page.runs.slice().reverse();
  if (known && children.every((c) => ENDED.has(c.status))) known.children = children;
  return children;
}
