"""HTTP for the typed client on the standard library: one kept-alive connection per origin.

The client used httpx; importing it (with httpcore, h11, and trio or anyio where installed, and
httpx's own command-line tool) took longer than the rest of ``fleetgate nodes`` together
(docs/performance.md, CLI start-up). This is what the client needs of it, and no more:

* keep-alive: the pages of a listing go over one connection;
* TLS verified as httpx verified it: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's
  bundle (the system's when certifi is not installed), host names checked;
* one timeout per connect and per read;
* ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` and ``NO_PROXY`` from the environment, read
  only when one of them is set;
* user:password in the server URL is sent as Basic authentication, as httpx sent it;
* the failures httpx called transport errors raise :class:`Unreachable`.

A test hands the client any object with ``request`` and ``close`` (:class:`Transport`).
"""

from __future__ import annotations

import json
import os
from base64 import b64encode
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from typing import Any, Protocol
from urllib.parse import quote, unquote, urlencode, urlsplit

#: Percent-encoding leaves these as they are (RFC 3986 pchar, "/" and "%"; httpx's choice).
_PATH_SAFE = "/!$&'()*+,;=:@%~"
_QUERY_SAFE = _PATH_SAFE + "?"


class Unreachable(Exception):
    """No answer: the connection, TLS, the proxy or the read failed (or the URL is unusable)."""


@dataclass(frozen=True)
class Response:
    """An answer: status, reason phrase, headers (names lower-cased) and body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes

    @property
    def is_error(self) -> bool:
        return self.status >= 400

    @property
    def text(self) -> str:
        charset = "utf-8"
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"')
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)

    def next_link(self) -> str | None:
        """The ``Link: <url>; rel="next"`` target, if any (RFC 8288)."""
        for link in self.headers.get("link", "").split(","):
            url, _, params = link.partition(";")
            rels = [p.strip() for p in params.split(";") if p.strip().startswith("rel=")]
            if any(r.split("=", 1)[1].strip("\"'").split().count("next") for r in rels):
                return url.strip().strip("<>") or None
        return None


class Transport(Protocol):
    """How the client sends a request: ``target`` is a path (with query) under the server, or an
    absolute URL (a next-page link)."""

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> Response: ...

    def close(self) -> None: ...


@dataclass
class HttpTransport:
    """The server at ``base`` over http.client; one connection per origin, kept alive."""

    base: str
    timeout: float = 30.0
    _connections: dict[tuple[str, str, int], HTTPConnection] = field(default_factory=dict)

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> Response:
        url = urlsplit(target if "://" in target else _join(self.base, target))
        if url.scheme not in ("http", "https"):
            raise Unreachable(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError as exc:
            raise Unreachable(str(exc)) from None
        host = url.hostname or ""
        if not host:
            raise Unreachable(f"Request URL is missing a host: {target!r}")
        path = quote(url.path or "/", safe=_PATH_SAFE)
        if url.query:
            path += "?" + quote(url.query, safe=_QUERY_SAFE)
        sent = dict(headers)
        if url.username is not None or url.password is not None:
            pair = f"{unquote(url.username or '')}:{unquote(url.password or '')}"
            sent["Authorization"] = "Basic " + b64encode(pair.encode()).decode("ascii")
        key = (url.scheme, host, port)
        proxy = _proxy_for(url.scheme, host)
        if proxy is not None and url.scheme == "http":
            path = f"http://{url.netloc.rpartition('@')[2]}{path}"  # a proxy takes the whole URL
        for attempt in (1, 2):
            reused = key in self._connections
            conn = self._connection(key, proxy)
            try:
                conn.request(method, path, body=body, headers=sent)
                answer = conn.getresponse()
                data = answer.read()
            except (OSError, HTTPException) as exc:
                self._drop(key)
                # A kept-alive connection the server had closed: send once more on a new one.
                if attempt == 1 and reused and _stale(exc):
                    continue
                raise Unreachable(_describe(exc)) from exc
            if answer.will_close:
                self._drop(key)
            names = {k.lower(): v for k, v in answer.getheaders()}
            return Response(answer.status, answer.reason, names, data)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for key in list(self._connections):
            self._drop(key)

    def _connection(self, key: tuple[str, str, int], proxy: str | None) -> HTTPConnection:
        conn = self._connections.get(key)
        if conn is None:
            scheme, host, port = key
            target_host, target_port = host, port
            if proxy is not None:
                via = urlsplit(proxy)
                target_host, target_port = via.hostname or "", via.port or 80
            if scheme == "https":
                conn = HTTPSConnection(target_host, target_port, timeout=self.timeout,
                                       context=tls_context())  # fmt: skip
            else:
                conn = HTTPConnection(target_host, target_port, timeout=self.timeout)
            if proxy is not None and scheme == "https":
                conn.set_tunnel(host, port)
            self._connections[key] = conn
        return conn

    def _drop(self, key: tuple[str, str, int]) -> None:
        conn = self._connections.pop(key, None)
        if conn is not None:
            conn.close()


def _join(base: str, target: str) -> str:
    """``target`` (a path) under ``base``, whose own path is kept as a prefix (httpx's rule)."""
    return base.rstrip("/") + "/" + target.lstrip("/")


def _stale(exc: BaseException) -> bool:
    from http.client import RemoteDisconnected

    return isinstance(exc, RemoteDisconnected | ConnectionResetError | BrokenPipeError)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if not text or text == "None":
        return type(exc).__name__
    return text


def tls_context() -> Any:
    """A verifying TLS context with httpx's trust store: SSL_CERT_FILE, SSL_CERT_DIR, certifi."""
    import ssl

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    try:
        import certifi
    except ImportError:  # no bundle installed: the system's store
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the environment names for ``scheme://host``, or None (read only when set)."""
    if not any(k.lower().endswith("_proxy") for k in os.environ):
        return None
    from urllib.request import getproxies_environment, proxy_bypass

    proxies = getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    if proxy is None or proxy_bypass(host):  # NO_PROXY
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def encode_query(params: dict[str, Any]) -> str:
    """Query parameters as httpx wrote them (``true``/``false`` for booleans)."""
    return urlencode({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()})
