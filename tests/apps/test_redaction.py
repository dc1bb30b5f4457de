"""Every credential shape is masked in any text, and a configured secret wherever it appears."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given

from fleetgate.apps.redaction import (
    error_markup,
    hide,
    hide_url_password,
    redact,
    redact_shapes,
)
from tests.servers import FLEETGATE, running_api
from tests.strategies import log_lines

SHAPES = [
    ("postgresql+asyncpg://fleet:pw-Secret-1@db:5432/x", "pw-Secret-1"),
    ("connect to mysql://root:pw-Secret-2@10.0.0.1/db failed", "pw-Secret-2"),
    ("headers: [(b'authorization', b'Bearer tok-Secret-3')]", "tok-Secret-3"),
    ("Authorization: Bearer tok-Secret-4", "tok-Secret-4"),
    ("authorization: tok-Secret-5", "tok-Secret-5"),
    ("(b'cookie', b'fleetgate_session=tok-Secret-6; other=1')", "tok-Secret-6"),
    ('{"set-cookie": "session=tok-Secret-7; Path=/"}', "tok-Secret-7"),
    ("GET /?token=tok-Secret-8&x=1 HTTP/1.1", "tok-Secret-8"),
    ("api=ApiSettings(host='h', port=1, admin_token='tok-Secret-9')", "tok-Secret-9"),
    ("{'password': 'pw-Secret-10', 'user': 'u'}", "pw-Secret-10"),
    ('{"admin_token": "tok-Secret-11"}', "tok-Secret-11"),
    ("client_secret=tok-Secret-12", "tok-Secret-12"),
    ("sent Bearer token-Secret-13 twice", "token-Secret-13"),  # a prose word only when it ends
    ("(b'authorization', b'bearer token')", "token"),  # in a header even a word is the secret
    ("Basic dXNlcjpwYXNzLTE0", "dXNlcjpwYXNzLTE0"),
]


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_every_credential_shape_is_masked(text: str, secret: str) -> None:
    masked = redact(text)
    assert secret not in masked and "***" in masked


def test_ordinary_text_is_left_alone() -> None:
    for text in [
        "placement refused: no room on hv-1 (cpu 4/4)",
        "request_id=abc-123 namespace=ci status=201",
        "token_id=t-1 tokens=3 created",
        "no admin token configured (api.admin_token)",
        # Our own words after a scheme's name are prose, not a credential (issue 42).
        "a valid bearer token is required: none was sent",
        "send it with the Bearer scheme; bearer tokens expire",
    ]:
        assert redact(text) == text


def test_a_header_keeps_its_scheme_name_and_loses_its_credential() -> None:
    assert redact("Authorization: Bearer tok-Secret-4") == "Authorization: Bearer ***"
    assert redact("authorization: Basic dXNlcg==") == "authorization: Basic ***"


def test_a_configured_secret_is_masked_in_any_shape() -> None:
    hide("plain-looking-value-77")
    hide_url_password("postgresql://u:p%40ss-word-88@h/db")
    text = "x plain-looking-value-77 y; p@ss-word-88 in a driver message"
    assert redact(text) == "x *** y; *** in a driver message"


def test_an_error_line_shows_markup_literally_and_masks() -> None:
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(error_markup("namespace: must match '^([a-z0-9-]*)?$' at db://u:pw-99x@h"))
    assert console.export_text().strip() == (
        "error: namespace: must match '^([a-z0-9-]*)?$' at db://u:***@h"
    )


@given(log_lines())
def test_skipping_the_patterns_never_changes_what_is_masked(text: str) -> None:
    # redact leaves out the patterns for text that holds none of their words; whatever the
    # text, its answer is the one the patterns give.
    assert redact(text) == redact_shapes(text)


def test_a_wrong_token_reads_as_written_and_says_how_to_pass_one(tmp_path: Path) -> None:
    # The real server and the real client command: the operator reads our message, not a mask
    # over its word "token", and never the token sent.
    sent = "not-the-Admin-token-42"
    with running_api(tmp_path / "api.db", token="the-Admin-token-42", seconds=120) as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
        out = subprocess.run(
            [str(FLEETGATE), "nodes", "--server", base, "--token", sent],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert out.returncode == 1, out.stderr
    assert "a valid bearer token is required: the one sent is not known here" in out.stderr
    assert "--token or FLEETGATE_TOKEN" in out.stderr and "***" not in out.stderr
    assert sent not in out.stderr + out.stdout
