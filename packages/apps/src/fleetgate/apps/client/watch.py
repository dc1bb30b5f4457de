"""``--watch``: poll the API and print what is new, until Ctrl-C (or ``--watch-count`` polls).

Polling, not a stream: the API has no watch endpoint, and a poll every few seconds costs it one
indexed read. Events are printed oldest first, each once (the poll asks for ids after the last
one seen); the rotation status is printed again whenever its answer changes.
"""

from __future__ import annotations

import time
from itertools import count

import click

from fleetgate.apps.client import views
from fleetgate.apps.client.calls import EXIT_OK, call, note
from fleetgate.apps.client.output import Output, render

#: The pause between polls; a test replaces it to act between two polls in virtual time.
pause = time.sleep


def _polls(watch_count: int) -> range | count[int]:
    return range(watch_count) if watch_count else count()


def watch_events(
    server: str,
    token: str | None,
    output: Output,
    namespace: str | None,
    kind: str | None,
    limit: int,
    interval: float,
    watch_count: int,
) -> int:
    """Print the newest ``limit`` events oldest first, then each new one as it is recorded."""
    from fleetgate.apps.client.api import FleetgateClient
    from fleetgate.apps.client.bodies import EventBody

    def fetch(after: int) -> list[EventBody]:
        def ask(api: FleetgateClient) -> list[EventBody]:
            if after == 0:  # the first answer: the newest ones, shown oldest first
                newest = api.events(namespace=namespace, kind=kind, limit=limit, newest_first=True)
                return newest[::-1]
            return api.events(namespace=namespace, kind=kind, limit=limit, after_id=after)

        return call(server, token, ask)

    after, header = 0, True
    try:
        for poll in _polls(watch_count):
            if poll:
                pause(interval)
            found = fetch(after)
            if not found:
                continue
            after = found[-1].id
            text = render(found, output, views.EVENTS)
            if output in (Output.table, Output.wide) and not header:
                text = text.split("\n", 1)[1]  # one header for the whole watch, as kubectl
            header = False
            click.echo(text)
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def watch_status(
    server: str, token: str | None, output: Output, interval: float, watch_count: int, empty: str
) -> int:
    """Print every pool's rotation standing, and again each time it changes."""
    shown: str | None = None
    try:
        for poll in _polls(watch_count):
            if poll:
                pause(interval)
            text = render(call(server, token, lambda api: api.rotation_status()), output,
                          views.STATUS)  # fmt: skip
            if text == shown:
                continue
            if text or output not in (Output.table, Output.wide):
                click.echo(text)
            else:
                note(empty)
            shown = text
    except KeyboardInterrupt:
        pass
    return EXIT_OK
