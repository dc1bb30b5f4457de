"""Credentials never reach a log line or an error message: one function masks them in any text.

Every log handler (apps/logging.py) and every ``error:`` line the CLI prints passes its final text
through ``redact``. It masks by shape (a URL's password, a bearer token, an ``Authorization`` or
``Cookie`` header's value, a ``token=``/``password=``-like assignment) and by value: the secrets
this process was configured with (``hide``) are masked wherever they appear, whatever surrounds
them, because a driver or a library may print one in a shape no pattern foresaw.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urlsplit

MASK = "***"
#: Shorter values are not masked by value: a 3-character "secret" would mask ordinary words.
_MIN_HIDDEN = 6
_hidden: set[str] = set()

#: Words prose puts after a scheme's name ("a valid bearer token is required"): our own messages
#: are not credentials. A word counts only when it ends there (``token-abc`` is a credential).
_PROSE_AFTER_SCHEME = (
    "token",
    "tokens",
    "scheme",
    "auth",
    "authentication",
    "header",
    "headers",
    "credential",
    "credentials",
)
_PROSE = "|".join(_PROSE_AFTER_SCHEME)
# ``Bearer abc``/``Basic abc`` wherever it stands (a header value, a repr of the headers, a
# message): whatever follows the scheme's name is masked unless it is one of the prose words.
_SCHEME_CREDENTIAL = re.compile(
    rf"(?i)\b(bearer|basic)(\s+)(?!(?:{_PROSE})(?:[\s.,;:!?)\]}}'\"]|$))([^\s'\",;)\]}}]+)"
)
# ``authorization: x``, ``(b'cookie', b'x')``, ``"set-cookie": "x"``: a credential header's value,
# after its scheme's name if it has one (in a header, even a prose word is the credential).
_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key)"
    r"((?>['\"]?\s*[:=,]\s*(?:b(?=['\"]))?['\"]?)(?:(?:bearer|basic)\s+)?)([^'\"\r\n]+)"
)
# ``admin_token='x'``, ``?token=x``, ``"password": "x"``, ``secret=x``: a credential assignment.
_ASSIGNMENT = re.compile(
    r"(?i)\b([\w-]*(?:token|password|passwd|secret|api[_-]?key))"
    r"(['\"]?\s*[:=]\s*b?['\"]?)([^\s'\",&;)\]}]+)"
)


def hide(*values: str | None) -> None:
    """Mask these values (a configured token, a database password) in everything redacted."""
    for value in values:
        if value and len(value) >= _MIN_HIDDEN:
            _hidden.add(value)
            # As it reads inside a JSON log line, should it hold a quote or a backslash.
            _hidden.add(json.dumps(value)[1:-1])


def hide_url_password(url: str | None) -> None:
    """Mask the password of ``url`` (a database URL), if it has one."""
    if not url:
        return
    try:
        password = urlsplit(url).password
    except ValueError:  # not a URL urllib reads; the URL pattern still masks it by shape
        return
    # As written in the URL and as the driver receives it (``%40`` is ``@``).
    hide(password, unquote(password) if password else None)


# Every shape masked below needs one of these words (any case) or a URL's ``://``. Most lines
# (every request's access line) hold none: looking for them costs a few microseconds where the
# four patterns cost tens, on every request.
_SHAPE_WORDS = (
    "://",
    "bearer",
    "basic",
    "authorization",
    "cookie",
    "api",
    "token",
    "password",
    "passwd",
    "secret",
)


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``***``."""
    for value in sorted(_hidden, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    # Only ASCII text may skip the patterns: there, ignoring case is plain lower-casing, while in
    # Unicode a pattern's ``k`` also matches the Kelvin sign and its ``s`` the long s.
    if text.isascii():
        lowered = text.lower()
        if not any(word in lowered for word in _SHAPE_WORDS):
            return text
    return redact_shapes(text)


def redact_shapes(text: str) -> str:
    """``text`` with every credential of a known shape masked (the patterns, always run)."""
    # Imported here, not at the top: a client command that prints no error loads nothing of the
    # adapters; one that does loads this one module (the standard library's re), not the plugins.
    from fleetgate.adapters.urlredaction import redact_urls

    text = redact_urls(text)
    text = _SCHEME_CREDENTIAL.sub(rf"\1\2{MASK}", text)
    text = _HEADER.sub(rf"\1\2{MASK}", text)
    return _ASSIGNMENT.sub(_masked_assignment, text)


def _masked_assignment(match: re.Match[str]) -> str:
    if match.group(3) == MASK:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{MASK}"


def error_markup(message: str) -> str:
    """``error: <message>`` as rich markup: the message redacted and shown literally.

    Rich reads ``[a-z0-9]`` in an error text (a namespace pattern) as a style tag and drops it;
    every error the CLI prints goes through here so that what the operator reads is the text.
    """
    from rich.markup import escape  # only the CLI's rich output needs it

    return f"[red]error:[/red] {escape(redact(message))}"
