"""tests/clusters.py's port reservation: the ports a cluster's servers take are outside the
kernel's ephemeral range and held (an flock per port) for the cluster's life, so neither an
outgoing connection nor another cluster on the machine can take them while a node is down.

The clusters themselves are exercised by the cluster lanes (``tests_galera``, ``tests_failover``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clusters import (
    LOWEST_PORT,
    RESERVED_PORTS,
    ClusterError,
    Galera,
    PortReservation,
    ephemeral_range,
    server_ports,
)
from tests.waiting import HANG_SECONDS


def a_free_server_port(locks: Path) -> int:
    """One port from the real server range, free right now (released again at once)."""
    scout = PortReservation(locks / "scout")
    (port,) = scout.take(1)
    scout.release()
    return port


def test_server_ports_lie_outside_the_ephemeral_range() -> None:
    assert server_ports(range(32768, 61000)) == range(LOWEST_PORT, 32768)
    assert server_ports(range(10000, 20000)) == range(20000, 65536)  # the larger gap: above
    assert server_ports(range(1024, 65536)) == range(LOWEST_PORT, 65536)  # no gap: locks only
    ours = server_ports(ephemeral_range())
    assert not set(ours) & set(ephemeral_range())
    assert not set(ours) & RESERVED_PORTS


def test_the_ephemeral_range_is_read_from_the_kernel_with_linux_default(tmp_path: Path) -> None:
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("40000\t50000\n")
    assert ephemeral_range(setting) == range(40000, 50001)
    assert ephemeral_range(tmp_path / "absent") == range(32768, 61000)


def test_two_reservations_never_share_a_port(tmp_path: Path) -> None:
    ports = range(LOWEST_PORT + 2000, LOWEST_PORT + 2060)
    first = PortReservation(tmp_path, ports)
    second = PortReservation(tmp_path, ports)
    a, b = first.take(20), second.take(20)
    assert len(set(a)) == 20 and len(set(b)) == 20
    assert not set(a) & set(b)
    assert set(a) | set(b) <= set(ports)
    assert first.held == sorted(a)


def test_a_held_port_is_refused_until_released(tmp_path: Path) -> None:
    port = a_free_server_port(tmp_path)
    first = PortReservation(tmp_path, range(port, port + 1))
    second = PortReservation(tmp_path, range(port, port + 1))
    assert first.take(1) == [port]
    with pytest.raises(ClusterError, match=f"no 1 free ports in {port}-{port}"):
        second.take(1)
    first.release()
    assert second.take(1) == [port]


def test_a_port_something_is_bound_to_is_never_taken(tmp_path: Path) -> None:
    port = a_free_server_port(tmp_path)
    with socket.create_server(("127.0.0.1", port)), pytest.raises(ClusterError):
        PortReservation(tmp_path, range(port, port + 1)).take(1)
    assert PortReservation(tmp_path, range(port, port + 1)).take(1) == [port]


def test_another_process_holds_its_ports_until_it_dies(tmp_path: Path) -> None:
    port = a_free_server_port(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from tests.clusters import PortReservation;"
            "r = PortReservation(Path(sys.argv[1]), range(int(sys.argv[2]), int(sys.argv[2]) + 1));"
            "print(r.take(1)[0], flush=True); sys.stdin.read()",
            str(tmp_path),
            str(port),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == str(port)
        with pytest.raises(ClusterError):
            PortReservation(tmp_path, range(port, port + 1)).take(1)
    finally:
        holder.kill()  # no release: the kernel drops the lock with the process
        holder.wait(HANG_SECONDS)
    assert PortReservation(tmp_path, range(port, port + 1)).take(1) == [port]


def test_a_galera_cluster_without_the_state_transfer_script_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without mariadb-server's wsrep_sst_rsync (mariadbd alone is mariadb-server-core's) every
    joiner would abort three times over; the cluster refuses to start and names the file."""
    absent = tmp_path / "wsrep_sst_rsync"
    monkeypatch.setattr("tests.clusters.WSREP_SST_RSYNC", absent)
    with pytest.raises(ClusterError, match=f"{absent} is missing: install mariadb-server"):
        Galera(base=tmp_path / "cluster").start()
    assert not (tmp_path / "cluster").exists()
