// The four layers of a run (stream, state, messages, turn), projected from its events
// as fevex.events.project_run does, so that a live run is re-projected after each event.
// Unlike project_run it never refuses: an event it cannot read is skipped, so that the
// page shows what it can of any run (workflow and team runs have few of these events).

const TERMINAL = { "run.completed": "completed", "run.failed": "failed", "run.cancelled": "cancelled" };

export function projectRun(events) {
  const stream = [];
  const state = [];
  const messages = [];
  const stepText = new Map();
  const steps = [];
  let openResults = [];
  let started = null;
  let ended = null;
  let toolCalls = 0;

  const enter = (name, event, where = {}) => state.push({ state: name, sequence: event.sequence, occurred_at: event.occurred_at, ...where });
  const closeToolMessage = () => {
    if (openResults.length) messages.push({ role: "tool", content: openResults });
    openResults = [];
  };

  for (const event of events) {
    const payload = event.payload || {};
    switch (event.type) {
      case "run.started":
        started = event;
        messages.push({ role: "user", content: [typeof payload.input === "string" ? { type: "text", text: payload.input } : { type: "json", value: payload.input }] });
        enter("started", event);
        break;
      case "model.started":
        closeToolMessage();
        steps.push({ step: payload.step, model: typeof payload.model === "string" ? payload.model : null, usage: null, cost: null });
        enter("thinking", event, { step: payload.step });
        break;
      case "model.output.delta":
        if (!stepText.has(payload.step)) {
          stepText.set(payload.step, []);
          enter("responding", event, { step: payload.step });
        }
        stepText.get(payload.step).push(String(payload.delta));
        stream.push({ kind: "text-delta", sequence: event.sequence, step: payload.step, text: String(payload.delta) });
        break;
      case "model.completed": {
        const calls = Array.isArray(payload.tool_calls) ? payload.tool_calls : [];
        const text = (stepText.get(payload.step) || []).join("");
        const content = text ? [{ type: "text", text }] : [];
        for (const call of calls) content.push({ type: "tool-call", id: call.id, name: call.name, input: call.input });
        messages.push({ role: "assistant", content });
        const step = steps.find((s) => s.step === payload.step) || { step: payload.step, model: null };
        if (!steps.includes(step)) steps.push(step);
        step.usage = payload.usage || {};
        step.cost = payload.cost || null;
        for (const call of calls) {
          stream.push({ kind: "tool-call", sequence: event.sequence, step: payload.step, call });
          enter("tool_planned", event, { step: payload.step, tool_call_id: call.id });
        }
        break;
      }
      case "tool.started":
        toolCalls += 1;
        enter("tool_executing", event, { step: payload.step, tool_call_id: payload.tool_call_id });
        break;
      case "tool.completed":
      case "tool.failed": {
        const failed = event.type === "tool.failed";
        const result = { type: "tool-result", tool_call_id: payload.tool_call_id, tool_name: payload.tool_name, output: failed ? payload.error : payload.output, is_error: failed };
        openResults.push(result);
        stream.push({ kind: "tool-result", sequence: event.sequence, step: payload.step, result });
        enter(failed ? "tool_failed" : "tool_completed", event, { step: payload.step, tool_call_id: payload.tool_call_id });
        break;
      }
      case "run.paused":
        enter("paused", event);
        break;
      default:
        if (event.type in TERMINAL) {
          closeToolMessage();
          enter(TERMINAL[event.type], event);
          ended = event;
        }
    }
  }
  return { stream, state, messages, steps, turn: turnOf(started, ended, messages, steps, toolCalls) };
}

function turnOf(started, ended, messages, steps, toolCalls) {
  if (!started || !ended) return null;
  const payload = ended.payload || {};
  const usage = payload.usage || sumUsage(steps.map((s) => s.usage || {}));
  return {
    status: TERMINAL[ended.type],
    request: messages[0],
    response: [...messages].reverse().find((m) => m.role === "assistant") || null,
    started_at: started.occurred_at,
    ended_at: ended.occurred_at,
    duration_ms: Math.max(Date.parse(ended.occurred_at) - Date.parse(started.occurred_at), 0),
    usage,
    cost: payload.cost || sumCost(steps.map((s) => s.cost)),
    steps: steps.length,
    tool_calls: toolCalls,
    error: ended.type === "run.failed" ? payload.error || null : null,
  };
}

function sumUsage(usages) {
  const total = {};
  for (const usage of usages) {
    for (const [name, value] of Object.entries(usage)) if (typeof value === "number") total[name] = (total[name] || 0) + value;
  }
  return total;
}

// The costs' sum when they share one currency (fevex never converts), else null.
export function sumCost(costs) {
  const priced = costs.filter((c) => c && typeof c.amount === "number");
  if (!priced.length || priced.some((c) => c.currency !== priced[0].currency)) return null;
  return { amount: priced.reduce((sum, c) => sum + c.amount, 0), currency: priced[0].currency };
}
