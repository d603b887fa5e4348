// One run: its summary, pending approvals, cancel, output or error, parent and child
// runs, the tokens-and-cost chart, the four-layer view and the live timeline.
import { followRun, getJson, postJson, runPath } from "./api.js";
import { stepChart } from "./chart.js";
import { el, formatCost, formatDuration, formatTime, json, replace, runLink, tokens } from "./dom.js";
import { projectRun } from "./run_view.js";

const LAYERS = ["stream", "state", "messages", "turn"];
const ENDED = new Set(["completed", "failed", "cancelled"]);

export function showRun(main, runId, signal) {
  const events = [];
  let run = null;
  let layer = "stream";
  const summary = el("dl", { id: "summary" });
  const controls = el("div", { id: "controls" });
  const outcome = el("div", { id: "outcome" });
  const family = el("div", { id: "family" });
  const chart = el("div", { id: "chart" });
  const layerView = el("div", { class: "layer", id: "layer" });
  const connection = el("p", { class: "notice", id: "connection" });
  const timeline = el("tbody", { id: "timeline" });
  const tabs = el("div", { class: "tabs", id: "layers" }, LAYERS.map((name) =>
    el("button", { type: "button", "data-layer": name, "aria-pressed": String(name === layer), onclick: () => { layer = name; render(); } }, name)));

  replace(main,
    el("p", {}, el("a", { href: "#/" }, "← Runs")),
    el("h1", {}, "Run ", el("code", { id: "run-id" }, runId)),
    summary, controls, outcome, family,
    el("h2", {}, "Tokens and cost per model step"), chart,
    el("h2", {}, "View"), tabs, layerView,
    el("h2", {}, "Timeline"), connection,
    el("div", { class: "timeline" }, el("table", {}, el("thead", {}, el("tr", {}, ["#", "Type", "At", "Payload"].map((h) => el("th", {}, h)))), timeline)));

  // One read of the run at a time; a request made during one reads again after it, so
  // that the last read always follows the last event.
  let reading = null;
  let readAgain = false;
  async function refresh() {
    if (reading) {
      readAgain = true;
      return reading;
    }
    reading = (async () => {
      do {
        readAgain = false;
        try {
          run = await getJson(runPath(runId));
          const children = await getJson("/v1/runs", { parent_run_id: runId, limit: "100" });
          if (signal.aborted) return;
          renderRun(children.runs);
        } catch (error) {
          if (!signal.aborted) replace(outcome, problem(error));
        }
      } while (readAgain && !signal.aborted);
      reading = null;
    })();
    return reading;
  }

  function renderRun(children) {
    const count = tokens(run.usage);
    replace(summary,
      el("dt", {}, "Status"), el("dd", { class: `status status-${run.status}`, id: "run-status" }, run.status),
      el("dt", {}, "Kind"), el("dd", {}, run.kind),
      el("dt", {}, "Name"), el("dd", {}, run.name),
      el("dt", {}, "Started"), el("dd", {}, formatTime(run.created_at)),
      el("dt", {}, "Updated"), el("dd", {}, formatTime(run.updated_at)),
      el("dt", {}, "Tokens"), el("dd", {}, count === null ? "" : String(count)),
      el("dt", {}, "Session"), el("dd", {}, run.session_id));
    const approvals = run.status === "paused" && run.pause && Array.isArray(run.pause.approvals) ? run.pause.approvals : [];
    replace(controls,
      approvals.map(approvalCard),
      ENDED.has(run.status) ? null : el("div", { class: "actions" }, el("button", { type: "button", id: "cancel", onclick: cancel }, "Cancel run")));
    if (run.status === "completed") replace(outcome, el("h2", {}, "Output"), el("pre", { id: "output" }, json(run.output)));
    else if (run.error) replace(outcome, el("h2", {}, "Error"), el("p", { class: "error", id: "error" }, el("strong", {}, String(run.error.code || "ERROR")), ": ", String(run.error.message || "")), el("pre", {}, json(run.error)));
    else if (run.pause && run.pause.reason !== "approval") replace(outcome, el("h2", {}, "Waiting"), el("pre", {}, json(run.pause)));
    else replace(outcome);
    replace(family,
      run.parent_run_id ? el("p", { id: "parent" }, "Parent run: ", runLink(run.parent_run_id)) : null,
      children.length ? [el("h2", {}, "Child runs"), el("ul", { id: "children" }, children.map((c) => el("li", {}, runLink(c.id), ` ${c.kind} ${c.name} · ${c.status}`)))] : null);
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

  async function cancel() {
    if (!window.confirm(`Cancel run ${runId}? It stops and cannot be resumed.`)) return;
    try {
      await postJson(runPath(runId, "/cancel"));
      await refresh();
    } catch (error) {
      replace(outcome, problem(error));
    }
  }

  function render() {
    const view = projectRun(events);
    replace(chart, stepChart(view.steps));
    for (const button of tabs.querySelectorAll("button")) button.setAttribute("aria-pressed", String(button.dataset.layer === layer));
    replace(layerView, renderLayer(layer, view));
  }

  // No duplicate check: a reconnection resumes after the last event (Last-Event-ID).
  function addEvent(event) {
    events.push(event);
    timeline.append(el("tr", { "data-sequence": event.sequence },
      el("td", {}, String(event.sequence)), el("td", {}, event.type), el("td", {}, formatTime(event.occurred_at)),
      el("td", {}, el("pre", {}, json(event.payload)))));
    render();
    if (event.type.startsWith("run.")) refresh();
  }

  refresh();
  render();
  followRun(runId, {
    signal,
    onEvent: addEvent,
    onConnect: (count) => {
      const said = count === 1 ? "connected" : "reconnected";
      connection.dataset.history = `${connection.dataset.history || ""} ${said}`.trim();
      replace(connection, count === 1 ? "Live." : `Live (reconnected ${count - 1}×, resumed after the last event received).`);
    },
    onEnd: (end) => { replace(connection, `The run ended: ${end.status}.`); refresh(); },
  }).catch((error) => replace(connection, problem(error)));
}

function renderLayer(layer, view) {
  if (layer === "stream") {
    if (!view.stream.length) return el("p", { class: "notice" }, "Nothing streamed yet.");
    return el("ol", {}, view.stream.map((item) => el("li", { "data-kind": item.kind },
      `step ${item.step} · ${item.kind} · `,
      item.kind === "text-delta" ? item.text : item.kind === "tool-call" ? el("pre", {}, `${item.call.name} ${json(item.call.input)}`) : el("pre", {}, `${item.result.tool_name}${item.result.is_error ? " (failed)" : ""} → ${json(item.result.output)}`))));
  }
  if (layer === "state") {
    return el("ol", {}, view.state.map((t) => el("li", {}, `${t.state} at event ${t.sequence}`, t.step ? ` · step ${t.step}` : "", t.tool_call_id ? ` · call ${t.tool_call_id}` : "")));
  }
  if (layer === "messages") {
    return el("div", {}, view.messages.map((m) => el("div", { class: "message" }, el("strong", {}, m.role), el("pre", {}, m.content.map(partText).join("\n")))));
  }
  const turn = view.turn;
  if (!turn) return el("p", { class: "notice" }, "The run has not ended: no turn yet.");
  return el("dl", { id: "turn" },
    el("dt", {}, "Status"), el("dd", {}, turn.status),
    el("dt", {}, "Duration"), el("dd", {}, formatDuration(turn.duration_ms)),
    el("dt", {}, "Usage"), el("dd", {}, json(turn.usage)),
    el("dt", {}, "Cost"), el("dd", {}, formatCost(turn.cost) || "not priced"),
    el("dt", {}, "Model steps"), el("dd", {}, String(turn.steps)),
    el("dt", {}, "Tool calls"), el("dd", {}, String(turn.tool_calls)),
    el("dt", {}, "Response"), el("dd", {}, el("pre", {}, turn.response ? turn.response.content.map(partText).join("\n") : "")),
    turn.error ? [el("dt", {}, "Error"), el("dd", { class: "error" }, `${turn.error.code}: ${turn.error.message}`)] : null);
}

function partText(part) {
  if (part.type === "text") return part.text;
  if (part.type === "tool-call") return `→ ${part.name}(${json(part.input)})`;
  if (part.type === "tool-result") return `${part.tool_name}${part.is_error ? " failed" : ""}: ${json(part.output)}`;
  return json(part.value === undefined ? part : part.value);
}

function problem(error) {
  return el("p", { class: "error" }, `${error.code || "ERROR"}: ${error.message}`);
}
