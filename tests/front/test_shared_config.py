"""`[shared]` and `--shared`: the Redis the replicas share, checked at start through the real
`breakerdeck gateway` command line. A mistake exits 2 with one line naming where it is, and a
password never travels in a URL (the process list and the logs would show it)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from breakerdeck.console.cli import main
from breakerdeck.engine.front.gateway.app import GatewayApp
from breakerdeck.engine.front.gateway.config import GatewayConfig, Shared
from breakerdeck.engine.front.gateway.options import Options
from breakerdeck.engine.front.gateway.server import open_engine, open_shared
from breakerdeck.engine.front.serving import StartError
from breakerdeck.engine.shared import SharedStore
from breakerdeck.fixtures.faults import REFUSED
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import auth, credential_file, write_config
from tests.front.test_gateway_process import Gateway
from tests.redis_server import RedisServer

PASSWORD = "hunter2-not-for-logs"
DIGEST = hashlib.sha256(b"t").hexdigest()
BASE = f"""
[gateway]
listen = "127.0.0.1:0"

[platforms.payments]
base_url = "http://127.0.0.1:9/api"

[agents.billing-assistant]
token_sha256 = "{DIGEST}"
[agents.billing-assistant.credentials]
payments = {{ env = "BD_TEST_PAYMENTS" }}
"""


def _config(tmp_path: Path, shared: str = "") -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(BASE + ("\n[shared]\n" + shared if shared else ""))
    return path


@dataclass
class Done:
    returncode: int
    stderr: str


@pytest.fixture
def check(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Done]:
    """`check(config, *flags)`: `breakerdeck gateway --config … --check-config` through the
    command's own entry point, in this process (a process each would cost a second of imports;
    test_a_good_shared_config_checks_out_in_a_real_process runs the installed command)."""
    monkeypatch.setenv("BD_TEST_PAYMENTS", "x")
    monkeypatch.setenv("BD_TEST_REDIS_PASSWORD", PASSWORD)

    def run(config: Path, *args: str) -> Done:
        capsys.readouterr()
        code = main(["gateway", "--config", str(config), "--check-config", *args])
        return Done(code, capsys.readouterr().err)

    return run


def _refused(done: Done) -> str:
    """The one line a refused start prints, after checking it is the only one."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert PASSWORD not in done.stderr
    return lines[0]


def _password_file(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "redis.password"
    path.write_text(PASSWORD + "\n")
    path.chmod(mode)
    return path


def test_a_good_shared_config_checks_out_in_a_real_process(tmp_path: Path) -> None:
    file = _password_file(tmp_path)
    config = _config(
        tmp_path,
        f'url = "rediss://redis.internal:6380/2"\npassword_file = "{file.name}"\n'
        'prefix = "fleet-a"\ntimeout_ms = 100',
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "breakerdeck.console.cli", "gateway"),
            *("--config", str(config), "--check-config"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BD_TEST_PAYMENTS": "x"},
    )
    assert done.returncode == 0, done.stderr
    assert "ok (1 platform, 1 agent, shared on redis.internal:6380/2)" in done.stderr
    assert PASSWORD not in done.stderr


def test_shared_on_the_command_line_needs_no_table(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    done = check(_config(tmp_path), "--shared", "redis://127.0.0.1:6379/0")
    assert done.returncode == 0, done.stderr
    assert "shared on 127.0.0.1:6379/0" in done.stderr


def test_shared_on_the_command_line_wins_over_the_tables_url(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    config = _config(tmp_path, 'url = "redis://from-the-file:6379/0"')
    done = check(config, "--shared", "redis://from-the-flag:6379/1")
    assert done.returncode == 0, done.stderr
    assert "shared on from-the-flag:6379/1" in done.stderr


def test_without_shared_the_check_says_nothing_of_it(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    done = check(_config(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith(": ok (1 platform, 1 agent)")


def test_a_typo_in_shared_is_refused_naming_the_key(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    config = _config(tmp_path, 'url = "redis://h/0"\npasword_env = "BD_TEST_REDIS_PASSWORD"')
    line = _refused(check(config))
    assert line == f"{config}: [shared] key 'pasword_env': unknown key"


@pytest.mark.parametrize(
    "url", [f"redis://:{PASSWORD}@h:6379/0", f"rediss://app:{PASSWORD}@h/0"], ids=["pw", "user-pw"]
)
def test_a_password_in_the_files_url_is_refused_pointing_at_the_password_keys(
    url: str, tmp_path: Path, check: Callable[..., Done]
) -> None:
    config = _config(tmp_path, f'url = "{url}"')
    line = _refused(check(config))
    assert line.startswith(f"{config}: [shared] key 'url': a password in the URL is refused")
    assert "password_env or password_file" in line


@pytest.mark.parametrize(
    "url", [f"redis://:{PASSWORD}@h:6379/0", f"rediss://app:{PASSWORD}@h/0"], ids=["pw", "user-pw"]
)
def test_a_password_in_the_command_lines_url_is_refused_pointing_at_the_password_keys(
    url: str, tmp_path: Path, check: Callable[..., Done]
) -> None:
    line = _refused(check(_config(tmp_path), "--shared", url))
    assert line.startswith("gateway: --shared: a password in the URL is refused")
    assert "password_env or password_file" in line


def test_a_password_from_an_environment_variable_checks_out(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    config = _config(tmp_path, 'url = "redis://h/0"\npassword_env = "BD_TEST_REDIS_PASSWORD"')
    done = check(config)
    assert done.returncode == 0, done.stderr
    assert "shared on h:6379/0" in done.stderr


def test_both_password_sources_are_refused(tmp_path: Path, check: Callable[..., Done]) -> None:
    file = _password_file(tmp_path)
    config = _config(
        tmp_path,
        f'url = "redis://h/0"\npassword_env = "BD_TEST_REDIS_PASSWORD"\n'
        f'password_file = "{file.name}"',
    )
    line = _refused(check(config))
    assert line == (
        f"{config}: [shared] key 'password_file': give password_env or password_file, not both"
    )


def test_a_password_file_writable_by_others_is_refused(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    file = _password_file(tmp_path, mode=0o666)
    config = _config(tmp_path, f'url = "redis://h/0"\npassword_file = "{file.name}"')
    line = _refused(check(config))
    assert line.startswith(f"{config}: [shared] key 'password_file': ")
    assert "writable by others" in line


def test_a_password_file_owned_by_someone_else_is_refused(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file away needs root")
    file = _password_file(tmp_path)
    os.chown(file, 65534, 65534)
    config = _config(tmp_path, f'url = "redis://h/0"\npassword_file = "{file.name}"')
    line = _refused(check(config))
    assert line.startswith(f"{config}: [shared] key 'password_file': ")
    assert "belongs to uid 65534" in line


def test_an_empty_password_file_is_refused(tmp_path: Path, check: Callable[..., Done]) -> None:
    file = tmp_path / "redis.password"
    file.write_text("\n")
    file.chmod(0o600)
    config = _config(tmp_path, f'url = "redis://h/0"\npassword_file = "{file.name}"')
    assert _refused(check(config)) == f"{config}: [shared] key 'password_file': empty file"


def test_an_unset_password_variable_is_refused(tmp_path: Path, check: Callable[..., Done]) -> None:
    config = _config(tmp_path, 'url = "redis://h/0"\npassword_env = "BD_TEST_UNSET_VARIABLE"')
    line = _refused(check(config))
    assert line == (
        f"{config}: [shared] key 'password_env': $BD_TEST_UNSET_VARIABLE is not set or empty"
    )


@pytest.mark.parametrize("url", ["http://h:6379/0", "unix:///run/redis.sock", "redis:///0"])
def test_a_url_that_is_not_redis_with_a_host_is_refused_in_the_file(
    url: str, tmp_path: Path, check: Callable[..., Done]
) -> None:
    config = _config(tmp_path, f'url = "{url}"')
    line = _refused(check(config))
    assert line.startswith(f"{config}: [shared] key 'url': expected redis://, rediss://, ")
    assert line.endswith(f", got {url!r}")


def test_a_url_that_is_not_redis_is_refused_on_the_command_line(
    tmp_path: Path, check: Callable[..., Done]
) -> None:
    line = _refused(check(_config(tmp_path), "--shared", "http://h:6379/0"))
    assert line.startswith("gateway: --shared: expected redis://, rediss://, valkey://")
    assert line.endswith(", got 'http://h:6379/0'")


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("valkey://h:6390/2", "h:6390/2"),
        ("valkeys://h/0", "h:6379/0"),
        (
            "redis+sentinel://s1:26379,s2,[::1]:26381/mymaster/1",
            "sentinel s1:26379,s2:26379,::1:26381/mymaster/1",
        ),
        ("redis+cluster://n1:7000,n2:7001", "cluster n1:7000,n2:7001"),
    ],
    ids=["valkey", "valkeys", "sentinel", "cluster"],
)
def test_the_high_availability_urls_check_out(
    url: str, where: str, tmp_path: Path, check: Callable[..., Done]
) -> None:
    done = check(_config(tmp_path), "--shared", url)
    assert done.returncode == 0, done.stderr
    assert f"shared on {where}" in done.stderr


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis+sentinel://s1:26379", "the Sentinel service name is missing"),
        ("redis+sentinel://:hunter2@s1:26379/mymaster", "a password in the URL is refused"),
        ("redis+cluster://n1:7000/0", "a cluster URL has no path"),
        ("redis://h1:1,h2:2/0", "one host for redis://"),
        ("redis+sentinel://s1:99999/mymaster", "port '99999' is not a port number"),
    ],
    ids=["no-service", "password", "cluster-db", "two-hosts", "port"],
)
def test_a_bad_high_availability_url_is_refused_with_why(
    url: str, expected: str, tmp_path: Path, check: Callable[..., Done]
) -> None:
    line = _refused(check(_config(tmp_path), "--shared", url))
    assert line.startswith("gateway: --shared: ") and expected in line
    assert "hunter2" not in line


def test_a_gateway_whose_sentinels_do_not_answer_stops_at_start_naming_them(
    tmp_path: Path,
) -> None:
    file = _password_file(tmp_path)
    config = _config(tmp_path, f'password_file = "{file.name}"')
    done = subprocess.run(
        [
            *(sys.executable, "-m", "breakerdeck.console.cli", "gateway"),
            *("--config", str(config), "--listen", "127.0.0.1:0"),
            *("--shared", "redis+sentinel://127.0.0.1:1,127.0.0.1:2/fleet"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BD_TEST_PAYMENTS": "x"},
    )
    line = _refused(Done(done.returncode, done.stderr))
    assert line.startswith(
        "gateway: shared store: sentinel 127.0.0.1:1,127.0.0.1:2/fleet/0: no sentinel answers"
    )


def test_a_cluster_url_at_a_plain_redis_stops_the_gateway_at_start_naming_it(
    session_redis: RedisServer,
) -> None:
    options = Options(
        config_path=Path("gateway.toml"),
        config=GatewayConfig(),
        digests={},
        listen="127.0.0.1:0",
        shared=Shared(f"redis+cluster://127.0.0.1:{session_redis.port}", PASSWORD, "bd", 0.25),
    )
    with pytest.raises(StartError) as raised:
        open_shared(options)
    assert str(raised.value).startswith(
        f"gateway: shared store: cluster 127.0.0.1:{session_redis.port}: "
    )
    assert "Cluster mode is not enabled" in str(raised.value)
    assert PASSWORD not in str(raised.value)


def test_a_sentinel_password_is_only_for_a_sentinel_url(
    tmp_path: Path, check: Callable[..., Done], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BD_TEST_SENTINEL_PASSWORD", "s3cret")
    config = _config(
        tmp_path, 'url = "redis://h/0"\nsentinel_password_env = "BD_TEST_SENTINEL_PASSWORD"'
    )
    line = _refused(check(config))
    assert (
        line == f"{config}: [shared] key 'sentinel_password_env': only for a redis+sentinel:// URL"
    )


@pytest.mark.parametrize(
    ("shared", "expected"),
    [
        (
            'url = "redis://h/zero"',
            "[shared] key 'url': 'redis://h/zero': the path is the database",
        ),
        ('url = "redis://h/0?socket_timeout=9"', "[shared] key 'url': 'redis://h/0?socket_timeo"),
        ('url = "redis://h/0"\ntimeout_ms = 5', "[shared] key 'timeout_ms': "),
        ('url = "redis://h/0"\ntimeout_ms = 60000', "[shared] key 'timeout_ms': "),
        ('url = "redis://h/0"\nprefix = "a b"', "[shared] key 'prefix': 1 to 64 letters"),
        ('prefix = "fleet"', "[shared] key 'url': needed (or --shared URL)"),
    ],
    ids=["database", "query", "timeout-low", "timeout-high", "prefix", "no-url"],
)
def test_a_bad_shared_value_is_refused_naming_the_key(
    shared: str, expected: str, tmp_path: Path, check: Callable[..., Done]
) -> None:
    config = _config(tmp_path, shared)
    assert _refused(check(config)).startswith(f"{config}: {expected}")


# -- the gateway on a shared store -------------------------------------------------------------


@pytest.fixture
def payments() -> Iterator[tuple[FakePlatform, PlatformServer]]:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}) as server:
        yield platform, server


@pytest.fixture
def gateway_config(tmp_path: Path, payments: tuple[FakePlatform, PlatformServer]) -> Path:
    _, server = payments
    grants = {"billing": {"payments": credential_file(tmp_path)}}
    return write_config(tmp_path, {"payments": server.url("payments")}, grants)


async def test_a_gateway_whose_redis_is_down_at_start_serves_on_local_breakers_and_says_so(
    gateway_config: Path, redis_server: RedisServer
) -> None:
    redis_server.stop()
    gateway = Gateway(gateway_config, "--shared", redis_server.url)
    try:
        where = f"127.0.0.1:{redis_server.port}/0"
        assert f"shared breakers on {where} (prefix breakerdeck)\n" in gateway.lines
        assert any(line.startswith(f"shared store lost: {where}") for line in gateway.lines)
        async with httpx.AsyncClient(timeout=10) as client:
            health = await client.get(gateway.url + "/-/healthz")
            call = await client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
        assert health.json() == {"status": "ok", "shared": "lost"}
        assert call.status_code == 200
    finally:
        gateway.stop()


async def test_healthz_says_nothing_of_a_shared_store_that_answers(
    gateway_config: Path, session_redis: RedisServer
) -> None:
    gateway = Gateway(gateway_config, "--shared", session_redis.url)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            health = await client.get(gateway.url + "/-/healthz")
        assert health.json() == {"status": "ok"}
    finally:
        gateway.stop()


def _options(redis: RedisServer, clock_anchor: float | None = None) -> Options:
    return Options(
        config_path=Path("gateway.toml"),
        config=GatewayConfig(),
        digests={},
        listen="127.0.0.1:0",
        speed=10.0,
        clock_anchor=clock_anchor,
        shared=Shared(redis.url, None, "breakerdeck", 0.25),
    )


async def test_replicas_started_apart_read_one_sped_up_wall_clock(
    session_redis: RedisServer,
) -> None:
    loop = asyncio.get_running_loop()
    options = _options(session_redis)
    first = open_engine(options, loop, open_shared(options))
    try:
        await asyncio.sleep(0.2)  # at --speed 10, two seconds apart on each replica's own anchor
        second = open_engine(options, loop, open_shared(options))
        try:
            # Read between two readings of the first, as nothing else bounds a preempted read.
            before, theirs, after = first.clock.wall(), second.clock.wall(), first.clock.wall()
            assert before <= theirs <= after
        finally:
            second.close()
    finally:
        first.close()


async def test_clock_anchor_wins_over_the_fleets_and_the_gap_is_said(
    session_redis: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = asyncio.get_running_loop()
    fleet = _options(session_redis)
    first = open_engine(fleet, loop, open_shared(fleet))
    own = time.time() - 100
    flagged = _options(session_redis, clock_anchor=own)
    second = open_engine(flagged, loop, open_shared(flagged))
    try:
        assert second.clock.wall() == pytest.approx(own + 10 * (time.time() - own), abs=0.5)
        assert f"--clock-anchor {own!r} differs from the shared store's" in capsys.readouterr().err
    finally:
        second.close()
        first.close()


async def test_five_failures_spread_over_two_replicas_halt_the_agent_on_both_off_the_wire(
    tmp_path: Path,
    gateway_config: Path,
    payments: tuple[FakePlatform, PlatformServer],
    session_redis: RedisServer,
) -> None:
    platform, _ = payments
    replicas = [
        Gateway(
            gateway_config,
            *("--state-dir", str(tmp_path / f"state-{name}")),
            *("--shared", session_redis.url, "--speed", "10"),
        )
        for name in ("a", "b")
    ]
    try:
        platform.set_fault(REFUSED)
        async with httpx.AsyncClient(timeout=10) as client:
            for number in range(5):  # a, b, a, b, a: neither replica sees five on its own
                replica = replicas[number % 2]
                failed = await client.get(replica.url + "/p/payments/v1", headers=auth("billing"))
                assert failed.status_code == 502
            reached = platform.requests
            # b, which did not make the trip, first, once it has heard of it from the store (a
            # closed copy admits without asking, so a call racing the news would be let in)
            await _until_open(client, replicas[1].url, "billing")
            answers = [
                await client.get(replica.url + "/p/payments/v1", headers=auth("billing"))
                for replica in reversed(replicas)
            ]
        assert [(a.status_code, a.json()["error"]) for a in answers] == [(403, "agent_halted")] * 2
        assert platform.requests == reached == 5
    finally:
        for replica in replicas:
            replica.stop()


async def _until_open(client: httpx.AsyncClient, url: str, key: str) -> None:
    """Wait (up to 10 s of real time) until the gateway at `url` shows `key` open."""
    shown = f'breakerdeck_breaker_state{{key="{key}",state="open"}} 1.0'
    deadline = time.monotonic() + 10
    while shown not in (await client.get(url + "/-/metrics")).text:
        assert time.monotonic() < deadline, f"{url} never showed {key} open"
        await asyncio.sleep(0.02)


async def test_healthz_names_a_clock_an_hour_off_the_shared_stores_and_serves_on(
    session_redis: RedisServer,
) -> None:
    options = _options(session_redis)
    store = SharedStore(session_redis.url, clock=lambda: time.time() + 3600)
    engine = open_engine(options, asyncio.get_running_loop(), store)
    try:
        app = GatewayApp(GatewayConfig(), {}, config_path="gateway.toml", engine=engine)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            health = (await client.get("/-/healthz")).json()
    finally:
        engine.close()
    assert health["status"] == "ok" and "shared" not in health
    assert "3600.0 s ahead of the shared store's" in health["shared_warning"]
