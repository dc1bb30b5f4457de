// The What-if page: send the form to /dashboard/whatif and show the two answers side by side.
// The answer streams as JSON lines: how far each simulation got (a simulated day at a time),
// then the result. A run that takes longer than a second shows its progress; Cancel ends it
// (the server stops the simulation when the request goes away).
"use strict";

(function () {
  const form = document.getElementById("whatif");
  const status = document.getElementById("status");
  const results = document.getElementById("results");
  const bar = document.getElementById("progress");
  const cancel = document.getElementById("cancel");
  const value = (id) => document.getElementById(id).value;
  const SHOW_AFTER_MS = 1000;
  let running = null; // { controller, timer } of the run under way

  const say = (state, text) => {
    status.dataset.state = state;
    status.textContent = text;
  };

  // The previous run's results answered other inputs: never leave them beside an error.
  const fail = (message) => {
    results.innerHTML = "";
    say("error", message);
  };

  const finish = () => {
    if (running !== null) {
      clearTimeout(running.timer);
    }
    running = null;
    bar.hidden = true;
    cancel.hidden = true;
  };

  // How far the run got: each side's simulated days (A first, then B).
  const progress = (item, sides) => {
    const fraction = (sides.indexOf(item.side) + item.day / item.days) / sides.length;
    bar.value = Math.min(fraction, 1);
    bar.dataset.side = item.side;
    bar.dataset.day = String(item.day);
    say("running", `simulating ${item.side}: day ${item.day} of ${item.days}`);
  };

  // Every complete line of the stream, as it arrives.
  async function* lines(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { done, value: chunk } = await reader.read();
      buffered += decoder.decode(chunk || new Uint8Array(), { stream: !done });
      let end = buffered.indexOf("\n");
      while (end >= 0) {
        const line = buffered.slice(0, end).trim();
        buffered = buffered.slice(end + 1);
        if (line) {
          yield JSON.parse(line);
        }
        end = buffered.indexOf("\n");
      }
      if (done) {
        return;
      }
    }
  }

  cancel.addEventListener("click", () => {
    if (running !== null) {
      running.controller.abort();
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running !== null) {
      return; // one run at a time: Cancel first
    }
    const controller = new AbortController();
    const timer = setTimeout(() => {
      bar.hidden = false;
    }, SHOW_AFTER_MS);
    running = { controller, timer };
    bar.value = 0;
    cancel.hidden = false;
    say("running", "simulating…");
    const policies = [value("policy-a"), value("policy-b")];
    const sides = ["A", "B"].slice(0, policies.length);
    const body = {
      policies,
      count: Number.parseInt(value("count"), 10),
      spread: value("spread"),
      expireAfter: value("expire"),
      terminationGracePeriod: value("tgp"),
      span: value("span"),
      // The optional ledger: the server turns it into the fleet file's ledger section.
      ledger: document.getElementById("ledger").checked
        ? {
            fill: Number.parseInt(value("fill"), 10),
            nodeCpu: Number.parseInt(value("node-cpu"), 10),
            launchCpu: Number.parseInt(value("launch-cpu"), 10),
            gate: document.getElementById("gate").checked,
          }
        : null,
    };
    try {
      const response = await fetch("/dashboard/whatif", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        credentials: "same-origin",
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) {
        const refusal = await response.json();
        fail(refusal.message || `error ${response.status}`);
        return;
      }
      let answered = false;
      for await (const item of lines(response)) {
        if (item.progress) {
          progress(item.progress, sides);
        } else if (item.error) {
          answered = true;
          fail(item.message);
        } else {
          answered = true;
          results.innerHTML = item.html; // rendered and escaped by the server
          say("done", "done");
        }
      }
      if (!answered) {
        fail("the answer ended early");
      }
    } catch (error) {
      if (controller.signal.aborted) {
        results.innerHTML = ""; // the results shown answered other inputs
        say("cancelled", "cancelled");
      } else {
        fail(String(error));
      }
    } finally {
      finish();
    }
  });
})();
