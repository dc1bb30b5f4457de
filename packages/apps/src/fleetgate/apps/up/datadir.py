"""The data directory of ``fleetgate up`` and the lock that keeps one instance in it.

``up`` starts on a fresh database, so it deletes the previous run's file. Without a lock a
second ``up`` started in the same directory would delete the *running* instance's database
(which then answers ``no such table``). The lock is an exclusive ``flock`` on
``<directory>/up.lock``: the kernel drops it when the holder exits, however it exits, so a
crashed instance never leaves a stale lock behind. The holder writes its pid and port into the
file so that the refused one can say which instance is running.

The lock file itself is never removed: removing it while another process has it open would let
two processes lock two different files of the same name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

LOCK_NAME = "up.lock"


@dataclass(frozen=True)
class Holder:
    """The running instance that holds a data directory: its pid and the port it serves on."""

    pid: int
    port: int


class AlreadyRunning(RuntimeError):
    """Another ``fleetgate up`` holds the data directory; the message is one line."""


class DataDirLock:
    """An exclusive lock on ``directory`` for one ``fleetgate up`` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (creating the directory), or AlreadyRunning naming the holder."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(self.refusal()) from None
        os.ftruncate(fd, 0)  # the previous holder's record is stale from here on
        self._fd = fd

    def record(self, port: int) -> None:
        """Write this process's pid and ``port`` into the held lock file."""
        if self._fd is None:
            raise RuntimeError("record() needs the lock held")
        os.pwrite(self._fd, f"{os.getpid()} {port}\n".encode(), 0)

    def release(self) -> None:
        """Drop the lock (the file stays: see the module docstring)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def holder(self) -> Holder | None:
        """The live instance recorded in the lock file, without touching it; None when there is
        none (no file, nothing recorded yet, or its process has gone)."""
        try:
            pid_text, port_text = self.path.read_text().split()
            found = Holder(int(pid_text), int(port_text))
        except (OSError, ValueError):
            return None
        try:
            os.kill(found.pid, 0)  # signal 0: only asks whether the process exists
        except ProcessLookupError:
            return None
        except PermissionError:  # it exists, as another user
            pass
        return found

    def refusal(self) -> str:
        """The one line a second instance prints when the lock is held."""
        where = str(self.directory.resolve())
        found = self.holder()
        who = f" (pid {found.pid}, port {found.port})" if found else ""
        return (
            f"another fleetgate up is running from {where}{who}; stop it first, "
            "or start this one in another directory"
        )

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        with contextlib.suppress(OSError):
            self.release()
