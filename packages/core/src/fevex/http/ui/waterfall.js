// The trace waterfall of a run tree: one bar per span the server's view holds (the spans
// fevex builds: run executions, model steps, tool calls, workflow steps, delegations), on
// one shared time axis, parents above their children; tokens and cost per bar, failing
// spans marked, open ones drawn up to now. A click on a bar calls onSelect(span).
import { spanCost, spanTokens } from "./chart.js";
import { formatCost, formatDuration, svg } from "./dom.js";

const WIDTH = 960;
const LABELS = 330;
const ROW = 20;
const AXIS = 22;

// Parents before their children, siblings by start; a span whose parent is not in the
// view (an execution of a run outside the tree) is a root.
function ordered(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map();
  for (const span of spans) {
    const parent = span.parent_span_id && ids.has(span.parent_span_id) ? span.parent_span_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const rows = [];
  const visit = (parent, depth) => {
    const list = (children.get(parent) || []).sort((a, b) => a.start_ms - b.start_ms || (a.kind === "run" ? -1 : 1));
    for (const span of list) {
      rows.push({ span, depth });
      if (depth < 40) visit(span.span_id, depth + 1);
    }
  };
  visit(null, 0);
  return rows;
}

export function waterfall(spans, onSelect) {
  if (!spans.length) return svg("svg", { class: "waterfall", width: WIDTH, height: ROW * 2 }, svg("text", { x: 8, y: ROW }, "No span yet."));
  const rows = ordered(spans);
  const start = Math.min(...spans.map((s) => s.start_ms));
  const end = Math.max(...spans.map((s) => s.end_ms));
  const total = Math.max(end - start, 1);
  const plot = WIDTH - LABELS - 16;
  const x = (ms) => LABELS + ((ms - start) / total) * plot;
  const height = AXIS + rows.length * ROW + 8;
  const chart = svg("svg", { class: "waterfall", id: "waterfall-chart", width: WIDTH, height, viewBox: `0 0 ${WIDTH} ${height}`, role: "img", "aria-label": "Trace waterfall" });
  for (let tick = 0; tick <= 4; tick += 1) {
    const at = LABELS + (plot * tick) / 4;
    chart.append(
      svg("line", { class: "tick", x1: at, x2: at, y1: AXIS - 4, y2: height }),
      svg("text", { class: "axis", x: at + 2, y: AXIS - 8 }, formatDuration((total * tick) / 4)));
  }
  rows.forEach(({ span, depth }, index) => {
    const y = AXIS + index * ROW;
    const tokens = spanTokens(span);
    const cost = formatCost(spanCost(span));
    const failed = span.status === "error";
    const facts = [formatDuration(span.end_ms - span.start_ms), tokens === null ? null : `${tokens} t`, cost || null, span.open ? "open" : null, failed ? `✕ ${span.error_code || "failed"}` : null].filter(Boolean).join(" · ");
    const left = x(span.start_ms);
    const width = Math.max(2, x(span.end_ms) - left);
    const classes = ["span-bar", `kind-${span.kind}`, failed ? "failed" : "", span.open ? "open" : ""].filter(Boolean).join(" ");
    const bar = svg("rect", {
      class: classes, x: left, y: y + 3, width, height: ROW - 6, rx: 2,
      "data-span-id": span.span_id, "data-kind": span.kind, "data-run-id": span.run_id || "", "data-sequence": span.sequence === null ? "" : span.sequence,
      "data-status": span.status, tabindex: 0, onclick: () => onSelect(span),
    }, svg("title", {}, `${span.name} — ${facts}`));
    chart.append(
      svg("text", { class: failed ? "label failed" : "label", x: 4 + depth * 10, y: y + ROW - 6 }, clip(span.name, 42 - depth)),
      bar,
      // The facts go right of the bar, or left of it when the bar reaches the edge.
      left + width + 4 > WIDTH - 150
        ? svg("text", { class: "facts", x: left - 4, y: y + ROW - 6, "text-anchor": "end" }, facts)
        : svg("text", { class: "facts", x: left + width + 4, y: y + ROW - 6 }, facts));
  });
  return chart;
}

function clip(text, length) {
  const limit = Math.max(length, 12);
  return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
}
