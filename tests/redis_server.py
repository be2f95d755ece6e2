"""A real `redis-server` for the tests: Debian's binary on a free loopback port, nothing on disk.

The replica tests need a Redis that can stop mid-run and come back on the same address, or hang
without closing its sockets (SIGSTOP), so each server is a child process the test owns rather
than a fake. Without the binary the tests fail, naming the package: a suite that skipped them
would pass without ever checking a shared breaker.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import redis
from redis.crc import key_slot

PROGRAM = "redis-server"
MISSING = (
    "redis-server is not on PATH: the replica tests need Debian's redis-server package "
    "(apt-get install redis-server; `make test` installs it when run as root)"
)
#: How long a start may take before the server is declared broken.
START_SECONDS = 10.0


class RedisServerMissing(RuntimeError):
    """`redis-server` is not installed: the message names the package that provides it."""


class RedisServer:
    """One `redis-server` process on 127.0.0.1, restartable on the port it first got."""

    def __init__(self, directory: Path, *extra: str) -> None:
        """`extra`: more of redis-server's options (`--replicaof`), given at every start."""
        program = shutil.which(PROGRAM)
        if program is None:
            raise RedisServerMissing(MISSING)
        self._program = program
        self._directory = directory.resolve()
        self._directory.mkdir(parents=True, exist_ok=True)
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._extra = extra
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, *extra: str) -> RedisServer:
        """Start (again, on the same port once it has one) and return when it answers PING.
        `extra`: options for this start only, after those given at every start."""
        if self.running:
            raise RuntimeError(f"redis-server already runs on port {self.port}")
        fresh_port = self.port == 0
        for _ in range(3 if fresh_port else 1):
            if fresh_port:
                # A cluster node's bus listens 10,000 ports above its own (Redis refuses more).
                clustered = "--cluster-enabled" in self._extra
                self.port = _free_port(below=CLUSTER_PORT_LIMIT if clustered else 65_536)
            if self._launch(extra):
                return self
        raise RuntimeError(f"redis-server did not start on port {self.port}: {self._log_tail()}")

    def stop(self) -> None:
        """SIGTERM, as an operator's restart would, and wait for the exit."""
        self._signal_and_wait(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: Redis gone without a word to its clients."""
        self._signal_and_wait(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (Redis answering too slowly)."""
        self._send(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        self._send(signal.SIGCONT)
        self._paused = False

    def flushall(self) -> None:
        with self.client() as client:
            client.flushall()

    def ping(self, timeout: float = 0.5) -> bool:
        try:
            with self.client(timeout) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def client(self, timeout: float = 5.0) -> redis.Redis:
        """A synchronous client on this server, for a test to look at or change keys."""
        return redis.Redis.from_url(
            self.url, socket_timeout=timeout, socket_connect_timeout=timeout
        )

    def _launch(self, extra: tuple[str, ...]) -> bool:
        log = (self._directory / "redis.log").open("ab")
        with log:
            self._process = subprocess.Popen(
                [
                    *(self._program, "--port", str(self.port), "--bind", "127.0.0.1"),
                    *("--save", "", "--appendonly", "no", "--dir", str(self._directory)),
                    *self._extra,
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Its own folder from the first instant, not only once `--dir` is read.
                cwd=self._directory,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if self.ping(timeout=0.2):
                return True
            time.sleep(0.02)
        self.kill()
        return False

    def _send(self, signum: signal.Signals) -> None:
        if not self.running:
            raise RuntimeError("redis-server is not running")
        assert self._process is not None
        os.kill(self._process.pid, signum)

    def _signal_and_wait(self, signum: signal.Signals) -> None:
        if not self.running:
            return
        assert self._process is not None
        if self._paused and signum != signal.SIGKILL:
            self.resume()  # a stopped process would hold the SIGTERM until continued
        os.kill(self._process.pid, signum)
        self._process.wait(timeout=START_SECONDS)
        self._paused = False

    def _log_tail(self) -> str:
        text = (self._directory / "redis.log").read_text(errors="replace")
        return " | ".join(text.strip().splitlines()[-3:]) or "(no output)"


#: The highest port a Redis Cluster node may use: its bus port is 10,000 above.
CLUSTER_PORT_LIMIT = 55_536


def _free_port(below: int = 65_536) -> int:
    """A port free now, under `below` (the system's ephemeral range reaches 60,999)."""
    for _ in range(1000):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port < below:
            return port
    raise RuntimeError(f"no free port under {below} in 1,000 tries")


#: The name the test sentinels monitor their primary by.
SERVICE = "breakerdeck"


class SentinelSet:
    """A primary, its replica and three sentinels on loopback (Debian's redis-server, the
    sentinels in its `--sentinel` mode), quick to fail over: the primary is taken as down after
    500 ms without an answer."""

    def __init__(self, directory: Path, *primary_options: str) -> None:
        """`primary_options`: more of redis-server's options for the first primary."""
        self.primary = RedisServer(directory / "primary", *primary_options).start()
        self.replica = RedisServer(
            directory / "replica", "--replicaof", "127.0.0.1", str(self.primary.port)
        ).start()
        self._sentinels: list[Sentinel] = []
        for n in range(3):
            self._sentinels.append(Sentinel(directory / f"sentinel-{n}", self.primary.port))
        self.wait_until(self._known, "the sentinels did not learn of each other and the replica")

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self._sentinels)
        return f"redis+sentinel://{nodes}/{SERVICE}/0"

    def primary_port(self) -> int:
        """The port of the primary as the first sentinel still running names it now."""
        with self._ask(self._running()[0]) as sentinel:
            _, named = sentinel.sentinel_get_master_addr_by_name(SERVICE)
        return int(named)

    def failover(self) -> None:
        """A planned failover (`SENTINEL FAILOVER`): the replica promoted while the primary
        still answers; the sentinels demote the old primary once they have seen the switch
        (ten seconds and more), and never while they cannot reach it."""
        with self._ask(self._running()[0]) as sentinel:
            sentinel.sentinel_failover(SERVICE)

    def kill_sentinel(self, number: int) -> None:
        """SIGKILL one sentinel: the primary's host lost with its sentinel on it."""
        self._sentinels[number].kill()

    def client(self) -> redis.Redis:
        """A client on the primary as the sentinels name it now."""
        return redis.Redis(port=self.primary_port(), socket_timeout=5.0)

    def current_primary(self) -> RedisServer:
        """The data node the sentinels name as the primary now."""
        port = self.primary_port()
        (found,) = [node for node in (self.primary, self.replica) if node.port == port]
        return found

    def sentinel_of(self, node: RedisServer) -> int:
        """The sentinel that stands for `node`'s host: one per data node, as on two machines
        that each run a Redis and a sentinel (the third sentinel on a third)."""
        return (self.primary, self.replica).index(node)

    def mend(self) -> None:
        """Ready for the next failover: a sentinel that is down started again on its own file,
        a data node that is down started again as the primary's replica (the option wins over
        the `--replicaof` it may have been made with), and every node but the primary a replica
        in step with it that every sentinel counts (an old primary that was not killed is
        demoted by the sentinels, ten seconds and more after the switch)."""
        primary = self.current_primary()  # named by a sentinel that saw the failover
        others = [node for node in (self.primary, self.replica) if node is not primary]
        for node in others:
            if not node.running:
                node.start("--replicaof", "127.0.0.1", str(primary.port))
        for sentinel in self._sentinels:
            if not sentinel.running:
                sentinel.start()  # its file still names the old primary, until it hears
        for node in others:
            self.wait_until(
                partial(self._replicates, node, primary),
                f"the node on {node.port} is no replica again",
            )

    def close(self) -> None:
        for sentinel in self._sentinels:
            sentinel.kill()
        self.replica.kill()
        self.primary.kill()

    def wait_until(self, check: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(what)
            time.sleep(0.05)

    def _running(self) -> list[int]:
        return [sentinel.port for sentinel in self._sentinels if sentinel.running]

    def _replicates(self, node: RedisServer, primary: RedisServer) -> bool:
        """`node` replicates `primary` in step, and every sentinel says so."""
        try:
            with node.client() as client:
                link = client.info("replication")
            if (link.get("master_port"), link.get("master_link_status")) != (primary.port, "up"):
                return False
            for port in self._running():
                with self._ask(port) as sentinel:
                    _, named = sentinel.sentinel_get_master_addr_by_name(SERVICE)
                    replicas = sentinel.sentinel_slaves(SERVICE)
                    if int(named) != primary.port:
                        return False
                    if not any(int(r["port"]) == node.port and not r["is_sdown"] for r in replicas):
                        return False
        except redis.RedisError:
            return False
        return True

    def _known(self) -> bool:
        try:
            for port in self._running():
                with self._ask(port) as sentinel:
                    if len(sentinel.sentinel_sentinels(SERVICE)) < 2:
                        return False
                    if not sentinel.sentinel_slaves(SERVICE):
                        return False
        except redis.RedisError:
            return False
        return True

    def _ask(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=2.0, decode_responses=True)


class Sentinel:
    """One sentinel process on its own file (a sentinel rewrites it), restartable on its port."""

    def __init__(self, directory: Path, primary_port: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self._directory = directory
        self._config = directory / "sentinel.conf"
        self._config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 500\n"
            f"sentinel failover-timeout {SERVICE} 1500\n",
            encoding="utf-8",
        )
        self._process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        log = (self._directory / "sentinel.log").open("ab")
        with log:
            self._process = subprocess.Popen(
                [PROGRAM, str(self._config), "--sentinel"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self._directory,
            )

    def kill(self) -> None:
        if self.running:
            assert self._process is not None
            self._process.kill()
            self._process.wait(timeout=START_SECONDS)


class ClusterSet:
    """A Redis Cluster on loopback (Debian's redis-server, created with `redis-cli --cluster
    create`): three primaries, each holding a third of the slots, and `replicas` replicas of
    each, which the cluster promotes when their primary fails (after `node_timeout_ms`)."""

    def __init__(self, directory: Path, replicas: int = 0, node_timeout_ms: int = 2000) -> None:
        self.nodes = [
            RedisServer(
                directory / f"node-{n}",
                *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                *("--cluster-node-timeout", str(node_timeout_ms)),
            ).start()
            for n in range(3 * (1 + replicas))
        ]
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                *("--cluster-replicas", str(replicas)),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        deadline = time.monotonic() + 30
        while not all(self._ok(node) for node in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not come up")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def flushall(self) -> None:
        for node in self.nodes:
            if node.running and self._role(node) == "master":
                node.flushall()

    def owner(self, key: str) -> RedisServer:
        """The primary that holds `key`'s slot now, as a running node's slot map says."""
        slot = key_slot(key.encode())
        (asked,) = [node for node in self.nodes if node.running][:1]
        with asked.client() as client:
            for first, last, (_, port, *_), *_ in client.execute_command("CLUSTER", "SLOTS"):
                if first <= slot <= last:
                    (found,) = [node for node in self.nodes if node.port == port]
                    return found
        raise RuntimeError(f"no node holds slot {slot}")

    def close(self) -> None:
        for node in self.nodes:
            node.kill()

    @classmethod
    def _ok(cls, node: RedisServer) -> bool:
        with node.client() as client:
            if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                return False
            replication = client.info("replication")
        return replication["role"] == "master" or replication["master_link_status"] == "up"

    @staticmethod
    def _role(node: RedisServer) -> str:
        with node.client() as client:
            role: str = client.info("replication")["role"]
        return role
