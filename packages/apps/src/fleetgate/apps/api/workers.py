"""The worker processes of ``fleetgate api --workers N``, each listening on a socket of its own.

uvicorn's own supervisor hands every worker the same listening socket, and the kernel then gives
a new connection to whichever worker accepts first: a client that opens its connections at once
(a load balancer, a scheduler's pool, wrk) often found all of them on one worker, the others
idle (``ss`` showed 32 of 32 on one of two workers, in two runs of three). Here every worker has
its own socket, all bound to the same address with ``SO_REUSEPORT``, so the kernel spreads new
connections across them by their addresses. A worker that dies is replaced on the same socket
(connections that arrive meanwhile wait in its backlog); one that failed before it served stops
the whole server, as uvicorn's does, since a replacement would fail the same way.

Each worker is uvicorn's own ``Process`` (its spawn, its health ping); only the supervision loop
is ours.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Process

_log = logging.getLogger("fleetgate.api.workers")
#: How often the supervisor looks at its workers, in seconds.
CHECK_SECONDS = 0.5


class Workers:
    """One worker process per listening socket, kept alive until SIGINT or SIGTERM."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        self._config = config
        self._sockets = sockets
        self._stop = threading.Event()
        self._workers: list[Process] = []

    def _start(self, sock: socket.socket) -> Process:
        worker = Process(self._config, [sock])
        worker.start()
        return worker

    def _stop_requested(self, _signum: int, _frame: FrameType | None) -> None:
        self._stop.set()

    def run(self) -> None:
        """Start a worker per socket, replace any that dies, stop them all when asked."""
        previous = {
            s: signal.signal(s, self._stop_requested) for s in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            self._workers = [self._start(sock) for sock in self._sockets]
            while not self._stop.wait(CHECK_SECONDS):
                self._replace_the_dead()
        finally:
            for worker in self._workers:
                worker.terminate()
            for worker in self._workers:
                worker.join()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _replace_the_dead(self) -> None:
        for i, worker in enumerate(self._workers):
            if worker.is_alive(timeout=self._config.timeout_worker_healthcheck):
                continue
            worker.kill()  # hung, or already gone
            worker.join()
            if worker.exitcode == STARTUP_FAILURE:
                _log.error("worker %s failed to start; stopping the server", worker.pid)
                self._stop.set()
                return
            if self._stop.is_set():
                return
            _log.warning("worker %s died; starting another on its socket", worker.pid)
            self._workers[i] = self._start(self._sockets[i])


__all__ = ["CHECK_SECONDS", "Workers"]
