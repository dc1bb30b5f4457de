"""``transport``, the client's HTTP on the standard library, against small real servers on
127.0.0.1 (keep-alive, TLS verification, a timeout, a dropped kept-alive connection), and the
error mapping of ``FleetgateClient`` over it and over a test transport (the seam tests use)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleetgate.apps.client.transport import HttpTransport, Response, Unreachable, encode_query
from fleetgate.client import ClientError, FleetgateClient
from tests.servers import free_port

NODE = {
    "name": "hv-1", "pool": "", "labels": {}, "threads": 8, "memory_mb": 1024, "disk_gb": 10,
    "limits": {"cpus": 24, "memory_mb": 1024, "disk_gb": 10},
    "used": {"cpus": 0, "memory_mb": 0, "disk_gb": 0}, "expected_demand": 0.0,
    "cpu_load_1": None, "cpu_schedulable": None, "schedulable": True,
    "updated_at": "2026-12-02T04:54:53.181384Z", "metrics_at": None,
}  # fmt: skip
Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Server:
    """A keep-alive HTTP/1.1 server: canned answers by path; what it saw, and its connections."""

    url: str
    answers: dict[str, Answer]
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    connections: int = 0


@contextmanager
def serving(answers: dict[str, Answer], tls: ssl.SSLContext | None = None) -> Iterator[Server]:
    server = Server("", answers)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            server.connections += 1

        def answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            server.requests.append((self.command, self.path, dict(self.headers), body))
            status, headers, data = server.answers.get(self.path.split("?")[0], (404, {}, b""))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = answer

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    scheme = "https" if tls else "http"
    server.url = f"{scheme}://localhost:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def as_json(data: Any, status: int = 200, **headers: str) -> Answer:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(data).encode()


def test_the_pages_of_a_listing_go_over_one_kept_alive_connection() -> None:
    answers = {
        "/v1/nodes": as_json([NODE], Link='</v1/nodes2?limit=1&after=hv-1>; rel="next"'),
        "/v1/nodes2": as_json([NODE | {"name": "hv-2"}]),
        "/v1/nodes/hv-1": as_json(NODE),
    }
    with serving(answers) as server, FleetgateClient(server.url, "tok") as api:
        assert [n.name for n in api.nodes(page_size=1)] == ["hv-1", "hv-2"]
        assert api.node("hv-1").name == "hv-1"
    assert server.connections == 1
    (_, first, headers, _), (_, second, _, _) = server.requests[:2]
    assert (first, second) == ("/v1/nodes?limit=1", "/v1/nodes2?limit=1&after=hv-1")
    assert headers["Authorization"] == "Bearer tok"


def test_a_server_that_closed_a_kept_alive_connection_is_asked_again_on_a_new_one() -> None:
    with serving({"/v1/nodes": as_json([NODE])}) as server:
        transport = HttpTransport(server.url, timeout=30)
        assert transport.request("GET", "/v1/nodes", {}, None).status == 200
        for conn in transport._connections.values():  # the server's side went away idle
            assert conn.sock is not None
            conn.sock.shutdown(socket.SHUT_RDWR)
        assert transport.request("GET", "/v1/nodes", {}, None).status == 200
        transport.close()
    assert server.connections == 2


def test_error_answers_map_to_the_apis_code_or_the_http_status() -> None:
    answers = {
        "/v1/nodes": as_json({"error": "unauthorized", "message": "bad token"}, 401),
        "/v1/events": (502, {"Content-Type": "text/html"}, b"<h1>Bad Gateway</h1>"),
        "/v1/rotation/status": (503, {}, b""),
    }
    with serving(answers) as server, FleetgateClient(server.url, "tok") as api:
        with pytest.raises(ClientError) as refused:
            api.nodes()
        assert (refused.value.status, refused.value.code, refused.value.message) == (
            401, "unauthorized", "bad token")  # fmt: skip
        with pytest.raises(ClientError) as proxy:
            api.events()
        assert (proxy.value.status, proxy.value.code) == (502, "http_error")
        assert proxy.value.message == "<h1>Bad Gateway</h1>"
        with pytest.raises(ClientError) as empty:
            api.rotation_status()
        assert (empty.value.status, empty.value.message) == (503, "Service Unavailable")


def test_a_write_sends_compact_json_leaving_out_what_is_unset() -> None:
    placed = {"id": "p-1", "namespace": "ns", "node": "hv-1", "cpus": 1, "memory_mb": 1,
              "disk_gb": 0, "request_id": None, "claim_id": None,
              "admitted_at": "2026-12-02T04:54:53Z", "demand_waived": False,
              "over_claim": False}  # fmt: skip
    answers = {"/v1/namespaces/ns/placements": as_json(placed, 201)}
    with serving(answers) as server, FleetgateClient(server.url + "/", "tok") as api:
        made = api.place("ns", {"cpus": 1, "memory_mb": 1, "disk_gb": 0, "node": None})
    assert made.id == "p-1" and made.over_claim_dimensions == []
    method, path, headers, body = server.requests[0]
    assert (method, path, body) == ("POST", "/v1/namespaces/ns/placements",
                                    b'{"cpus":1,"memory_mb":1,"disk_gb":0}')  # fmt: skip
    assert headers["Content-Type"] == "application/json"


def test_an_unreachable_server_and_an_unusable_url_are_unreachable_without_the_password() -> None:
    dead = f"http://fleet:pw-9@127.0.0.1:{free_port()}"
    with pytest.raises(ClientError) as refused:
        FleetgateClient(dead, "tok").nodes()
    assert refused.value.status is None and refused.value.code == "unreachable"
    assert "Connection refused" in str(refused.value) and "pw-9" not in str(refused.value)
    with pytest.raises(ClientError) as scheme:
        FleetgateClient("ftp://127.0.0.1", "tok").nodes()
    assert "unsupported protocol 'ftp://'" in scheme.value.message


def test_a_server_that_does_not_answer_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        transport = HttpTransport(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.2)
        with pytest.raises(Unreachable, match="timed out"):
            transport.request("GET", "/v1/nodes", {}, None)


def test_a_path_prefix_user_info_and_odd_characters_are_sent_as_httpx_sent_them() -> None:
    with serving({}) as server:
        host = server.url.removeprefix("http://")
        transport = HttpTransport(f"http://us%20er:p%40ss@{host}/prefix", timeout=30)
        assert transport.request("GET", "/v1/nodes/a b?kind=x y", {}, None).status == 404
        transport.close()
    _, path, headers, _ = server.requests[0]
    assert path == "/prefix/v1/nodes/a%20b?kind=x%20y"
    assert headers["Authorization"] == "Basic dXMgZXI6cEBzcw=="  # "us er:p@ss"
    assert encode_query({"dry_run": True, "kind": "instance placed"}) == (
        "dry_run=true&kind=instance+placed"
    )


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key (made with the openssl command)."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make a test certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return cert, key


def test_tls_is_verified_against_the_trust_store_ssl_cert_file_names(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serving({"/v1/nodes": as_json([NODE])}, tls=context) as server:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        with pytest.raises(ClientError) as untrusted:
            FleetgateClient(server.url, "tok").nodes()
        assert untrusted.value.code == "unreachable"
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.value.message
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with FleetgateClient(server.url, "tok") as api:
            assert [n.name for n in api.nodes()] == ["hv-1"]


@dataclass
class Canned:
    """A test transport: the answers it gives, in order, and the requests it was handed."""

    answers: list[Response]
    sent: list[tuple[str, str]] = field(default_factory=list)
    closed: bool = False

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> Response:
        self.sent.append((method, target))
        return self.answers.pop(0)

    def close(self) -> None:
        self.closed = True


def test_a_test_transport_stands_in_for_http() -> None:
    page = json.dumps([NODE]).encode()
    canned = Canned([Response(200, "OK", {"link": '</v1/nodes?after=hv-1>; rel="next"'}, page),
                     Response(200, "OK", {}, b"[]")])  # fmt: skip
    with FleetgateClient("http://fleetgate.invalid", "tok", transport=canned) as api:
        assert [n.name for n in api.nodes()] == ["hv-1"]
        assert repr(api) == "FleetgateClient('http://fleetgate.invalid')"
    assert canned.sent == [("GET", "/v1/nodes"), ("GET", "/v1/nodes?after=hv-1")]
    assert canned.closed


def test_a_proxy_from_the_environment_is_used_unless_no_proxy_names_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: only the proxy can answer
    with serving({f"{dead}/v1/nodes": as_json([NODE])}) as proxy:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
            monkeypatch.delenv(name.lower(), raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with FleetgateClient(dead, "tok") as api:
            assert [n.name for n in api.nodes()] == ["hv-1"]
        assert proxy.requests[0][1] == f"{dead}/v1/nodes"  # the whole URL, as a proxy takes it
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with pytest.raises(ClientError) as direct:
            FleetgateClient(dead, "tok").nodes()
        assert direct.value.code == "unreachable" and len(proxy.requests) == 1
