"""``--watch``: poll the API and print what is new, until Ctrl-C (or ``--watch-count`` polls).

Polling, not a stream: the API has no watch endpoint, and a poll every few seconds costs it one
indexed read. As ``kubectl get --watch``: the first poll prints every row, each later one the rows
that appeared or changed, and a row that went away once more as it was last seen. Events are
only ever added: they are printed oldest first, each once (a poll asks for ids after the last
one seen). The columns keep the widths of the first rows printed and the header is printed
once; ``-o json`` is one JSON document per line (``output.Printer``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from itertools import count
from typing import TYPE_CHECKING, Any

import click

from fleetgate.apps.client.calls import EXIT_OK, call, note, printer, show
from fleetgate.apps.client.output import Body, Output, Printer, View

if TYPE_CHECKING:
    from fleetgate.apps.client.api import FleetgateClient
    from fleetgate.apps.client.bodies import EventBody

#: The pause between polls; a test replaces it to act between two polls in virtual time.
pause = time.sleep


def _polls(watch_count: int) -> range | count[int]:
    return range(watch_count) if watch_count else count()


class Watch:
    """Prints poll after poll of one listing, as ``--watch`` asks."""

    def __init__(self, output: Output, view: View, headers: bool, empty: str) -> None:
        self.output, self.view, self.headers, self.empty = output, view, headers, empty
        self._printer: Printer | None = None
        self._printed = False

    def print(self, rows: Sequence[Body]) -> None:
        """Print ``rows`` (a batch), in the widths of the first batch printed."""
        if self._printer is None:  # made after the first answer: it says whose clock it is on
            self._printer = printer(self.output, self.view, self.headers, stream=True)
        text = self._printer.render(rows)
        if text:
            click.echo(text)
            self._printed = True

    def first_was_empty(self) -> None:
        """Say why nothing was printed (once, after the first poll), as a listing would."""
        if not self._printed:
            note(self.empty)


def watch_rows(
    fetch: Callable[[], Sequence[Body]],
    key: Callable[[Any], Hashable],
    watch: Watch,
    interval: float,
    watch_count: int,
) -> int:
    """Print every row, then each row that appears, changes or goes, poll after poll."""
    seen: dict[Hashable, Body] = {}
    try:
        for poll in _polls(watch_count):
            if poll:
                pause(interval)
            rows = fetch()
            current = {key(r): r for r in rows}
            changed = [r for k, r in current.items() if _changed(seen.get(k), r)]
            gone = [r for k, r in seen.items() if k not in current]
            seen = current
            watch.print([*changed, *gone])
            if poll == 0:
                watch.first_was_empty()
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def list_rows(
    fetch: Callable[[], Sequence[Body]],
    key: Callable[[Any], Hashable],
    view: View,
    empty: str,
    output: Output,
    headers: bool,
    watch: bool,
    interval: float,
    watch_count: int,
) -> None:
    """A list command's one body: print the rows once, or (``--watch``) poll after poll."""
    if watch:
        shown = Watch(output, view, headers, empty)
        raise click.exceptions.Exit(watch_rows(fetch, key, shown, interval, watch_count))
    show(fetch(), output, view, empty, headers)


def _changed(before: Body | None, now: Body) -> bool:
    return before is None or before.model_dump(mode="json") != now.model_dump(mode="json")


def watch_events(
    server: str,
    token: str | None,
    namespace: str | None,
    kind: str | None,
    limit: int,
    interval: float,
    watch_count: int,
    watch: Watch,
) -> int:
    """Print the newest ``limit`` events oldest first, then each new one as it is recorded."""

    def fetch(after: int) -> list[EventBody]:
        def ask(api: FleetgateClient) -> list[EventBody]:
            if after == 0:  # the first answer: the newest ones, shown oldest first
                newest = api.events(namespace=namespace, kind=kind, limit=limit, newest_first=True)
                return newest[::-1]
            return api.events(namespace=namespace, kind=kind, limit=limit, after_id=after)

        return call(server, token, ask)

    after = 0
    try:
        for poll in _polls(watch_count):
            if poll:
                pause(interval)
            found = fetch(after)
            if found:
                after = found[-1].id
                watch.print(found)
            if poll == 0:
                watch.first_was_empty()
    except KeyboardInterrupt:
        pass
    return EXIT_OK
