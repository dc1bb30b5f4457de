// fleetgate dashboard: poll /dashboard/data and swap in the sections the server rendered.
// No framework and no build step: the server renders all HTML; this only refreshes it.
"use strict";

(function () {
  const PERIOD_MS = 1500;
  const SECTIONS = ["summary", "pools", "nodes", "claims", "namespaces", "events"];
  const live = document.getElementById("live");

  function show(state, text) {
    live.dataset.state = state;
    live.textContent = text;
  }

  async function refresh() {
    try {
      const response = await fetch("/dashboard/data", {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "application/json" },
      });
      if (response.status === 401) {
        show("signed-out", "signed out: reopen the link fleetgate up printed");
        return;
      }
      if (!response.ok) {
        show("error", "refresh failed (" + response.status + ")");
        return;
      }
      const body = await response.json();
      for (const id of SECTIONS) {
        const element = document.getElementById(id);
        if (element && typeof body.html[id] === "string") {
          element.innerHTML = body.html[id];
        }
      }
      document.body.dataset.refreshed = String(Date.now());
      show("live", "live · " + new Date().toLocaleTimeString());
    } catch (error) {
      show("error", "fleetgate is not answering");
    }
  }

  refresh();
  setInterval(refresh, PERIOD_MS);
})();
