// Pieces of the run page, each built from the server's view, the run's events or its
// snapshot: the conversation, the workflow or team step list, a wait in words, and the
// four layers.
import { el, formatClock, formatCost, formatDuration, formatFromNow, json, runLink } from "./dom.js";

// -- a wait in words -------------------------------------------------------------------

export function describeWait(pause, since) {
  if (!pause || typeof pause !== "object") return [];
  const reason = pause.reason;
  if (reason === "approval") {
    return (Array.isArray(pause.approvals) ? pause.approvals : []).map((approval) =>
      el("li", {}, "approval of ", el("code", {}, String(approval.tool_name)), " by any reviewer",
        approval.risk ? ` (risk: ${approval.risk})` : "", since ? `, since ${formatClock(since)}` : ""));
  }
  if (reason === "event") {
    return [el("li", {}, "waiting for event ", el("code", {}, String(pause.event)), since ? ` since ${formatClock(since)}` : "",
      typeof pause.wake_at === "number" ? `, until ${formatClock(pause.wake_at * 1000)} (${formatFromNow(pause.wake_at * 1000)})` : "",
      pause.step_id ? ` (step ${pause.step_id})` : "")];
  }
  if (reason === "timer") {
    const due = typeof pause.wake_at === "number" ? pause.wake_at * 1000 : null;
    return [el("li", {}, due === null ? "timer" : `timer due at ${formatClock(due)} (${formatFromNow(due)})`, pause.step_id ? ` (step ${pause.step_id})` : "")];
  }
  if (reason === "children") {
    const ids = Array.isArray(pause.run_ids) ? pause.run_ids : [];
    return [el("li", {}, `waiting for ${ids.length === 1 ? "a child run" : ids.length + " child runs"} to end: `,
      ids.flatMap((id, index) => (index ? [", ", runLink(id)] : [runLink(id)])), pause.step_id ? ` (step ${pause.step_id})` : "",
      since ? `, since ${formatClock(since)}` : "")];
  }
  return [el("li", {}, `waiting (${String(reason)})`, el("pre", {}, json(pause)))];
}

// -- the conversation -----------------------------------------------------------------

export function conversation(messages) {
  if (!messages.length) return el("p", { class: "notice" }, "No message yet.");
  return el("div", { class: "conversation" }, messages.map((message) =>
    el("div", { class: `turn role-${message.role}`, "data-role": message.role },
      el("div", { class: "who" }, message.role === "tool" ? "tool results" : message.role),
      (message.content || []).map(part))));
}

function part(content) {
  if (content.type === "text") return el("div", { class: "part text" }, content.text);
  if (content.type === "thinking") return el("details", { class: "part thinking" }, el("summary", {}, "thinking"), el("div", {}, content.reasoning || ""));
  if (content.type === "tool-call") {
    return el("div", { class: "part tool-call", "data-tool-call-id": content.id },
      el("div", {}, "calls ", el("code", { class: "tool-name" }, content.name)), el("pre", { class: "tool-input" }, json(content.input)));
  }
  if (content.type === "tool-result") {
    return el("div", { class: content.is_error ? "part tool-result error" : "part tool-result", "data-tool-call-id": content.id },
      el("div", {}, el("code", { class: "tool-name" }, content.name), content.is_error ? " failed" : " returned"),
      el("pre", { class: "tool-output" }, json(content.output)));
  }
  return el("div", { class: "part other" }, `[${content.type}${content.media_type ? " " + content.media_type : ""}]`);
}

// -- the step list --------------------------------------------------------------------

const STEP_FAMILIES = ["workflow.step", "team.delegation", "team.parallel", "task.step"];

function stepEvent(type) {
  for (const family of STEP_FAMILIES) {
    if (type.startsWith(family + ".")) return { family, phase: type.slice(family.length + 1) };
  }
  if (type === "workflow.event.received") return { family: "workflow.step", phase: "completed" };
  return null;
}

function childIds(payload) {
  const ids = [];
  const add = (value) => { if (typeof value === "string" && value.startsWith("run_") && !ids.includes(value)) ids.push(value); };
  add(payload.child_run_id);
  add(payload.run_id);
  if (payload.output && typeof payload.output === "object") add(payload.output.run_id);
  if (Array.isArray(payload.run_ids)) payload.run_ids.forEach(add);
  return ids;
}

// The steps of a workflow, team or task run in journal order, from its events; a step
// waiting on a pause stops its clock at the pause.
export function steps(events, run) {
  const found = new Map();
  for (const event of events) {
    const payload = event.payload || {};
    if (event.type === "workflow.waiting" || event.type === "team.waiting") {
      const step = found.get(payload.step_id);
      if (step) childIds(payload).forEach((id) => step.children.includes(id) || step.children.push(id));
      continue;
    }
    const kind = stepEvent(event.type);
    if (!kind || typeof payload.step_id !== "string") continue;
    let step = found.get(payload.step_id);
    if (!step) {
      step = { id: payload.step_id, kind: payload.kind || (kind.family === "team.delegation" ? "agent" : kind.family === "team.parallel" ? "parallel" : ""), status: "running", started: event.occurred_at, ended: null, sequence: event.sequence, children: [] };
      found.set(payload.step_id, step);
    }
    if (payload.kind) step.kind = payload.kind;
    if (kind.phase === "completed" || kind.phase === "failed") {
      step.status = kind.phase;
      step.ended = event.occurred_at;
    }
    childIds(payload).forEach((id) => step.children.includes(id) || step.children.push(id));
  }
  const pausedAt = run.status === "paused" || ["completed", "failed", "cancelled"].includes(run.status) ? run.updated_at : null;
  for (const step of found.values()) {
    if (step.status === "running" && run.status === "paused" && run.pause && run.pause.step_id === step.id) step.status = "waiting";
    const until = step.ended || pausedAt;
    step.duration = until ? Math.max(0, Date.parse(until) - Date.parse(step.started)) : Date.now() - Date.parse(step.started);
  }
  return [...found.values()];
}

export function stepTable(list) {
  return el("table", { id: "steps" },
    el("thead", {}, el("tr", {}, ["Step", "Kind", "Status", "Duration", "Child run"].map((h) => el("th", {}, h)))),
    el("tbody", {}, list.map((step) => el("tr", { "data-step-id": step.id, "data-sequence": step.sequence },
      el("td", {}, step.id), el("td", {}, step.kind), el("td", { class: `status status-${step.status}` }, step.status),
      el("td", {}, formatDuration(step.duration)),
      el("td", {}, step.children.flatMap((id, index) => (index ? [", ", runLink(id)] : [runLink(id)])))))));
}

// -- the four layers ------------------------------------------------------------------

export function renderLayer(layer, view, ended) {
  if (layer === "stream") {
    if (!view.stream.length) return el("p", { class: "notice" }, ended ? "This run streamed nothing itself (a workflow or team streams through its child runs)." : "Nothing streamed yet.");
    return el("ol", {}, view.stream.map((item) => el("li", { "data-kind": item.kind },
      `step ${item.step} · ${item.kind} · `,
      item.kind === "text-delta" ? item.text
        : item.kind === "tool-call" ? el("pre", {}, `${item.call.name} ${json(item.call.input)}`)
          : item.kind === "tool-result" ? el("pre", {}, `${item.result.name}${item.result.is_error ? " (failed)" : ""} → ${json(item.result.output)}`)
            : item.kind === "tool-input-delta" ? el("code", {}, item.delta)
              : `block ${item.index}${item.block ? " " + item.block : ""}`)));
  }
  if (layer === "state") {
    return el("ol", {}, view.state.map((t) => el("li", {}, `${t.state} at event ${t.sequence}`, t.step ? ` · step ${t.step}` : "", t.tool_call_id ? ` · call ${t.tool_call_id}` : "")));
  }
  if (layer === "messages") return conversation(view.messages);
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

function partText(content) {
  if (content.type === "text") return content.text;
  if (content.type === "tool-call") return `→ ${content.name}(${json(content.input)})`;
  return json(content);
}
