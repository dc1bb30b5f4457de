"""Throw-away database servers on this machine: a MariaDB Galera cluster, a PostgreSQL pair, and
the single MariaDB and PostgreSQL servers the test sessions start where the machine serves none.

One implementation for the tests, the nox lanes and the benchmarks. Each cluster lives in a
temporary directory of its own (data, sockets, pids, logs) and listens only on ports of 127.0.0.1
reserved for it (``PortReservation``); it never touches the machine's own servers on 3306 and 5432.
Used as context managers, they stop every process they started on exit; the directory is removed
after a clean run and kept, its path printed, when anything failed.

    python -m tests.clusters galera     # start three nodes, print their URLs, stop on Ctrl-C
    python -m tests.clusters postgres   # a primary with a synchronous standby, likewise
    python -m tests.clusters mariadb    # one plain MariaDB server (postgres-single: PostgreSQL)

Facts this relies on (Debian 12's mariadb-server 10.11, galera-4 and postgresql-15): mariadbd
must run as ``mysql`` with datadirs that user owns, or a joiner's rsync SST fails; the first node
bootstraps with ``--wsrep-new-cluster``; Galera wants ``binlog_format=ROW`` and
``innodb_autoinc_lock_mode=2``; a node that cannot bind one of its ports while joining (its SQL
port, or the IST listener) aborts (exit -6, SIGABRT). PostgreSQL refuses to run as root, so as
root its programs run as ``postgres``. Readiness is polled (never a fixed sleep), with bounds a
loaded machine meets.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

GALERA_PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
MARIADBD = Path("/usr/sbin/mariadbd")
#: The joiner's state transfer script (package mariadb-server; mariadbd is mariadb-server-core's).
WSREP_SST_RSYNC = Path("/usr/bin/wsrep_sst_rsync")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
#: How long a node may take to start, join (SST included) or stop on a loaded 2-core machine.
START_SECONDS = 600.0
STOP_SECONDS = 120.0
#: How often a joining node is started before its failure is the caller's: a state transfer that
#: fails (the joiner aborts) is retried from an empty datadir on newly reserved ports.
JOIN_ATTEMPTS = 3
#: The status variables that together say a Galera node is synced with a primary component.
GALERA_READY = {"wsrep_local_state_comment": "Synced", "wsrep_ready": "ON", "wsrep_connected": "ON"}
#: The machine's own servers, never ours.
RESERVED_PORTS = frozenset({3306, 5432})
#: Where clusters of every process on the machine record the ports they hold (one lock each).
PORT_LOCKS = Path(tempfile.gettempdir()) / "fleetgate-ports"
#: Ports below this are left to the system's own services.
LOWEST_PORT = 10_000


class ClusterError(RuntimeError):
    """A cluster could not be started or stopped; the message names the logs to read."""


class NodeExited(ClusterError):
    """A server process exited while it was expected to start or join."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that nothing listens on right now.

    Good for a port that must refuse connections; a server of ours takes ``PortReservation``'s,
    which no client connection and no other cluster can take in the meantime.
    """
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] in RESERVED_PORTS:
                s.close()
                continue
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The ports the kernel hands out as the local port of an outgoing connection."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def server_ports(ephemeral: range) -> range:
    """The ports our servers take: the larger gap outside ``ephemeral`` (below it by default).

    A port picked by binding port 0 lies inside the ephemeral range: free when picked, but while
    its server is down (a node killed before it rejoins) any outgoing connection on the machine
    may get it as its local port, and the restarted server cannot bind it.
    """
    below = range(LOWEST_PORT, max(LOWEST_PORT, ephemeral.start))
    above = range(max(LOWEST_PORT, min(ephemeral.stop, 65536)), 65536)
    if not below and not above:  # every port is ephemeral: the locks and the bind check remain
        return range(LOWEST_PORT, 65536)
    return below if len(below) >= len(above) else above


class PortReservation:
    """Ports held for a cluster's life: outside the ephemeral range, and each locked in a file
    under ``PORT_LOCKS`` (an flock, released by ``release`` or when the process dies), so that
    clusters started by other processes on the machine skip them even while no server binds them
    (a killed node's, a joiner's IST and SST ports before its state transfer)."""

    def __init__(self, directory: Path = PORT_LOCKS, ports: range | None = None) -> None:
        self.directory = directory
        self.ports = ports if ports is not None else server_ports(ephemeral_range())
        self._held: dict[int, int] = {}  # port -> the open lock file's descriptor

    @property
    def held(self) -> list[int]:
        """The ports this reservation holds."""
        return sorted(self._held)

    def take(self, count: int) -> list[int]:
        """``count`` more ports, each locked here and bindable on 127.0.0.1 right now."""
        self._ensure_directory()
        taken: list[int] = []
        for _ in range(100 * count + 1000):
            if len(taken) == count:
                return taken
            port = random.choice(self.ports)
            if port in RESERVED_PORTS or port in self._held:
                continue
            fd = self._lock(port)
            if fd is None:
                continue
            if not _bindable(port):
                _unlock(fd)
                continue
            self._held[port] = fd
            taken.append(port)
        if len(taken) == count:
            return taken
        self.release(taken)
        raise ClusterError(
            f"no {count} free ports in {self.ports.start}-{self.ports.stop - 1} "
            f"(locks in {self.directory})"
        )

    def release(self, ports: list[int] | None = None) -> None:
        """Give back ``ports`` (all held ones by default) to the machine's other clusters."""
        for port in list(self._held) if ports is None else ports:
            fd = self._held.pop(port, None)
            if fd is not None:
                _unlock(fd)

    def _ensure_directory(self) -> None:
        if not self.directory.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            # Every user's test runs share it, as they share the ports.
            with suppress(PermissionError):
                self.directory.chmod(0o1777)

    def _lock(self, port: int) -> int | None:
        try:
            fd = os.open(self.directory / str(port), os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            return None  # another user's lock file we may not open: theirs
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        return fd


def _unlock(fd: int) -> None:
    with suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:``port`` now (nothing holds it, not even a
    client connection's local end)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _as_user(user: str, argv: list[str]) -> list[str]:
    """``argv`` run as ``user`` when we are root (servers refuse root, or misbehave as root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", user, "--", *argv]


def _chown(path: Path, user: str) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, user, user)


def _poll(what: str, check: Callable[[], bool], seconds: float, logs: list[Path]) -> None:
    """Return once ``check()`` holds; ``ClusterError`` naming ``logs`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    delay = 0.05
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
    raise ClusterError(f"{what} not within {seconds:g} s; logs: {', '.join(map(str, logs))}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _errors(log: Path, count: int = 4) -> str:
    """The last ``count`` error lines of a server log, joined, for a one-line failure."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [line.strip() for line in lines if "ERROR" in line]
    return " | ".join(errors[-count:])


def _exit_status(code: int | None) -> str:
    if code is not None and code < 0:
        with suppress(ValueError):
            return f"{code} ({signal.Signals(-code).name})"
    return str(code)


class Cluster:
    """Temporary directory, reserved ports, cleanup on exit, logs kept on failure."""

    prefix = "fleetgate-cluster-"

    def __init__(self, base: Path | None = None) -> None:
        self._given_base = base
        self.base = Path()
        self.failed = False
        self.reservation = PortReservation()

    def _make_base(self) -> None:
        if self._given_base is not None:
            self.base = self._given_base
            self.base.mkdir(parents=True, exist_ok=True)
        else:
            self.base = Path(tempfile.mkdtemp(prefix=self.prefix))
        # Servers running as another user must reach their own directories inside it.
        self.base.chmod(0o755)

    def start(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def logs(self) -> list[Path]:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.failed = True
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.failed = True
        self.close()

    def close(self) -> None:
        """Stop every server; give the ports back; remove the directory unless something failed."""
        try:
            self.stop()
        except BaseException:
            self.failed = True
            raise
        finally:
            self.reservation.release()
            if self.failed or self._given_base is not None:
                print(f"cluster logs kept in {self.base}", file=sys.stderr, flush=True)
            else:
                shutil.rmtree(self.base, ignore_errors=True)


# --------------------------------------------------------------------------- MariaDB and Galera


@dataclass
class MariaNode:
    """One mariadbd and the ports it listens on (``gcomm``, ``ist``, ``sst``: Galera's only)."""

    index: int
    home: Path
    port: int
    gcomm: int = 0
    ist: int = 0
    sst: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def datadir(self) -> Path:
        return self.home / "data"

    @property
    def socket(self) -> Path:
        return self.home / "mysqld.sock"

    @property
    def log(self) -> Path:
        return self.home / "error.log"

    @property
    def config(self) -> Path:
        return self.home / "my.cnf"

    def url(self, database: str = "test") -> str:
        """The SQLAlchemy URL of this node (root, no password, over TCP)."""
        return f"mysql+aiomysql://root@127.0.0.1:{self.port}/{database}"


class MariaDB(Cluster):
    """One plain mariadbd (no replication): the server a test session starts where the machine
    serves none on 3306. ``Galera`` is the same server, several times, with wsrep on."""

    prefix = "fleetgate-mariadb-"
    #: Ports each node listens on: SQL only here (Galera adds gcomm, IST and SST).
    ports_per_node = 1

    def __init__(self, size: int = 1, base: Path | None = None) -> None:
        super().__init__(base)
        self.size = size
        self.nodes: list[MariaNode] = []

    @property
    def urls(self) -> list[str]:
        """Each node's URL, in node order."""
        return [n.url() for n in self.nodes]

    def url(self, database: str = "test") -> str:
        """The first node's URL."""
        return self.nodes[0].url(database)

    def logs(self) -> list[Path]:
        return [n.log for n in self.nodes]

    def _required(self) -> list[Path]:
        return [MARIADBD]

    def start(self) -> None:
        """Create the data directory, start the server, and let root in over TCP."""
        self._prepare()
        node = self.nodes[0]
        self._install_db(node)
        self._launch(node)
        self._wait_ready(node)
        self._grant_root(node)

    def _prepare(self) -> None:
        for path in self._required():
            if not path.exists():
                raise ClusterError(f"{path} is missing: install mariadb-server and galera-4")
        self._make_base()
        self.nodes = []
        for i in range(self.size):
            node = MariaNode(i, self.base / f"node{i}", 0)
            self._assign_ports(node)
            self.nodes.append(node)
        for node in self.nodes:
            node.home.mkdir(exist_ok=True)
            node.datadir.mkdir(exist_ok=True)
            _chown(node.home, "mysql")
            _chown(node.datadir, "mysql")
        for node in self.nodes:
            self._write_config(node)

    def _assign_ports(self, node: MariaNode) -> None:
        """Reserve this node's ports (giving back the ones it had)."""
        old = [p for p in (node.port, node.gcomm, node.ist, node.sst) if p]
        new = self.reservation.take(self.ports_per_node)
        self.reservation.release(old)
        node.port = new[0]
        if self.ports_per_node == 4:
            node.gcomm, node.ist, node.sst = new[1:]

    def _config_lines(self, node: MariaNode) -> list[str]:
        return [
            "[mysqld]",
            "user=mysql",
            f"datadir={node.datadir}",
            f"socket={node.socket}",
            f"pid-file={node.home / 'mysqld.pid'}",
            f"log-error={node.log}",
            f"port={node.port}",
            "bind-address=127.0.0.1",
            "skip-name-resolve",
            "default_storage_engine=InnoDB",
            "innodb_buffer_pool_size=64M",
            "innodb_log_file_size=32M",
            "innodb_flush_log_at_trx_commit=2",
            "max_connections=400",
        ]

    def _write_config(self, node: MariaNode) -> None:
        node.config.write_text("\n".join([*self._config_lines(node), ""]))

    def _install_db(self, node: MariaNode) -> None:
        if (node.datadir / "mysql").exists():
            return  # idempotent: a kept directory is started as it is
        result = subprocess.run(
            [
                "mariadb-install-db",
                f"--defaults-file={node.config}",
                "--user=mysql",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
            check=False,
        )
        if result.returncode != 0:
            raise ClusterError(f"mariadb-install-db failed: {result.stderr[-2000:]}")

    def _launch(self, node: MariaNode, *extra: str) -> None:
        argv = [str(MARIADBD), f"--defaults-file={node.config}", *extra]
        # Started as root, mariadbd switches to user=mysql itself (and the SST script with it).
        # What it prints before its error log is open goes beside that log.
        with (node.home / "stderr.log").open("ab") as stderr:
            node.proc = subprocess.Popen(
                argv,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,
            )

    def _grant_root(self, node: MariaNode) -> None:
        self._sql(
            node,
            "CREATE DATABASE IF NOT EXISTS test; "
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; "
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
        )

    def ready(self, node: MariaNode) -> bool:
        """Whether ``node`` answers SQL (Galera: and is synced with its group)."""
        try:
            self._sql(node, "SELECT 1")
        except (ClusterError, subprocess.TimeoutExpired):
            return False
        return True

    def _wait_ready(self, node: MariaNode) -> None:
        """Poll until ``node`` is ready; ``NodeExited`` (with its last errors) if it exits."""

        def check() -> bool:
            if node.proc is not None and node.proc.poll() is not None:
                raise NodeExited(
                    f"node{node.index} exited with {_exit_status(node.proc.returncode)}: "
                    f"{_errors(node.log)}; log: {node.log}"
                )
            return self.ready(node)

        _poll(f"node{node.index} ready", check, START_SECONDS, self.logs())

    def _sql(self, node: MariaNode, statement: str) -> str:
        """Run ``statement`` through the node's socket as root; its output, tab-separated."""
        result = subprocess.run(
            ["mariadb", f"--socket={node.socket}", "-uroot", "-N", "-B", "-e", statement],
            capture_output=True,
            text=True,
            timeout=STOP_SECONDS,
            check=False,
        )
        if result.returncode != 0:
            raise ClusterError(f"node{node.index}: {statement!r} failed: {result.stderr.strip()}")
        return result.stdout

    def sql(self, index: int, statement: str) -> str:
        """Run ``statement`` on node ``index``; its output, tab-separated."""
        return self._sql(self.nodes[index], statement)

    def statuses(self, node: MariaNode, *names: str) -> dict[str, str]:
        """Global status variables of ``node`` by name; empty while it does not answer."""
        listed = ", ".join(f"'{name}'" for name in names)
        try:
            out = self._sql(node, f"SHOW GLOBAL STATUS WHERE Variable_name IN ({listed})")
        except (ClusterError, subprocess.TimeoutExpired):
            return {}
        pairs = (line.split("\t") for line in out.splitlines())
        return {p[0].lower(): p[1] for p in pairs if len(p) == 2}

    def status(self, node: MariaNode, name: str) -> str | None:
        """A global status variable of ``node``, or None while it does not answer."""
        return self.statuses(node, name).get(name.lower())

    def stop(self) -> None:
        """SIGTERM every node (joiners first, so the last one leaves a clean state), then wait."""
        for node in reversed(self.nodes):
            proc = node.proc
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.failed = True
                proc.kill()
                proc.wait(STOP_SECONDS)


class Galera(MariaDB):
    """A local MariaDB Galera cluster of ``size`` nodes (default 3), each its own mariadbd.

    A node is *ready* when it is synced with a primary component (its state transfer done):
    ``wsrep_local_state_comment`` is ``Synced``, ``wsrep_ready`` and ``wsrep_connected`` are
    ``ON``. ``kill`` waits for every node to be ready first; a joiner (at start, or ``rejoin``
    after a kill) waits for the others to be synced among themselves, then for itself to be
    ready, and is started again when its state transfer fails.
    """

    prefix = "fleetgate-galera-"
    ports_per_node = 4

    def __init__(self, size: int = 3, base: Path | None = None) -> None:
        super().__init__(size, base)

    def _required(self) -> list[Path]:
        return [MARIADBD, GALERA_PROVIDER, WSREP_SST_RSYNC]

    def start(self) -> None:
        """Bootstrap node 0, then join the others one at a time (rsync SST each)."""
        self._prepare()
        first = self.nodes[0]
        self._install_db(first)
        self._launch(first, "--wsrep-new-cluster")
        self._wait_ready(first)
        self._grant_root(first)
        for i, node in enumerate(self.nodes[1:], start=1):
            self._join(node, self.nodes[:i])
        self.wait_ready()

    def _config_lines(self, node: MariaNode) -> list[str]:
        members = ",".join(f"127.0.0.1:{n.gcomm}" for n in self.nodes)
        provider = (
            f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm}; ist.recv_addr=127.0.0.1:{node.ist}"
            # Galera's own suspect/inactive timeouts (5 s, 15 s): a killed node stalls the
            # others' commits until it is suspected, which the failover benchmark measures.
            "; gcache.size=64M"
        )
        return [
            *super()._config_lines(node),
            "binlog_format=ROW",
            "innodb_autoinc_lock_mode=2",
            "wsrep_on=ON",
            f"wsrep_provider={GALERA_PROVIDER}",
            # A name of its own: two clusters on one machine never take each other for a peer.
            f"wsrep_cluster_name={self.base.name}",
            f"wsrep_cluster_address=gcomm://{members}",
            f"wsrep_node_name=node{node.index}",
            f"wsrep_node_address=127.0.0.1:{node.gcomm}",
            f"wsrep_node_incoming_address=127.0.0.1:{node.port}",
            f"wsrep_sst_receive_address=127.0.0.1:{node.sst}",
            "wsrep_sst_method=rsync",
            f'wsrep_provider_options="{provider}"',
        ]

    def ready(self, node: MariaNode) -> bool:
        """Whether ``node`` is synced with a primary component."""
        found = self.statuses(node, *GALERA_READY)
        return all(found.get(name) == value for name, value in GALERA_READY.items())

    def wait_ready(self, nodes: list[MariaNode] | None = None) -> None:
        """Poll until every one of ``nodes`` (default: all) is ready and sees just those nodes."""
        members = self.nodes if nodes is None else nodes
        size = str(len(members))

        def check() -> bool:
            return all(
                self.ready(n) and self.status(n, "wsrep_cluster_size") == size for n in members
            )

        names = ", ".join(f"node{n.index}" for n in members)
        _poll(f"{names} synced as a cluster of {size}", check, START_SECONDS, self.logs())

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (a crash: no clean leave) once every node is ready; reap it."""
        self.wait_ready()
        node = self.nodes[index]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(STOP_SECONDS)

    def rejoin(self, index: int) -> None:
        """Start a stopped node again as a joiner (IST or SST from the others); wait until every
        node is synced in a cluster of ``size``."""
        node = self.nodes[index]
        # A crashed node's grastate says it is not safe to bootstrap from; joining is fine.
        self._join(node, [n for n in self.nodes if n is not node])
        self.wait_ready()

    def _join(self, node: MariaNode, members: list[MariaNode]) -> None:
        """Start ``node`` as a joiner of ``members`` and wait until it is ready.

        The members must first be synced among themselves (after a kill: have dropped the dead
        node from their view). A joiner that exits (a failed state transfer aborts it) is
        started again, up to ``JOIN_ATTEMPTS`` times, from an empty datadir (the failed one
        is kept beside it) on newly reserved ports, and says so on stderr.
        """
        for attempt in range(1, JOIN_ATTEMPTS + 1):
            self.wait_ready(members)
            self._launch(node)
            try:
                self._wait_ready(node)
                return
            except NodeExited as exc:
                self.failed = True  # whatever follows, keep the logs of this attempt
                if attempt == JOIN_ATTEMPTS:
                    raise
                print(
                    f"join attempt {attempt} of {JOIN_ATTEMPTS} failed ({exc}); "
                    "starting it again from an empty datadir on new ports",
                    file=sys.stderr,
                    flush=True,
                )
                node.datadir.rename(node.home / f"data.failed-{attempt}")
                node.datadir.mkdir()
                _chown(node.datadir, "mysql")
                self._assign_ports(node)
                for member in self.nodes:
                    self._write_config(member)


# --------------------------------------------------------------------------- PostgreSQL


@dataclass
class PgServer:
    """One PostgreSQL 15 instance (primary or standby)."""

    name: str
    home: Path
    port: int

    @property
    def datadir(self) -> Path:
        return self.home / "data"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    def url(self, database: str = "test") -> str:
        """The SQLAlchemy URL of this server alone."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def pid(self) -> int | None:
        """The postmaster's pid, from postmaster.pid, or None when not running."""
        try:
            first = (self.datadir / "postmaster.pid").read_text().split("\n", 1)[0]
        except (FileNotFoundError, PermissionError):
            return None
        pid = int(first)
        return pid if _alive(pid) else None


class Postgres(Cluster):
    """One PostgreSQL 15 server: the one a test session starts where the machine serves none on
    5432. ``PostgresPair`` adds a synchronous standby to it."""

    prefix = "fleetgate-postgres-"

    def __init__(self, base: Path | None = None) -> None:
        super().__init__(base)
        self.primary = PgServer("primary", Path(), 0)

    @property
    def servers(self) -> list[PgServer]:
        return [self.primary]

    def logs(self) -> list[Path]:
        return [s.log for s in self.servers]

    def url(self, database: str = "test") -> str:
        """The server's SQLAlchemy URL."""
        return self.primary.url(database)

    def _pg(self, program: str, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            _as_user("postgres", [str(PG_BIN / program), *args]),
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
            check=False,
            cwd="/",
        )
        if check and result.returncode != 0:
            raise ClusterError(
                f"{program} {' '.join(args)} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout)[-2000:]}; logs: {self.logs()}"
            )
        return result.stdout

    def psql(self, server: PgServer, statement: str, database: str = "postgres") -> str:
        """Run ``statement`` on ``server``; unaligned, tuples only."""
        result = subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-p",
                str(server.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-Atc",
                statement,
            ],
            capture_output=True,
            text=True,
            timeout=STOP_SECONDS,
            check=False,
        )
        if result.returncode != 0:
            raise ClusterError(f"{server.name}: {statement!r} failed: {result.stderr.strip()}")
        return result.stdout.strip()

    def start(self) -> None:
        """initdb the server, start it, and create the database ``test``."""
        self._start_primary()

    def _start_primary(self) -> None:
        if not (PG_BIN / "initdb").exists():
            raise ClusterError(f"{PG_BIN} is missing: install postgresql-15")
        self._make_base()
        ports = self.reservation.take(len(self.servers))
        for server, port in zip(self.servers, ports, strict=True):
            server.home = self.base / server.name
            server.port = port
            server.home.mkdir(exist_ok=True)
            _chown(server.home, "postgres")
        p = self.primary
        if not (p.datadir / "PG_VERSION").exists():
            self._pg("initdb", "-D", str(p.datadir), "-A", "trust", "-U", "postgres", "-E", "UTF8")
            with (p.datadir / "postgresql.conf").open("a") as conf:
                conf.write(
                    "\n".join(
                        [
                            "listen_addresses = '127.0.0.1'",
                            f"unix_socket_directories = '{p.home}'",
                            "wal_level = replica",
                            "max_wal_senders = 5",
                            "max_connections = 200",
                            "fsync = off",  # a test server: durability is the standby's
                            "wal_keep_size = 256MB",
                            "",
                        ]
                    )
                )
        self._start_server(p)
        if self.psql(p, "SELECT 1 FROM pg_database WHERE datname = 'test'") != "1":
            self.psql(p, "CREATE DATABASE test")

    def _start_server(self, server: PgServer) -> None:
        self._pg(
            "pg_ctl",
            "start",
            "-D",
            str(server.datadir),
            "-l",
            str(server.log),
            "-w",
            "-t",
            str(int(START_SECONDS)),
            "-o",
            f"-p {server.port}",
        )

    def stop(self) -> None:
        """Stop every server (immediate shutdown), whatever state it is in."""
        for server in reversed(self.servers):
            if server.port == 0 or server.pid() is None:
                continue
            self._pg(
                "pg_ctl",
                "stop",
                "-D",
                str(server.datadir),
                "-m",
                "immediate",
                "-w",
                "-t",
                str(int(STOP_SECONDS)),
                check=False,
            )
            pid = server.pid()
            if pid is not None:
                self.failed = True
                os.kill(pid, signal.SIGKILL)


class PostgresPair(Postgres):
    """A PostgreSQL 15 primary with one synchronous streaming standby; promotion included."""

    prefix = "fleetgate-pgpair-"

    def __init__(self, base: Path | None = None) -> None:
        super().__init__(base)
        self.standby = PgServer("standby", Path(), 0)

    @property
    def servers(self) -> list[PgServer]:
        return [self.primary, self.standby]

    def url(self, database: str = "test") -> str:
        """One URL naming both hosts: libpq-style failover to whichever accepts writes."""
        hosts = "&".join(f"host=127.0.0.1:{s.port}" for s in self.servers)
        return f"postgresql+asyncpg://postgres@/{database}?{hosts}&target_session_attrs=read-write"

    def start(self) -> None:
        """initdb the primary, start it, clone the standby with pg_basebackup -R, wait for sync."""
        self._start_primary()
        p, s = self.primary, self.standby
        if not (s.datadir / "PG_VERSION").exists():
            self._pg(
                "pg_basebackup",
                "-h",
                "127.0.0.1",
                "-p",
                str(p.port),
                "-U",
                "postgres",
                "-D",
                str(s.datadir),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            )
            with (s.datadir / "postgresql.auto.conf").open("a") as conf:
                conf.write(
                    f"\nunix_socket_directories = '{s.home}'\n"
                    # The primary's synchronous_standby_names names this application_name.
                    f"primary_conninfo = 'host=127.0.0.1 port={p.port} user=postgres "
                    "application_name=standby'\n"
                )
        self._start_server(s)
        # Synchronous only now: with a named standby absent, every commit would wait for it.
        self.psql(p, "ALTER SYSTEM SET synchronous_standby_names = 'standby'")
        self.psql(p, "SELECT pg_reload_conf()")
        _poll(
            "the standby streaming synchronously",
            lambda: self._sync_state() == "sync",
            START_SECONDS,
            self.logs(),
        )

    def _sync_state(self) -> str:
        try:
            return self.psql(
                self.primary,
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'",
            )
        except ClusterError:
            return ""

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster (a crash), and wait until it is gone."""
        pid = self.primary.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        _poll("the primary gone", lambda: not _alive(pid), STOP_SECONDS, self.logs())

    def promote(self) -> None:
        """Promote the standby and wait until it accepts writes."""
        self._pg("pg_ctl", "promote", "-D", str(self.standby.datadir), "-w", "-t", "600")
        _poll(
            "the promoted standby accepting writes",
            lambda: self._writable(self.standby),
            START_SECONDS,
            self.logs(),
        )

    def _writable(self, server: PgServer) -> bool:
        try:
            return self.psql(server, "SELECT pg_is_in_recovery()") == "f"
        except ClusterError:
            return False


@contextmanager
def galera(size: int = 3) -> Iterator[Galera]:
    """A started Galera cluster, stopped (and cleaned up) on exit."""
    cluster = Galera(size)
    with cluster:
        yield cluster


@contextmanager
def postgres_pair() -> Iterator[PostgresPair]:
    """A started PostgreSQL primary + synchronous standby, stopped on exit."""
    pair = PostgresPair()
    with pair:
        yield pair


#: What ``python -m tests.clusters KIND`` starts.
KINDS: dict[str, Callable[[], Cluster]] = {
    "galera": Galera,
    "postgres": PostgresPair,
    "mariadb": MariaDB,
    "postgres-single": Postgres,
}


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str]) -> int:
    """Start a cluster, print its URLs, and keep it up until SIGINT or SIGTERM."""
    kind = argv[0] if argv else ""
    if kind not in KINDS:
        print(f"usage: python -m tests.clusters {'|'.join(KINDS)}", file=sys.stderr)
        return 2
    # A background job ignores SIGINT unless told otherwise; either signal stops the servers.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    cluster = KINDS[kind]()
    with cluster:
        if isinstance(cluster, MariaDB):
            for url in cluster.urls:
                print(url, flush=True)
        elif isinstance(cluster, Postgres):
            print(cluster.url(), flush=True)
        print(f"started in {time.monotonic() - started:.1f} s; Ctrl-C stops", file=sys.stderr)
        with suppress(KeyboardInterrupt):
            while True:
                signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
