// The What-if page: send the form to /dashboard/whatif and show the two answers side by side.
"use strict";

(function () {
  const form = document.getElementById("whatif");
  const status = document.getElementById("status");
  const results = document.getElementById("results");
  const value = (id) => document.getElementById(id).value;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.dataset.state = "running";
    status.textContent = "simulating…";
    const body = {
      policies: [value("policy-a"), value("policy-b")],
      count: Number.parseInt(value("count"), 10),
      spread: value("spread"),
      expireAfter: value("expire"),
      terminationGracePeriod: value("tgp"),
      span: value("span"),
    };
    try {
      const response = await fetch("/dashboard/whatif", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        credentials: "same-origin",
        body: JSON.stringify(body),
      });
      const answer = await response.json();
      if (!response.ok) {
        // The previous run's results answered other inputs: never leave them beside an error.
        results.innerHTML = "";
        status.dataset.state = "error";
        status.textContent = answer.message || `error ${response.status}`;
        return;
      }
      results.innerHTML = answer.html; // rendered and escaped by the server
      status.dataset.state = "done";
      status.textContent = "done";
    } catch (error) {
      results.innerHTML = "";
      status.dataset.state = "error";
      status.textContent = String(error);
    }
  });
})();
