// One run: its input first, its summary (a duration that stops at a pause), pending
// approvals, cancel, what it waits for in words, output or error, parent and child runs,
// the step list of a workflow or team, the conversation, the tokens-and-cost chart, the
// trace waterfall of its tree, the four layers and the live timeline. The layers, the
// spans and the totals are the server's view (GET /v1/runs/{id}/view), read again as
// the run goes on; the page computes none of them.
import { followRun, getJson, postJson, runPath } from "./api.js";
import { stepChart } from "./chart.js";
import { el, formatAfter, formatCost, formatDuration, formatTime, json, replace, runLink, tokens } from "./dom.js";
import { conversation, describeWait, renderLayer, stepTable, steps } from "./run_parts.js";
import { waterfall } from "./waterfall.js";

// What a person typed into a pending input's answer, by input id.
const inputDrafts = new Map();

const LAYERS = ["stream", "state", "messages", "turn"];
const ENDED = new Set(["completed", "failed", "cancelled"]);
const COMPOSED = new Set(["workflow", "team", "task"]);
const LIVE_VIEW_MS = 1000;

export function showRun(main, runId, signal, focusSequence = null) {
  const events = [];
  let run = null;
  let view = null;
  let children = [];
  let layer = "stream";
  let selected = focusSequence;
  const input = el("div", { id: "input-box" });
  const summary = el("dl", { id: "summary" });
  const controls = el("div", { id: "controls" });
  const waiting = el("div", { id: "waiting-box" });
  const outcome = el("div", { id: "outcome" });
  const family = el("div", { id: "family" });
  const stepBox = el("div", { id: "step-box" });
  const talk = el("div", { id: "conversation" });
  const chart = el("div", { id: "chart" });
  const trace = el("div", { id: "waterfall" });
  const picked = el("div", { id: "selected-event" });
  const layerView = el("div", { class: "layer", id: "layer" });
  const connection = el("p", { class: "notice", id: "connection" });
  const timeline = el("tbody", { id: "timeline" });
  const tabs = el("div", { class: "tabs", id: "layers" }, LAYERS.map((name) =>
    el("button", { type: "button", "data-layer": name, "aria-pressed": String(name === layer), onclick: () => { layer = name; renderView(); } }, name)));

  replace(main,
    el("p", {}, el("a", { href: "#/" }, "← Runs")),
    el("h1", {}, "Run ", el("code", { id: "run-id" }, runId)),
    input, summary, controls, waiting, outcome, family, stepBox,
    el("h2", {}, "Conversation"), talk,
    el("h2", {}, "Trace"), trace, picked,
    el("h2", {}, "Tokens and cost per model step"), chart,
    el("h2", {}, "View"), tabs, layerView,
    el("h2", {}, "Timeline"), connection,
    el("table", { class: "timeline" }, el("thead", {}, el("tr", {}, ["#", "Type", "At", "Payload"].map((h) => el("th", {}, h)))), timeline));

  // One read at a time; a request made during one reads again after it, so that the
  // last read always follows the last event.
  function serial(read) {
    let reading = null;
    let again = false;
    return () => {
      if (reading) {
        again = true;
        return reading;
      }
      reading = (async () => {
        do {
          again = false;
          try {
            await read();
          } catch (error) {
            if (!signal.aborted) replace(outcome, problem(error));
          }
        } while (again && !signal.aborted);
        reading = null;
      })();
      return reading;
    };
  }

  const refresh = serial(async () => {
    const fresh = await getJson(runPath(runId));
    const page = await getJson("/v1/runs", { parent_run_id: runId, limit: "100" });
    if (signal.aborted) return;
    run = fresh;
    children = page.runs.slice().reverse(); // oldest first: the order they started in
    renderRun();
  });

  const refreshView = serial(async () => {
    const fresh = await getJson(runPath(runId, "/view"));
    if (signal.aborted) return;
    view = fresh;
    renderView();
    renderSummary();
  });

  function duration() {
    if (!run) return null;
    const start = Date.parse(run.created_at);
    // A paused or ended run's clock stopped at its last change (the pause, the end).
    if (run.status === "paused" || ENDED.has(run.status)) return { ms: Date.parse(run.updated_at) - start, stopped: run.status };
    return { ms: Date.now() - start, stopped: null };
  }

  function renderSummary() {
    if (!run) return;
    const count = tokens(run.usage);
    const lasted = duration();
    const totals = view ? view.totals : null;
    const treeTokens = totals ? tokens(totals.usage) : null;
    replace(summary,
      el("dt", {}, "Status"), el("dd", { class: `status status-${run.status}`, id: "run-status" }, run.status),
      el("dt", {}, "Kind"), el("dd", {}, run.kind),
      el("dt", {}, "Name"), el("dd", {}, run.name),
      el("dt", {}, "Started"), el("dd", { id: "started" }, formatTime(run.created_at)),
      el("dt", {}, "Updated"), el("dd", {}, formatTime(run.updated_at), ` (${formatAfter(Date.parse(run.updated_at) - Date.parse(run.created_at))})`),
      el("dt", {}, "Duration"), el("dd", { id: "duration", "data-stopped": lasted.stopped || "" }, formatDuration(lasted.ms), lasted.stopped === "paused" ? " (stopped at the pause)" : lasted.stopped ? "" : " so far"),
      el("dt", {}, "Tokens"), el("dd", { id: "run-tokens" }, count === null ? "" : String(count)),
      totals ? [
        el("dt", {}, totals.runs > 1 ? `Tree (${totals.runs} runs)` : "Cost"),
        el("dd", { id: "totals", "data-tokens": treeTokens === null ? "" : treeTokens, "data-cost": totals.cost ? totals.cost.amount : "" },
          totals.runs > 1 ? `${treeTokens === null ? 0 : treeTokens} tokens, ` : "", formatCost(totals.cost) || "not priced"),
      ] : null,
      el("dt", {}, "Session"), el("dd", {}, run.session_id));
  }

  function renderRun() {
    replace(input, el("h2", {}, "Input"), el("pre", { id: "input" }, typeof run.input === "string" ? run.input : json(run.input)));
    renderSummary();
    const approvals = run.status === "paused" && run.pause && Array.isArray(run.pause.approvals) ? run.pause.approvals : [];
    // A running run's tool call waiting on a person (an MCP server's elicitation).
    const inputs = run.status === "running" && run.pause && run.pause.reason === "input" && Array.isArray(run.pause.inputs) ? run.pause.inputs : [];
    replace(controls,
      approvals.map(approvalCard),
      inputs.map(inputCard),
      ENDED.has(run.status) ? null : el("div", { class: "actions" }, el("button", { type: "button", id: "cancel", onclick: cancel }, "Cancel run")));
    replace(waiting, run.status === "paused" && run.pause ? [el("h2", {}, "Waiting"), el("ul", { id: "waiting" }, describeWait(run.pause, run.updated_at))] : null);
    if (run.status === "completed") replace(outcome, el("h2", {}, "Output"), el("pre", { id: "output" }, json(run.output)));
    else if (run.error) replace(outcome, el("h2", {}, "Error"), el("p", { class: "error", id: "error" }, el("strong", {}, String(run.error.code || "ERROR")), ": ", String(run.error.message || "")), el("pre", {}, json(run.error)));
    else replace(outcome);
    replace(family,
      run.parent_run_id ? el("p", { id: "parent" }, "Parent run: ", runLink(run.parent_run_id)) : null,
      children.length ? [el("h2", {}, "Child runs"), el("ul", { id: "children" }, children.map((c) => el("li", {}, runLink(c.id), ` ${c.kind} ${c.name} · ${c.status}`)))] : null);
    renderSteps();
  }

  function renderSteps() {
    if (!run || !COMPOSED.has(run.kind)) return replace(stepBox);
    const list = steps(events, run);
    replace(stepBox, el("h2", {}, "Steps"), list.length ? stepTable(list) : el("p", { class: "notice" }, "No step has started yet."));
  }

  function renderView() {
    for (const button of tabs.querySelectorAll("button")) button.setAttribute("aria-pressed", String(button.dataset.layer === layer));
    if (!view) return;
    const ended = run ? ENDED.has(run.status) : false;
    replace(talk, conversation(view.messages),
      run && COMPOSED.has(run.kind) ? el("p", { class: "notice" }, `A ${run.kind} talks through its child runs: see its steps above and the trace below.`) : null);
    replace(chart, stepChart(view.spans, ended));
    replace(trace, waterfall(view.spans, select));
    replace(layerView, renderLayer(layer, view, ended));
  }

  // A bar's event: this run's is shown here; another run's opens that run's page at it.
  function select(span) {
    if (span.run_id && span.run_id !== runId) {
      location.hash = "#/runs/" + encodeURIComponent(span.run_id) + (span.sequence ? "/events/" + span.sequence : "");
      return;
    }
    if (span.sequence) {
      selected = span.sequence;
      showSelected();
    }
  }

  function showSelected() {
    if (selected === null) return;
    const row = timeline.querySelector(`tr[data-sequence="${selected}"]`);
    if (!row) return;
    for (const other of timeline.querySelectorAll("tr.selected")) other.classList.remove("selected");
    row.classList.add("selected");
    const event = events.find((e) => e.sequence === selected);
    replace(picked, el("h3", {}, `Event ${event.sequence}: ${event.type}`), el("pre", { id: "selected-payload" }, json(event.payload)));
    row.scrollIntoView({ block: "center" });
  }

  function approvalCard(approval) {
    const decide = (decision) => async () => {
      try {
        await postJson(runPath(runId, "/resume"), { approval_id: approval.id, decision });
        await refresh();
      } catch (error) {
        replace(outcome, problem(error));
      }
    };
    return el("div", { class: "approval", "data-approval-id": approval.id },
      el("p", {}, "Approval needed for tool ", el("strong", { class: "tool-name" }, approval.tool_name), approval.risk ? ` (risk: ${approval.risk})` : ""),
      el("pre", { class: "tool-input" }, json(approval.input)),
      el("div", { class: "actions" },
        el("button", { type: "button", class: "approve", onclick: decide("approve") }, "Approve"),
        el("button", { type: "button", class: "reject", onclick: decide("reject") }, "Reject")));
  }

  function inputCard(input) {
    // Kept across the page's refreshes while the run runs.
    const content = el("textarea", { class: "input-content", rows: "4", oninput: () => inputDrafts.set(input.id, content.value) }, inputDrafts.get(input.id) ?? "{}");
    const answer = (action) => async () => {
      try {
        const body = { input_id: input.id, action };
        if (action === "accept") body.content = JSON.parse(content.value || "{}");
        await postJson(runPath(runId, "/resume"), body);
        await refresh();
      } catch (error) {
        replace(outcome, problem(error));
      }
    };
    // The message and the schema come from a remote server: shown as text, never as markup.
    return el("div", { class: "pending-input", "data-input-id": input.id },
      el("p", {}, "Input requested by ", el("strong", {}, String(input.connection || input.tool_name || "a tool")), ` (until ${input.expires_at})`),
      el("pre", { class: "input-message" }, String(input.message)),
      el("pre", { class: "input-schema" }, json(input.schema)),
      content,
      el("div", { class: "actions" },
        el("button", { type: "button", class: "accept", onclick: answer("accept") }, "Answer"),
        el("button", { type: "button", class: "decline", onclick: answer("decline") }, "Decline"),
        el("button", { type: "button", class: "cancel-input", onclick: answer("cancel") }, "Cancel request")));
  }

  async function cancel() {
    if (!window.confirm(`Cancel run ${runId}? It stops and cannot be resumed.`)) return;
    try {
      await postJson(runPath(runId, "/cancel"));
      await refresh();
    } catch (error) {
      replace(outcome, problem(error));
    }
  }

  // No duplicate check: a reconnection resumes after the last event (Last-Event-ID).
  function addEvent(event) {
    events.push(event);
    const start = Date.parse(events[0].occurred_at);
    timeline.append(el("tr", { "data-sequence": event.sequence },
      el("td", {}, String(event.sequence)), el("td", {}, event.type),
      el("td", {}, formatTime(event.occurred_at), el("br"), el("span", { class: "notice" }, formatAfter(Date.parse(event.occurred_at) - start))),
      el("td", {}, el("details", {}, el("summary", {}, summaryOf(event)), el("pre", {}, json(event.payload))))));
    if (event.sequence === selected) showSelected();
    refreshView();
    if (event.type.startsWith("run.")) refresh();
    else if (run) renderSteps();
  }

  refresh();
  refreshView();
  // The clock of a running run, and the spans of its children (whose events this page
  // does not follow), move on between this run's events.
  const timer = setInterval(() => {
    if (!run || ENDED.has(run.status) || run.status === "paused") return;
    renderSummary();
    refreshView();
  }, LIVE_VIEW_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
  followRun(runId, {
    signal,
    onEvent: addEvent,
    onConnect: (count) => {
      const said = count === 1 ? "connected" : "reconnected";
      connection.dataset.history = `${connection.dataset.history || ""} ${said}`.trim();
      replace(connection, count === 1 ? "Live." : `Live (reconnected ${count - 1}×, resumed after the last event received).`);
    },
    onEnd: (end) => { replace(connection, `The run ended: ${end.status}.`); refresh(); refreshView(); },
  }).catch((error) => replace(connection, problem(error)));
}

// One line saying what an event holds, before its JSON.
function summaryOf(event) {
  const p = event.payload || {};
  const progress = event.type === "tool.progress" ? progressOf(p) : null;
  const bits = [p.step_id, p.tool_name, p.step !== undefined ? `step ${p.step}` : null, progress, p.reason, p.event, p.status].filter((b) => b !== undefined && b !== null && b !== "");
  return bits.length ? bits.join(" · ") : "payload";
}

// A running tool call's progress: "3 of 10" (or "3"), then its message, which is the
// tool's (or a remote server's) text: shown as text, like every payload.
function progressOf(p) {
  const done = p.total !== null && p.total !== undefined ? `${p.progress} of ${p.total}` : `${p.progress}`;
  return p.message ? `progress ${done}: ${p.message}` : `progress ${done}`;
}

function problem(error) {
  return el("p", { class: "error" }, `${error.code || "ERROR"}: ${error.message}`);
}
