"""Drive the API with ``wrk``, a load generator written in C, so the client costs the server little.

A Python client (httpx) spent as much CPU per request as the server it measured, on the same two
cores: the numbers it gave were the client's as much as the server's (issue 30). ``wrk`` sends
``POST …/placements`` from a Lua script, each with a unique ``request_id`` (as a retrying
scheduler sends), or without one for the baseline; its ``done`` hook prints one JSON line with
the latency percentiles and the count of each status code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: How to get ``wrk`` where it is missing (said by ``require``).
INSTALL = "install it with `apt-get install -y wrk` (Debian, Ubuntu) or `brew install wrk` (macOS)"

_SCRIPT = r"""
local threads = {}
local counter = 1

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  prefix = args[1] .. "-" .. tid
  with_id = args[2] == "id"
  n = 0
  statuses = {}
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. args[3]
end

function request()
  n = n + 1
  local body
  if with_id then
    body = string.format(
      '{"cpus":%s,"memory_mb":%s,"disk_gb":%s,"request_id":"%s-%d"}',
      args_cpus, args_memory, args_disk, prefix, n)
  else
    body = string.format('{"cpus":%s,"memory_mb":%s,"disk_gb":%s}',
      args_cpus, args_memory, args_disk)
  end
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local counts = {}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    for code, k in pairs(s) do
      counts[tostring(code)] = (counts[tostring(code)] or 0) + k
    end
  end
  local parts = {}
  for code, k in pairs(counts) do
    table.insert(parts, string.format('"%s":%d', code, k))
  end
  io.write(string.format(
    'WRK-RESULT {"requests":%d,"seconds":%f,"p50_us":%f,"p99_us":%f,"errors":%d,"statuses":{%s}}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ",")))
end
"""


def require() -> str:
    """The path of ``wrk``, or RuntimeError saying how to install it."""
    found = shutil.which("wrk")
    if found is None:
        raise RuntimeError(
            f"the HTTP benchmark drives the API with wrk, which is missing: {INSTALL}"
        )
    return found


@dataclass
class WrkRun:
    """What one ``wrk`` run saw: requests, their status codes, and latency percentiles."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    statuses: dict[str, int] = field(default_factory=dict)

    def count(self, status: int) -> int:
        """Responses with ``status``."""
        return self.statuses.get(str(status), 0)


def run(
    base: str,
    path: str,
    token: str,
    body: dict[str, int],
    *,
    connections: int,
    seconds: float,
    request_ids: str | None,
    threads: int = 2,
) -> WrkRun:
    """``wrk`` against ``base + path`` for ``seconds`` over ``connections`` connections.

    ``request_ids``: a prefix for unique request ids (``None``: requests carry none).
    """
    binary = require()
    # The body's sizes are spliced into the script: wrk passes only strings to init().
    script = _SCRIPT.replace("args_cpus", str(body["cpus"]))
    script = script.replace("args_memory", str(body["memory_mb"]))
    script = script.replace("args_disk", str(body["disk_gb"]))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        lua = f.name
    try:
        out = subprocess.run(
            [
                binary,
                "-t",
                str(min(threads, connections)),
                "-c",
                str(connections),
                "-d",
                f"{max(1, round(seconds))}s",
                "--timeout",
                "30s",
                "-s",
                lua,
                base + path,
                "--",
                request_ids or "none",
                "id" if request_ids else "none",
                token,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        Path(lua).unlink(missing_ok=True)
    line = next(x for x in out.splitlines() if x.startswith("WRK-RESULT "))
    data = json.loads(line.removeprefix("WRK-RESULT "))
    return WrkRun(
        requests=int(data["requests"]),
        seconds=float(data["seconds"]),
        p50_ms=float(data["p50_us"]) / 1000.0,
        p99_ms=float(data["p99_us"]) / 1000.0,
        errors=int(data["errors"]),
        statuses={str(k): int(v) for k, v in data["statuses"].items()},
    )
