"""Leader election on a ``coordination.k8s.io/v1`` Lease: of N replicas, one acts.

The algorithm is client-go's, restated: a candidate reads the Lease; it may take it when nobody
holds it, when it holds it already (a renewal), or when the holder has not renewed for the
Lease's ``leaseDurationSeconds`` *as observed on this candidate's own monotonic clock* (so
clock skew between nodes cannot shorten a lease). Every write is a replace carrying the
``resourceVersion`` just read, so two candidates can never both win: the loser gets 409, which
is the normal outcome of a race, not an error. Leadership is bounded by an absolute deadline:
``renew_deadline`` after the start of the last successful renewal. When it passes the work is
cancelled at once, whatever request is in flight, and the replica campaigns again; since
``renew_deadline < lease_duration`` and a rival waits ``lease_duration`` from when *it* saw that
renewal, the two never act together. Every failed request (an API error, a dropped connection,
any transport error, a timeout) is one failed attempt, never a crash. Retries while campaigning
are jittered so replicas that lost together do not retry in lock-step. On shutdown the
leader *releases* the Lease (empty holder, 1 s duration) so the next replica takes over at
once instead of waiting out the lease.

Written here rather than using ``kubernetes_asyncio.leaderelection`` because that one cannot
release on shutdown, logs every lost race as an exception, and needs whole-second timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

_log = logging.getLogger(__name__)

#: How far a campaigning retry may stretch past ``retry_period``: client-go's jitter factor.
JITTER_FACTOR = 1.2

#: What one lease request can fail with: each is a failed attempt, never the end of ``run``.
#: ``aiohttp.ClientError`` covers a dropped connection (``ServerDisconnectedError`` is not an
#: ``OSError``); ``ApiException`` an unexpected status; ``TimeoutError`` a hung request.
ATTEMPT_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    OSError,
    aiohttp.ClientError,
    ApiException,
)


def default_identity() -> str:
    """This replica's Lease identity: the Pod name in a pod, else host + a per-process suffix.

    Two processes on one host must never share an identity, or both would believe they hold
    the lease; so outside a pod the hostname gets a random suffix, as client-go's callers do.
    """
    pod = os.environ.get("POD_NAME")
    if pod:
        return pod
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


def micro_time(at: datetime) -> str:
    """A Kubernetes ``MicroTime``: RFC3339 with microseconds, UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for one Lease and runs the given work only while holding it."""

    def __init__(
        self,
        api_client: Callable[[], Awaitable[client.ApiClient]],
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "lease_duration: leader election needs lease_duration > renew_deadline > "
                f"retry_period > 0, got {lease_duration} > {renew_deadline} > {retry_period}"
            )
        self._api_client = api_client
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._monotonic, self._wall, self._jitter = monotonic, wall, jitter
        self._renewed_at = 0.0  # start of the last successful attempt, on ``monotonic``
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._leading = False

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the Lease: readiness follows this."""
        return self._leading

    async def run(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign; run ``work`` while leading; cancel it on loss and campaign again.

        Returns when ``work`` returns; re-raises what it raises. Cancelling ``run`` (shutdown)
        cancels the work and releases the Lease.
        """
        try:
            while True:
                await self._acquire()
                self._leading = True
                _log.info(
                    "leader election: %s leads %s/%s", self.identity, self.namespace, self.name
                )
                task: asyncio.Task[None] = asyncio.create_task(work())
                try:
                    lost = await self._hold(task)
                finally:
                    self._leading = False
                    if not task.done():
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
                if not lost:
                    task.result()  # re-raise the work's failure, if any
                    return
                _log.warning(
                    "leader election: %s lost %s/%s; its work was stopped",
                    self.identity,
                    self.namespace,
                    self.name,
                )
        finally:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.release()), timeout=self.renew_deadline)

    async def _acquire(self) -> None:
        while True:
            started = self._monotonic()
            if await self._attempt(self.renew_deadline):
                self._renewed_at = started
                return
            await asyncio.sleep(self.retry_pause())

    def retry_pause(self) -> float:
        """How long to wait before the next campaign attempt: ``retry_period``, jittered."""
        return self.retry_period * (1.0 + JITTER_FACTOR * self._jitter())

    async def _attempt(self, bound: float) -> bool:
        """One attempt bounded by ``bound`` seconds; any failure (``ATTEMPT_ERRORS``) is False."""
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout=max(bound, 0.0))
        except ATTEMPT_ERRORS as exc:
            _log.warning(
                "leader election: lease request failed: %s", str(exc) or type(exc).__name__
            )
            return False

    async def _hold(self, task: asyncio.Task[None]) -> bool:
        """Renew every ``retry_period`` until the work ends (False) or the lease is lost (True).

        Lost means: the absolute deadline (last successful renewal + ``renew_deadline``) passed,
        even in the middle of a request, or another holder was seen.
        """
        while True:
            deadline = self._renewed_at + self.renew_deadline
            pause = min(self.retry_period, deadline - self._monotonic())
            if pause > 0:
                await asyncio.wait({task}, timeout=pause)
            if task.done():
                return False
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                return True
            started = self._monotonic()
            renewal = asyncio.create_task(self._attempt(remaining))
            try:
                await asyncio.wait({task, renewal}, timeout=remaining)
            finally:
                if not renewal.done():
                    renewal.cancel()
            if task.done():
                return False
            if not renewal.done() or renewal.cancelled():
                return True  # the deadline passed with the request still in flight
            if renewal.result():
                self._renewed_at = started
            elif self._held_by_other():
                return True

    def _held_by_other(self) -> bool:
        return self._observed is not None and self._observed[0] not in ("", self.identity)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or renew the Lease; False on any lost race or API error."""
        api = await self._api_client()
        leases = client.CoordinationV1Api(api)
        now = micro_time(self._wall())
        try:
            current = await leases.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                _log.warning("leader election: cannot read lease: %s %s", exc.status, exc.reason)
                return False
            return await self._create(leases, now)
        lease: dict[str, Any] = api.sanitize_for_serialization(current)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (
            holder,
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseDurationSeconds"),
        )
        if record != self._observed:
            self._observed, self._observed_at = record, self._monotonic()
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        if holder not in ("", self.identity) and (
            self._observed_at + float(duration) > self._monotonic()
        ):
            return False  # somebody else holds a lease that has not run out
        mine = holder == self.identity
        lease["spec"] = {
            **spec,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "renewTime": now,
            "acquireTime": spec.get("acquireTime") if mine else now,
            "leaseTransitions": (spec.get("leaseTransitions") or 0) + (0 if mine else 1),
        }
        return await self._replace(leases, lease)

    async def _create(self, leases: client.CoordinationV1Api, now: str) -> bool:
        body: Any = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": math.ceil(self.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        try:
            await leases.create_namespaced_lease(self.namespace, body)
        except ApiException as exc:
            if exc.status != 409:  # 409: another replica created it first; a normal race
                _log.warning("leader election: cannot create lease: %s %s", exc.status, exc.reason)
            return False
        self._observed = (self.identity, now, now, math.ceil(self.lease_duration))
        self._observed_at = self._monotonic()
        return True

    async def _replace(self, leases: client.CoordinationV1Api, lease: Any) -> bool:
        try:
            await leases.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            if exc.status != 409:  # 409: somebody wrote since we read; try again next period
                _log.warning("leader election: cannot update lease: %s %s", exc.status, exc.reason)
            return False
        spec = lease["spec"]
        self._observed = (
            spec["holderIdentity"],
            spec["renewTime"],
            spec["acquireTime"],
            spec["leaseDurationSeconds"],
        )
        self._observed_at = self._monotonic()
        return True

    async def release(self) -> bool:
        """Give the Lease up if this replica holds it, so a successor need not wait it out."""
        try:
            api = await self._api_client()
            leases = client.CoordinationV1Api(api)
            current = await leases.read_namespaced_lease(self.name, self.namespace)
            lease: Any = api.sanitize_for_serialization(current)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return False
            now = micro_time(self._wall())
            spec.pop("holderIdentity", None)
            lease["spec"] = {
                **spec,
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            await leases.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception:  # shutting down: a lease we cannot release simply runs out
            _log.warning("leader election: could not release the lease", exc_info=True)
            return False
        _log.info("leader election: %s released %s/%s", self.identity, self.namespace, self.name)
        return True
