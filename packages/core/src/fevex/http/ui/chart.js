// Tokens (and cost, where the steps were priced) per model step, as an SVG bar chart
// built with DOM APIs.
import { svg, tokens } from "./dom.js";

const WIDTH = 480;
const HEIGHT = 160;
const BOTTOM = 24;
const TOP = 14;

export function stepChart(steps) {
  const done = steps.filter((s) => s.usage);
  const chart = svg("svg", { class: "chart", width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": "Tokens and cost per model step" });
  if (!done.length) {
    chart.append(svg("text", { x: 8, y: HEIGHT / 2 }, "No model step has completed yet."));
    return chart;
  }
  const counts = done.map((s) => tokens(s.usage) || 0);
  const costs = done.map((s) => (s.cost && typeof s.cost.amount === "number" ? s.cost.amount : 0));
  const maxTokens = Math.max(1, ...counts);
  const maxCost = Math.max(0, ...costs);
  const slot = (WIDTH - 16) / done.length;
  const bar = Math.max(2, Math.min(40, slot / 2 - 4));
  const plot = HEIGHT - BOTTOM - TOP;
  done.forEach((step, index) => {
    const x = 8 + index * slot;
    const height = (counts[index] / maxTokens) * plot;
    chart.append(
      svg("rect", { class: "tokens", "data-step": step.step, x, y: TOP + plot - height, width: bar, height }, svg("title", {}, `step ${step.step}: ${counts[index]} tokens`)),
      svg("text", { x, y: HEIGHT - 8 }, `#${step.step} ${counts[index]}t`),
    );
    if (maxCost > 0) {
      const costHeight = (costs[index] / maxCost) * plot;
      chart.append(svg("rect", { class: "cost", x: x + bar + 2, y: TOP + plot - costHeight, width: bar, height: costHeight }, svg("title", {}, `step ${step.step}: cost ${costs[index]} ${step.cost ? step.cost.currency : ""}`)));
    }
  });
  chart.append(svg("text", { x: 8, y: 10 }, maxCost > 0 ? "tokens (blue), cost (amber) per step" : "tokens per step"));
  return chart;
}
