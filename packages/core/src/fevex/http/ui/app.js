// The console's entry: the credentials form and the routes #/ (runs), #/runs/<id> and
// #/runs/<id>/events/<sequence> (a run's page at one of its events).
import { setToken, token } from "./api.js";
import { showRun } from "./run_page.js";
import { showRuns } from "./runs_page.js";

let current = null;

function route() {
  if (current) current.abort();
  current = new AbortController();
  const main = document.getElementById("main");
  const match = /^#\/runs\/([^/]+)(?:\/events\/(\d+))?$/.exec(location.hash);
  if (match) showRun(main, decodeURIComponent(match[1]), current.signal, match[2] ? Number(match[2]) : null);
  else showRuns(main, current.signal);
}

function start() {
  const field = document.getElementById("token");
  field.value = token();
  document.getElementById("credentials").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(field.value.trim());
    route();
  });
  window.addEventListener("hashchange", route);
  route();
}

start();
