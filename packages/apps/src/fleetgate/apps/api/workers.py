"""The worker processes of ``fleetgate api --workers N``, each listening on a socket of its own.

uvicorn's own supervisor hands every worker the same listening socket, and the kernel then gives
a new connection to whichever worker accepts first: a client that opens its connections at once
(a load balancer, a scheduler's pool, wrk) often found all of them on one worker, the others
idle (``ss`` showed 32 of 32 on one of two workers, in two runs of three). Here every worker has
its own socket, all bound to the same address with ``SO_REUSEPORT``, so the kernel spreads new
connections across them by their addresses. A worker that dies is replaced on the same socket
(connections that arrive meanwhile wait in its backlog); one that failed before it served stops
the whole server, since a replacement would fail the same way. A worker whose event loop stops
turning (alive, but every request stuck) stops beating: past HUNG_SECONDS it is killed and
replaced the same way, as uvicorn's own supervisor did with its ping.

A worker is a spawned process running uvicorn's public ``Server`` with a ``Config`` of its own
(the supervision, the spawning and the start-up verdict are ours, decisions.md § 23).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from types import FrameType
from typing import Any, TypeAlias

import uvicorn

_log = logging.getLogger("fleetgate.api.workers")
#: How often the supervisor looks at its workers, in seconds.
CHECK_SECONDS = 0.5
#: A worker's exit status when its server stopped before it ever served.
STARTUP_FAILED = 3
#: How often a worker's event loop says it still turns, in seconds.
BEAT_SECONDS = 1.0
#: How long a worker may go without a beat before it is taken for hung (uvicorn's own health
#: check allowed 5 s; a loaded machine is given more, a stuck loop never beats again anyway).
HUNG_SECONDS = 10.0
#: uvicorn's own settings for a worker's Config, as keyword arguments (made in the worker).
ConfigArgs = dict[str, Any]
#: The instant (``time.monotonic``, one clock for every process) of a worker's last beat.
Beat: TypeAlias = "Synchronized[float]"


def serve_worker(config: ConfigArgs, sock: socket.socket, beat: Beat | None = None) -> None:
    """A worker process: uvicorn's ``Server`` on ``sock``; exit STARTUP_FAILED if it never served.

    uvicorn leaves a server that failed to start by ``sys.exit``; whatever the way out, a server
    that never started is a start-up failure, one that did is a worker that ended. The loop is
    the one uvicorn's ``Server.run`` would make (``Config.get_loop_factory``); beside the server
    it beats into ``beat``.
    """
    server = uvicorn.Server(uvicorn.Config(**config))
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            runner.run(_serve_beating(server, sock, beat))
    except SystemExit:
        if server.started:
            raise
    if not server.started:
        sys.exit(STARTUP_FAILED)


async def _serve_beating(server: uvicorn.Server, sock: socket.socket, beat: Beat | None) -> None:
    """``server`` on ``sock``, and a beat into ``beat`` each BEAT_SECONDS while the loop turns."""
    beating = asyncio.create_task(_beat(beat)) if beat is not None else None
    try:
        await server.serve(sockets=[sock])
    finally:
        if beating is not None:
            beating.cancel()


async def _beat(beat: Beat) -> None:
    while True:
        beat.value = time.monotonic()
        await asyncio.sleep(BEAT_SECONDS)


class Workers:
    """One worker process per listening socket, kept alive until SIGINT or SIGTERM."""

    def __init__(
        self,
        config: ConfigArgs,
        sockets: list[socket.socket],
        target: Callable[[ConfigArgs, socket.socket, Beat], None] = serve_worker,
    ) -> None:
        self._config = config
        self._sockets = sockets
        self._target = target
        self._stop = threading.Event()
        self._workers: list[BaseProcess] = []
        self._beats: list[Beat] = []
        # Spawned, not forked: a worker imports the app afresh (the parent's event loop, its
        # threads and its database connections stay behind), as uvicorn's workers do.
        self._context = multiprocessing.get_context("spawn")

    def _start(self, sock: socket.socket) -> tuple[BaseProcess, Beat]:
        # 0 until its loop first beats: the start (spawn, imports, the app's start-up) is judged
        # by how it ends, not by time, as a loaded machine can take long over it.
        beat: Beat = self._context.Value("d", 0.0, lock=False)
        worker = self._context.Process(target=self._target, args=(self._config, sock, beat))
        worker.start()
        return worker, beat

    def _stop_requested(self, _signum: int, _frame: FrameType | None) -> None:
        self._stop.set()

    def run(self) -> None:
        """Start a worker per socket, replace any that dies, stop them all when asked."""
        previous = {
            s: signal.signal(s, self._stop_requested) for s in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            for sock in self._sockets:
                worker, beat = self._start(sock)
                self._workers.append(worker)
                self._beats.append(beat)
            while not self._stop.wait(CHECK_SECONDS):
                self._kill_the_hung()
                self._replace_the_dead()
        finally:
            for worker in self._workers:
                if worker.is_alive():
                    worker.terminate()  # SIGTERM: uvicorn shuts the worker down gracefully
            for worker in self._workers:
                worker.join()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _kill_the_hung(self) -> None:
        now = time.monotonic()
        for worker, beat in zip(self._workers, self._beats, strict=True):
            if worker.is_alive() and beat.value and now - beat.value > HUNG_SECONDS:
                _log.warning("worker %s stopped answering; killing it", worker.pid)
                worker.kill()  # SIGKILL: a stuck loop would not run a graceful shutdown
                worker.join()

    def _replace_the_dead(self) -> None:
        for i, worker in enumerate(self._workers):
            if worker.is_alive():
                continue
            worker.join()
            if worker.exitcode == STARTUP_FAILED:
                _log.error("worker %s failed to start; stopping the server", worker.pid)
                self._stop.set()
                return
            if self._stop.is_set():
                return
            _log.warning("worker %s died; starting another on its socket", worker.pid)
            self._workers[i], self._beats[i] = self._start(self._sockets[i])


__all__ = [
    "BEAT_SECONDS",
    "CHECK_SECONDS",
    "HUNG_SECONDS",
    "STARTUP_FAILED",
    "ConfigArgs",
    "Workers",
    "serve_worker",
]
