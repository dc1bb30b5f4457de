"""Throw-away database clusters on this machine: three MariaDB Galera nodes, a PostgreSQL pair.

One implementation for the tests, the nox lanes and the benchmarks. Each cluster lives in a
temporary directory of its own (data, sockets, pids, logs), listens only on free ports of
127.0.0.1 chosen at start, and never touches the machine's own servers on 3306 and 5432.
Used as context managers, they stop every process they started on exit; the directory is removed
after a clean run and kept, with its logs named in the error, when anything failed.

    python -m tests.clusters galera     # start three nodes, print their URLs, stop on Ctrl-C
    python -m tests.clusters postgres   # a primary with a synchronous standby, likewise

Facts this relies on (Debian 12's mariadb-server 10.11, galera-4 and postgresql-15): mariadbd
must run as ``mysql`` with datadirs that user owns, or a joiner's rsync SST fails; the first node
bootstraps with ``--wsrep-new-cluster``; Galera wants ``binlog_format=ROW`` and
``innodb_autoinc_lock_mode=2``. PostgreSQL refuses to run as root, so as root its programs run
as ``postgres``. Readiness is polled (never a fixed sleep), with bounds a loaded machine meets.
"""

from __future__ import annotations

import os
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
PG_BIN = Path("/usr/lib/postgresql/15/bin")
#: How long a node may take to start, join (SST included) or stop on a loaded 2-core machine.
START_SECONDS = 600.0
STOP_SECONDS = 120.0
#: The machine's own servers, never ours.
RESERVED_PORTS = frozenset({3306, 5432})


class ClusterError(RuntimeError):
    """A cluster could not be started or stopped; the message names the logs to read."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that nothing listens on right now."""
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


class _Cluster:
    """Temporary directory, cleanup on exit, logs kept on failure."""

    prefix = "fleetgate-cluster-"

    def __init__(self, base: Path | None = None) -> None:
        self._given_base = base
        self.base = Path()
        self.failed = False

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

    def __enter__(self) -> _Cluster:
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
        """Stop every server; remove the directory unless something failed."""
        try:
            self.stop()
        except BaseException:
            self.failed = True
            raise
        finally:
            if self.failed or self._given_base is not None:
                print(f"cluster logs kept in {self.base}", file=sys.stderr)
            else:
                shutil.rmtree(self.base, ignore_errors=True)


# --------------------------------------------------------------------------- MariaDB Galera


@dataclass
class GaleraNode:
    """One mariadbd of the cluster and the ports it listens on."""

    index: int
    home: Path
    port: int
    gcomm: int
    ist: int
    sst: int
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


class Galera(_Cluster):
    """A local MariaDB Galera cluster of ``size`` nodes (default 3), each its own mariadbd."""

    prefix = "fleetgate-galera-"

    def __init__(self, size: int = 3, base: Path | None = None) -> None:
        super().__init__(base)
        self.size = size
        self.nodes: list[GaleraNode] = []

    @property
    def urls(self) -> list[str]:
        """Each node's URL, in node order."""
        return [n.url() for n in self.nodes]

    def logs(self) -> list[Path]:
        return [n.log for n in self.nodes]

    def start(self) -> None:
        """Bootstrap node 0, then join the others one at a time (rsync SST each)."""
        for path in (MARIADBD, GALERA_PROVIDER):
            if not path.exists():
                raise ClusterError(f"{path} is missing: install mariadb-server and galera-4")
        self._make_base()
        ports = free_ports(4 * self.size)
        self.nodes = []
        for i in range(self.size):
            port, gcomm, ist, sst = ports[4 * i : 4 * i + 4]
            self.nodes.append(GaleraNode(i, self.base / f"node{i}", port, gcomm, ist, sst))
        for node in self.nodes:
            node.home.mkdir(exist_ok=True)
            node.datadir.mkdir(exist_ok=True)
            _chown(node.home, "mysql")
            _chown(node.datadir, "mysql")
            self._write_config(node)
        first = self.nodes[0]
        self._install_db(first)
        self._launch(first, bootstrap=True)
        self._wait_synced(first)
        self._sql(
            first,
            "CREATE DATABASE IF NOT EXISTS test; "
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; "
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
        )
        for node in self.nodes[1:]:
            self._launch(node, bootstrap=False)
            self._wait_synced(node)
        _poll(
            "every node seeing the whole cluster",
            lambda: all(self.status(n, "wsrep_cluster_size") == str(self.size) for n in self.nodes),
            START_SECONDS,
            self.logs(),
        )

    def _write_config(self, node: GaleraNode) -> None:
        members = ",".join(f"127.0.0.1:{n.gcomm}" for n in self.nodes)
        provider = (
            f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm}; ist.recv_addr=127.0.0.1:{node.ist}"
            # Galera's own suspect/inactive timeouts (5 s, 15 s): a killed node stalls the
            # others' commits until it is suspected, which the failover benchmark measures.
            "; gcache.size=64M"
        )
        node.config.write_text(
            "\n".join(
                [
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
                    "binlog_format=ROW",
                    "innodb_autoinc_lock_mode=2",
                    "innodb_buffer_pool_size=64M",
                    "innodb_log_file_size=32M",
                    "innodb_flush_log_at_trx_commit=2",
                    "max_connections=400",
                    "wsrep_on=ON",
                    f"wsrep_provider={GALERA_PROVIDER}",
                    "wsrep_cluster_name=fleetgate",
                    f"wsrep_cluster_address=gcomm://{members}",
                    f"wsrep_node_name=node{node.index}",
                    f"wsrep_node_address=127.0.0.1:{node.gcomm}",
                    f"wsrep_node_incoming_address=127.0.0.1:{node.port}",
                    f"wsrep_sst_receive_address=127.0.0.1:{node.sst}",
                    "wsrep_sst_method=rsync",
                    f'wsrep_provider_options="{provider}"',
                    "",
                ]
            )
        )

    def _install_db(self, node: GaleraNode) -> None:
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

    def _launch(self, node: GaleraNode, *, bootstrap: bool) -> None:
        argv = [str(MARIADBD), f"--defaults-file={node.config}"]
        if bootstrap:
            argv.append("--wsrep-new-cluster")
        # Started as root, mariadbd switches to user=mysql itself (and the SST script with it).
        node.proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _wait_synced(self, node: GaleraNode) -> None:
        def synced() -> bool:
            if node.proc is not None and node.proc.poll() is not None:
                raise ClusterError(
                    f"node{node.index} exited with {node.proc.returncode}; log: {node.log}"
                )
            return self.status(node, "wsrep_local_state_comment") == "Synced"

        _poll(f"node{node.index} synced", synced, START_SECONDS, self.logs())

    def _sql(self, node: GaleraNode, statement: str) -> str:
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

    def status(self, node: GaleraNode, name: str) -> str | None:
        """A global status variable of ``node``, or None while it does not answer."""
        try:
            out = self._sql(node, f"SHOW GLOBAL STATUS LIKE '{name}'")
        except (ClusterError, subprocess.TimeoutExpired):
            return None
        parts = out.strip().split("\t")
        return parts[1] if len(parts) == 2 else None

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (a crash: no clean leave) and reap it."""
        node = self.nodes[index]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(STOP_SECONDS)

    def rejoin(self, index: int) -> None:
        """Start a stopped node again as a joiner (IST or SST from the others); wait for sync."""
        node = self.nodes[index]
        # A crashed node's grastate says it is not safe to bootstrap from; joining is fine.
        self._launch(node, bootstrap=False)
        self._wait_synced(node)

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


# --------------------------------------------------------------------------- PostgreSQL pair


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


class PostgresPair(_Cluster):
    """A PostgreSQL 15 primary with one synchronous streaming standby; promotion included."""

    prefix = "fleetgate-pgpair-"

    def __init__(self, base: Path | None = None) -> None:
        super().__init__(base)
        self.primary = PgServer("primary", Path(), 0)
        self.standby = PgServer("standby", Path(), 0)

    @property
    def servers(self) -> list[PgServer]:
        return [self.primary, self.standby]

    def logs(self) -> list[Path]:
        return [s.log for s in self.servers]

    def url(self, database: str = "test") -> str:
        """One URL naming both hosts: libpq-style failover to whichever accepts writes."""
        hosts = "&".join(f"host=127.0.0.1:{s.port}" for s in self.servers)
        return f"postgresql+asyncpg://postgres@/{database}?{hosts}&target_session_attrs=read-write"

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
        """initdb the primary, start it, clone the standby with pg_basebackup -R, wait for sync."""
        if not (PG_BIN / "initdb").exists():
            raise ClusterError(f"{PG_BIN} is missing: install postgresql-15")
        self._make_base()
        ports = free_ports(2)
        self.primary = PgServer("primary", self.base / "primary", ports[0])
        self.standby = PgServer("standby", self.base / "standby", ports[1])
        for server in self.servers:
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
                            "fsync = off",  # a test cluster: durability is the standby's
                            "wal_keep_size = 256MB",
                            "",
                        ]
                    )
                )
        self._start_server(p)
        if self.psql(p, "SELECT 1 FROM pg_database WHERE datname = 'test'") != "1":
            self.psql(p, "CREATE DATABASE test")
        s = self.standby
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

    def stop(self) -> None:
        """Stop both servers (fast shutdown), whatever state they are in."""
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


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str]) -> int:
    """Start a cluster, print its URLs, and keep it up until SIGINT or SIGTERM."""
    kind = argv[0] if argv else ""
    if kind not in {"galera", "postgres"}:
        print("usage: python -m tests.clusters galera|postgres", file=sys.stderr)
        return 2
    # A background job ignores SIGINT unless told otherwise; either signal stops the servers.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    cluster: _Cluster = Galera() if kind == "galera" else PostgresPair()
    with cluster:
        if isinstance(cluster, Galera):
            for url in cluster.urls:
                print(url, flush=True)
        elif isinstance(cluster, PostgresPair):
            print(cluster.url(), flush=True)
        print(f"started in {time.monotonic() - started:.1f} s; Ctrl-C stops", file=sys.stderr)
        with suppress(KeyboardInterrupt):
            while True:
                signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
