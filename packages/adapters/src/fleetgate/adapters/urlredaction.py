"""The password of a ``scheme://user:password@`` URL inside any text, masked: the one rule.

A module of its own, on the standard library only, because every error line the CLI prints passes
through it (``fleetgate.apps.redaction``): a client command that reports the API's refusal must
not load the plugin machinery and the domain behind ``fleetgate.adapters.plugins`` to do so.
"""

from __future__ import annotations

import re

#: ``scheme://user:password@``: the password part of any URL inside a longer text.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)([^\s@]*)(@)")


def redact_urls(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` URL in it hidden."""
    return _URL_PASSWORD.sub(r"\1***\3", text)


__all__ = ["redact_urls"]
