"""One call of the API from a command: the exit code of each kind of answer."""

from __future__ import annotations

from fleetgate.apps.client.calls import exit_code


def test_exit_codes_tell_refused_from_bad_input_from_unavailable() -> None:
    assert [exit_code(s) for s in (401, 403, 404, 409, 507, 500)] == [1] * 6
    assert exit_code(422) == 2
    assert [exit_code(s) for s in (None, 502, 503, 504)] == [3] * 4
