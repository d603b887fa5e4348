// Building the page with DOM APIs only: every value goes in as a text node or an
// attribute, never as markup, so nothing from a run can become code.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  setUp(node, attributes, children);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  setUp(node, attributes, children);
  return node;
}

function setUp(node, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function replace(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

export function runLink(id) {
  return el("a", { href: "#/runs/" + encodeURIComponent(id) }, id);
}

const WITH_MS = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3, hour12: false };
const CLOCK = { hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3, hour12: false };

function instant(stamp) {
  const date = typeof stamp === "number" ? new Date(stamp) : new Date(String(stamp));
  return Number.isNaN(date.getTime()) ? null : date;
}

// A date and time to the millisecond, in the viewer's zone.
export function formatTime(stamp) {
  if (stamp === null || stamp === undefined || stamp === "") return "";
  const date = instant(stamp);
  return date ? date.toLocaleString(undefined, WITH_MS) : String(stamp);
}

// The time of day to the millisecond ("12:04:31.120").
export function formatClock(stamp) {
  const date = instant(stamp);
  return date ? date.toLocaleTimeString(undefined, CLOCK) : String(stamp);
}

// How long after the run's start ("2.4 s after start").
export function formatAfter(milliseconds) {
  return formatDuration(Math.max(0, milliseconds)) + " after start";
}

// How far from now ("3.1 s ago", "in 4.0 s").
export function formatFromNow(milliseconds) {
  const offset = milliseconds - Date.now();
  return offset >= 0 ? "in " + formatDuration(offset) : formatDuration(-offset) + " ago";
}

export function formatDuration(milliseconds) {
  if (milliseconds === null || milliseconds === undefined || !Number.isFinite(milliseconds)) return "";
  if (milliseconds < 1000) return Math.round(milliseconds) + " ms";
  if (milliseconds < 60000) return (milliseconds / 1000).toFixed(1) + " s";
  return (milliseconds / 60000).toFixed(1) + " min";
}

export function formatCost(cost) {
  if (!cost || typeof cost.amount !== "number") return "";
  return cost.amount.toFixed(6).replace(/0+$/, "").replace(/\.$/, "") + " " + String(cost.currency);
}

export function tokens(usage) {
  if (!usage || typeof usage !== "object") return null;
  if (typeof usage.total_tokens === "number") return usage.total_tokens;
  const input = typeof usage.input_tokens === "number" ? usage.input_tokens : null;
  const output = typeof usage.output_tokens === "number" ? usage.output_tokens : null;
  if (input === null && output === null) return null;
  return (input || 0) + (output || 0);
}
