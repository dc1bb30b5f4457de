"""``fleetgate place|release|claims|node|tokens`` against a live API on the database under test
(a ``fleetgate api`` process on 127.0.0.1 over ``FLEETGATE_TEST_DATABASE_URL``'s database)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from fleetgate.apps.cli.main import fleetgate
from tests.apps.api.conftest import ADMIN_TOKEN
from tests.apps.client.seeded import console
from tests.conftest import Backend
from tests.ledgers import open_ledger
from tests.servers import running_api

NS = "team-verbs"


async def _empty(backend: Backend) -> None:
    async with open_ledger(backend):  # migrates once, then deletes every row
        pass


@pytest.fixture(scope="module")
def base(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One live ``fleetgate api`` process over the backend's (emptied) database for the module."""
    asyncio.run(_empty(backend))
    variables = {"FLEETGATE_DATABASE_SESSION_VARIABLES": json.dumps(backend.session_variables)}
    with running_api(backend.url, token=ADMIN_TOKEN, environment=variables) as url:
        yield url


def cli(base: str, *args: str, token: str = ADMIN_TOKEN, columns: int = 200) -> Result:
    """``fleetgate ARGS`` in this process, against ``base`` with ``token``."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FLEETGATE_")}
    env = {**unset, "COLUMNS": str(columns), "FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": token}
    return CliRunner().invoke(fleetgate, list(args), env=env)


def ok(result: Result) -> Result:
    """``result``, asserted to have exited 0."""
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def as_json(result: Result) -> Any:
    """The JSON ``result`` printed (after asserting it succeeded)."""
    return json.loads(ok(result).stdout)


def one_line_error(result: Result, code: int, *needles: str) -> None:
    """``result`` failed with ``code`` and a single ``error:`` line holding every needle."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_node_put_get_cordon_select_uncordon_and_delete(base: str) -> None:
    put = as_json(cli(base, "node", "put", "vhv-1", "--threads", "8", "--memory-mb", "16384",
                      "--disk-gb", "100", "--pool", "gold", "--label", "tier=gold",
                      "-o", "json"))  # fmt: skip
    assert (put["name"], put["pool"], put["labels"]) == ("vhv-1", "gold", {"tier": "gold"})
    ok(cli(base, "node", "put", "vhv-2", "--threads", "4", "--memory-mb", "8192",
           "--disk-gb", "50", "--label", "tier=silver"))  # fmt: skip
    cordoned = ok(cli(base, "node", "cordon", "vhv-1"))
    assert cordoned.stdout.splitlines()[1].split()[-1] == "cordoned"
    assert ok(cli(base, "nodes", "-l", "tier=gold", "-o", "name")).stdout.split() == ["vhv-1"]
    assert ok(cli(base, "nodes", "-l", "tier!=gold", "-o", "name")).stdout.split() == ["vhv-2"]
    none = ok(cli(base, "nodes", "-l", "tier=bronze"))
    assert none.stdout == "" and "No node matches -l 'tier=bronze'" in none.stderr
    one_line_error(cli(base, "nodes", "-l", "tier in ()"), 2, "-l")
    assert as_json(cli(base, "node", "uncordon", "vhv-1", "-o", "json"))["schedulable"] is True
    assert as_json(cli(base, "node", "get", "vhv-1", "-o", "json"))["threads"] == 8
    assert ok(cli(base, "node", "delete", "vhv-2")).stdout.strip() == "node vhv-2 deleted"
    one_line_error(cli(base, "node", "get", "vhv-2"), 1, "404")
    one_line_error(cli(base, "node", "put", "vhv-3", "--threads", "-1", "--memory-mb", "1",
                       "--disk-gb", "1"), 2, "threads")  # fmt: skip


def test_place_dry_run_place_and_release_by_the_whole_id(base: str) -> None:
    ok(cli(base, "node", "put", "vhv-p", "--threads", "8", "--memory-mb", "8192",
           "--disk-gb", "100"))  # fmt: skip
    dry = as_json(cli(base, "place", "-n", NS, "--cpus", "1", "--memory-mb", "256", "--node",
                      "vhv-p", "--dry-run", "-o", "json"))  # fmt: skip
    assert dry["dry_run"] is True and dry["node"] == "vhv-p"
    assert as_json(cli(base, "placements", "-n", NS, "-o", "json")) == []
    placed = ok(cli(base, "place", "-n", NS, "--cpu", "2", "--memory-mb", "512", "--node", "vhv-p",
                    "--request-id", "job-7", "-o", "name")).stdout.strip()  # fmt: skip
    assert len(placed) == 36  # a whole UUID, never cut
    # At 80 columns too the table and the wide table print the id whole.
    for output in ("table", "wide"):
        table = ok(cli(base, "placements", "-n", NS, "-o", output, columns=80)).stdout
        assert placed in table.split(), table
    wide = ok(cli(base, "placements", "-n", NS, "-o", "wide")).stdout.splitlines()
    assert "NAMESPACE" in wide[0].split() and NS in wide[1].split()
    assert (
        ok(cli(base, "release", "-n", NS, placed)).stdout.strip() == f"placement {placed} released"
    )
    one_line_error(cli(base, "release", "-n", NS, placed), 1, "404")
    empty = ok(cli(base, "placements", "-n", NS))
    assert empty.stdout == "" and f"No placements in namespace {NS}." in empty.stderr


def test_a_refused_placement_exits_1_with_the_apis_507_in_one_line(base: str) -> None:
    ok(cli(base, "node", "put", "vhv-small", "--threads", "2", "--memory-mb", "1024",
           "--disk-gb", "10"))  # fmt: skip
    refused = cli(base, "place", "-n", NS, "--cpus", "1", "--memory-mb", "64", "--disk-gb", "1000",
                  "--node", "vhv-small")  # fmt: skip
    one_line_error(refused, 1, "507", "insufficient_capacity")
    one_line_error(cli(base, "place", "-n", NS, "--cpus", "1", "--memory-mb", "1", "--node",
                       "no such"), 2, "node")  # fmt: skip
    assert ADMIN_TOKEN not in refused.stdout + refused.stderr


def test_claims_create_list_update_and_delete(base: str) -> None:
    ns = "team-claims"
    made = as_json(cli(base, "claims", "create", "-n", ns, "--cpus", "4", "--memory-mb", "4096",
                       "--disk-gb", "10", "--expires-in", "8h", "-o", "json"))  # fmt: skip
    assert (made["cpus"], made["state"]) == (4, "active")
    assert ok(cli(base, "claims", "-n", ns, "-o", "name")).stdout.split() == [made["id"]]
    grown = as_json(
        cli(base, "claims", "update", "-n", ns, made["id"], "--cpus", "6", "-o", "json")
    )
    assert (grown["cpus"], grown["memory_mb"]) == (6, 4096)
    # The API's own 422 (an instant in the past) is bad input: exit 2, its message.
    one_line_error(cli(base, "claims", "update", "-n", ns, made["id"], "--expires-at",
                       "2001-01-01T00:00:00Z"), 2, "422", "expires_at")  # fmt: skip
    one_line_error(cli(base, "claims", "create", "-n", ns, "--cpus", "1", "--memory-mb", "1",
                       "--expires-in", "soon"), 2, "--expires-in")  # fmt: skip
    one_line_error(cli(base, "claims", "create", "-n", ns, "--cpus", "1", "--memory-mb", "1"), 2,
                   "exactly one of expires_in_seconds and expires_at")  # fmt: skip
    one_line_error(cli(base, "claims"), 2, "--namespace")
    assert ok(cli(base, "claims", "delete", "-n", ns, made["id"])).stdout.strip() == (
        f"claim {made['id']} deleted"
    )
    one_line_error(cli(base, "claims", "delete", "-n", ns, made["id"]), 1, "404")
    assert f"No claims in namespace {ns}." in ok(cli(base, "claims", "-n", ns)).stderr


def test_tokens_create_list_and_revoke(base: str) -> None:
    ns = "team-tokens"
    made = as_json(cli(base, "tokens", "create", "-n", ns, "-o", "json"))
    secret = made["secret"]
    # The new token reads its own namespace, and is refused the admin's listing.
    assert as_json(cli(base, "placements", "-n", ns, "-o", "json", token=secret)) == []
    one_line_error(cli(base, "nodes", token=secret), 1, "403")
    listed = as_json(cli(base, "tokens", "list", "-n", ns, "-o", "json"))
    assert [(t["id"], t["active"]) for t in listed] == [(made["id"], True)]
    assert "secret" not in listed[0]
    assert ok(cli(base, "tokens", "revoke", "-n", ns, made["id"])).stdout.strip() == (
        f"token {made['id']} revoked"
    )
    revoked = cli(base, "placements", "-n", ns, token=secret)
    one_line_error(revoked, 1, "401")
    assert secret not in revoked.stderr
    assert ok(cli(base, "tokens", "list", "-n", ns, "-o", "name")).stdout.split() == [made["id"]]


def test_every_output_prints_the_same_rows(base: str) -> None:
    ok(cli(base, "node", "put", "vhv-o", "--threads", "2", "--memory-mb", "1024",
           "--disk-gb", "10", "--label", "a=b"))  # fmt: skip
    from_json = as_json(cli(base, "nodes", "-o", "json"))
    assert yaml.safe_load(ok(cli(base, "nodes", "-o", "yaml")).stdout) == from_json
    names = [n["name"] for n in from_json]
    assert ok(cli(base, "nodes", "-o", "name")).stdout.split() == names
    table = ok(cli(base, "nodes")).stdout.splitlines()
    wide = ok(cli(base, "nodes", "-o", "wide")).stdout.splitlines()
    assert [line.split()[0] for line in table[1:]] == names == [w.split()[0] for w in wide[1:]]
    assert "LABELS" not in table[0] and "LABELS" in wide[0].split()
    assert any("a=b" in w.split() for w in wide)
    one = yaml.safe_load(ok(cli(base, "node", "get", "vhv-o", "-o", "yaml")).stdout)
    assert one["labels"] == {"a": "b"}  # one object, not a list of one


def test_every_verb_prints_with_dash_o_even_those_whose_answer_is_empty(base: str) -> None:
    # Through the installed script: a release, a delete and a revoke print what they did.
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    ns = "team-output"

    def run(*args: str) -> str:
        done = console(*args, env=env)
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr)
        return done.stdout

    run("node", "put", "vhv-out", "--threads", "8", "--memory-mb", "8192", "--disk-gb", "100")
    size = ("--cpus", "1", "--memory-mb", "1", "--node", "vhv-out")
    first, second = (run("place", "-n", ns, *size, "-o", "name").strip() for _ in range(2))
    assert run("release", "-n", ns, first, "-o", "name").split() == [first]
    assert json.loads(run("release", "-n", ns, second, "-o", "json")) == [
        {"kind": "placement", "id": second, "action": "released", "namespace": ns}
    ]
    claim = run("claims", "create", "-n", ns, "--cpus", "1", "--memory-mb", "1",
                "--expires-in", "1h", "-o", "name").strip()  # fmt: skip
    deleted = yaml.safe_load(run("claims", "delete", "-n", ns, claim, "-o", "yaml"))
    assert deleted == {"kind": "claim", "id": claim, "action": "deleted", "namespace": ns}
    run("node", "put", "vhv-gone", "--threads", "1", "--memory-mb", "1", "--disk-gb", "1")
    assert run("node", "delete", "vhv-gone", "-o", "name").split() == ["vhv-gone"]
    assert json.loads(run("node", "delete", "vhv-out", "-o", "json")) == {
        "kind": "node",
        "id": "vhv-out",
        "action": "deleted",
    }
    gone = console("node", "delete", "vhv-out", "-o", "json", env=env)
    assert gone.returncode == 1 and gone.stdout == ""  # a refusal prints no object
    assert "404" in gone.stderr


def test_tokens_create_dash_o_name_prints_the_secret_that_works(base: str) -> None:
    # -o name prints the one-time secret (kubectl create token prints the token): never lost.
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    made = console("tokens", "create", "-n", "team-secret", "-o", "name", env=env)
    secret = made.stdout.strip()
    assert made.returncode == 0 and secret.startswith("fgt_") and len(secret.split()) == 1
    mine = console("placements", "-n", "team-secret", "-o", "json",
                   env={"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": secret})  # fmt: skip
    assert mine.returncode == 0 and json.loads(mine.stdout) == []
    (listed,) = json.loads(console("tokens", "list", "-n", "team-secret", "-o", "json",
                                   env=env).stdout)  # fmt: skip
    assert "secret" not in listed
    revoked = console("tokens", "revoke", "-n", "team-secret", listed["id"], "-o", "name", env=env)
    assert revoked.returncode == 0 and revoked.stdout.split() == [listed["id"]]
