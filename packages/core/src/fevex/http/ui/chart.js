// Tokens (and cost, where the steps were priced) per model step of the run and its
// descendants, from the model spans of the server's view, as an SVG bar chart built
// with DOM APIs.
import { svg } from "./dom.js";

const WIDTH = 480;
const HEIGHT = 160;
const BOTTOM = 24;
const TOP = 14;

export function spanTokens(span) {
  const a = span.attributes || {};
  const input = typeof a["gen_ai.usage.input_tokens"] === "number" ? a["gen_ai.usage.input_tokens"] : null;
  const output = typeof a["gen_ai.usage.output_tokens"] === "number" ? a["gen_ai.usage.output_tokens"] : null;
  return input === null && output === null ? null : (input || 0) + (output || 0);
}

export function spanCost(span) {
  const a = span.attributes || {};
  return typeof a["fevex.cost.amount"] === "number" ? { amount: a["fevex.cost.amount"], currency: String(a["fevex.cost.currency"]) } : null;
}

export function stepChart(spans, ended) {
  const done = spans.filter((s) => s.kind === "model" && !s.open).sort((a, b) => a.start_ms - b.start_ms);
  const chart = svg("svg", { class: "chart", width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": "Tokens and cost per model step" });
  if (!done.length) {
    chart.append(svg("text", { x: 8, y: HEIGHT / 2 }, ended ? "No model step ran in this run or its child runs." : "No model step has completed yet."));
    return chart;
  }
  const counts = done.map((s) => spanTokens(s) || 0);
  const costs = done.map((s) => (spanCost(s) ? spanCost(s).amount : 0));
  const maxTokens = Math.max(1, ...counts);
  const maxCost = Math.max(0, ...costs);
  const slot = (WIDTH - 16) / done.length;
  const bar = Math.max(2, Math.min(40, slot / 2 - 4));
  const plot = HEIGHT - BOTTOM - TOP;
  done.forEach((span, index) => {
    const x = 8 + index * slot;
    const height = (counts[index] / maxTokens) * plot;
    const label = `${index + 1}`;
    chart.append(
      svg("rect", { class: "tokens", "data-span-id": span.span_id, x, y: TOP + plot - height, width: bar, height }, svg("title", {}, `${span.name} (${span.run_id}): ${counts[index]} tokens`)),
      svg("text", { x, y: HEIGHT - 8 }, `#${label} ${counts[index]}t`),
    );
    if (maxCost > 0) {
      const costHeight = (costs[index] / maxCost) * plot;
      const cost = spanCost(span);
      chart.append(svg("rect", { class: "cost", x: x + bar + 2, y: TOP + plot - costHeight, width: bar, height: costHeight }, svg("title", {}, `${span.name}: cost ${costs[index]} ${cost ? cost.currency : ""}`)));
    }
  });
  chart.append(svg("text", { x: 8, y: 10 }, maxCost > 0 ? "tokens (blue), cost (amber) per model step" : "tokens per model step"));
  return chart;
}
