// The protocol under /v1, as this page calls it: same origin, the pasted bearer token
// (kept for this tab in sessionStorage) or the host's cookies, and X-Fevex-Request on
// every state-changing request (the server refuses those without it).

const TOKEN_KEY = "fevex.console.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra = {}) {
  const all = { Accept: "application/json", ...extra };
  const bearer = token();
  if (bearer) all.Authorization = "Bearer " + bearer;
  return all;
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = body && body.error ? body.error : {};
    throw new ApiError(response.status, String(error.code || "HTTP_" + response.status), String(error.message || response.statusText));
  }
  return body;
}

export async function getJson(path, query = {}) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value) search.set(name, value);
  const suffix = search.toString() ? "?" + search.toString() : "";
  const response = await fetch(path + suffix, { headers: headers(), credentials: "same-origin", cache: "no-store" });
  return answer(response);
}

export async function postJson(path, body = {}) {
  const response = await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", "X-Fevex-Request": "1" }),
    body: JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  });
  return answer(response);
}

export function runPath(runId, suffix = "") {
  return "/v1/runs/" + encodeURIComponent(runId) + suffix;
}

const sleep = (milliseconds) => new Promise((resolve) => setTimeout(resolve, milliseconds));

// Follows a run's events over SSE with fetch (an EventSource cannot send the token),
// reconnecting after a drop with Last-Event-ID set to the last event received, so that
// each event arrives once. Calls onEvent per event, onConnect on each (re)connection,
// and onEnd with the end frame; stops when signal aborts.
export async function followRun(runId, { onEvent, onEnd, onConnect, signal }) {
  let lastEventId = null;
  let retry = 1000;
  let connections = 0;
  while (!signal.aborted) {
    const extra = { Accept: "text/event-stream" };
    if (lastEventId) extra["Last-Event-ID"] = lastEventId;
    let response;
    try {
      response = await fetch(runPath(runId, "/events/stream"), {
        headers: headers(extra),
        credentials: "same-origin",
        cache: "no-store",
        signal,
      });
    } catch {
      if (signal.aborted) return;
      await sleep(retry);
      continue;
    }
    if (!response.ok) {
      await answer(response);
      return;
    }
    connections += 1;
    onConnect(connections);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let boundary;
        while ((boundary = buffer.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffer.slice(0, boundary));
          buffer = buffer.slice(boundary + 2);
          if (frame.retry) retry = frame.retry;
          if (frame.event === "end") {
            onEnd(JSON.parse(frame.data));
            return;
          }
          if (frame.data) {
            if (frame.id) lastEventId = frame.id;
            onEvent(JSON.parse(frame.data));
          }
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    // Cut without its end frame: reconnect after the server's retry delay.
    await sleep(retry);
  }
}

function parseFrame(text) {
  const frame = { id: null, event: "message", data: "", retry: null };
  const data = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") frame.id = value;
    else if (field === "event") frame.event = value;
    else if (field === "data") data.push(value);
    else if (field === "retry" && /^\d+$/.test(value)) frame.retry = Number(value);
  }
  frame.data = data.join("\n");
  return frame;
}
