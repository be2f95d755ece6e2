"""`breakerdeck web` without a browser: what it refuses to start with, how it starts a console
(no shell, a minimal environment, a bounded size), and its cookie under TLS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from textual_serve.download_manager import DownloadManager

from breakerdeck.console.web_guard import host_of, origin_of
from breakerdeck.console.web_role import ACTOR_VARIABLE, ROLE_VARIABLE, WebSession
from breakerdeck.console.web_service import (
    MAX_COLUMNS,
    MAX_ROWS,
    MIN_ROWS,
    TEXTUAL_SERVE_VARIABLES,
    ConsoleService,
    clamp_size,
)
from tests.console.web_server import OPERATOR_TOKEN, WebServer

VIEWER = WebSession("viewer", "web:127.0.0.1")


@pytest.fixture
def token_files(tmp_path) -> tuple[str, str]:
    paths = []
    for name in ("viewer", "operator"):
        path = tmp_path / f"{name}.token"
        path.write_text(f"{name}-token\n")
        path.chmod(0o600)
        paths.append(str(path))
    return paths[0], paths[1]


@pytest.fixture
def web_run(cli_run):
    return lambda argv: cli_run(["web", *argv])


@pytest.mark.parametrize(
    ("served", "said"),
    [
        ([], "name the console to serve"),
        (["status", "ws://127.0.0.1:1"], "name the console to serve"),
        (["demo", "--headless"], "demo --headless has no console to serve"),
        (["demo", "--state-dir", "/tmp"], "every browser's demo would share one state dir"),
        (["watch", "ws://127.0.0.1:1", "--operator", "ann"], "written as web:ADDRESS"),
        (["demo", "--speed", "nan"], "breakerdeck demo: argument --speed"),
        (["replay"], "give one recording"),
    ],
)
def test_a_console_the_web_cannot_serve_is_a_usage_error(web_run, token_files, served, said):
    viewer, _ = token_files
    code, err = web_run(["--viewer-token-file", viewer, *served])
    assert (code, said in err) == (64, True), err


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--listen", "8000"], "expected HOST:PORT"),
        (["--public-url", "javascript:alert(1)"], "expected http(s)://host[:port]"),
        (["--max-consoles", "0"], "must be 1 to 64"),
    ],
)
def test_a_web_option_out_of_bounds_is_a_usage_error(web_run, token_files, option, said):
    viewer, _ = token_files
    code, err = web_run([*option, "--viewer-token-file", viewer, "demo"])
    assert (code, said in err) == (64, True), err


def test_the_web_does_not_start_without_a_token_file(web_run):
    code, err = web_run(["demo"])
    assert (code, "give --viewer-token-file or --operator-token-file" in err) == (2, True), err


def test_the_web_does_not_start_with_one_token_for_both_roles(web_run, token_files):
    viewer, _ = token_files
    code, err = web_run(["--viewer-token-file", viewer, "--operator-token-file", viewer, "demo"])
    assert (code, "must differ" in err) == (2, True), err


def test_the_web_refuses_a_token_file_others_can_write(web_run, token_files):
    viewer, _ = token_files
    Path(viewer).chmod(0o666)
    code, err = web_run(["--viewer-token-file", viewer, "demo"])
    assert (code, "cannot use token file" in err) == (2, True), err


def test_the_web_refuses_a_non_loopback_address_without_tls(web_run, token_files):
    viewer, _ = token_files
    code, err = web_run(["--listen", "0.0.0.0:0", "--viewer-token-file", viewer, "demo"])
    assert (code, "refusing to listen on 0.0.0.0 without TLS" in err) == (2, True), err


def test_a_tls_certificate_needs_its_key(web_run, token_files):
    viewer, _ = token_files
    code, err = web_run(["--tls-cert", viewer, "--viewer-token-file", viewer, "demo"])
    assert (code, "--tls-cert and --tls-key go together" in err) == (64, True), err


@pytest.mark.parametrize(
    ("public_url", "host", "origin"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://Deck.Example:443", "deck.example", "https://deck.example"),
        ("http://[::1]:80", "[::1]", "http://[::1]"),
    ],
)
def test_the_host_and_origin_are_those_a_browser_sends(public_url, host, origin):
    assert (host_of(public_url), origin_of(public_url)) == (host, origin)


def test_sizes_are_held_within_bounds():
    assert clamp_size(100_000, 0) == (MAX_COLUMNS, MIN_ROWS)
    assert clamp_size("132", "43") == (132, 43)
    assert clamp_size("wide", 24) is None
    assert clamp_size(None, 24) is None


def _service(argv: list[str]) -> ConsoleService:
    async def ignore(data: object) -> None:
        pass

    async def close() -> None:
        pass

    return ConsoleService(
        argv,
        VIEWER,
        write_bytes=ignore,
        write_str=ignore,
        close=close,
        download_manager=DownloadManager(),
    )


REPORT = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))"


async def test_a_console_is_executed_without_a_shell(tmp_path):
    planted = tmp_path / "planted"
    argument = f"demo; touch {planted} $(touch {planted})"
    process = await _service([sys.executable, "-c", REPORT, argument])._open_app_process()
    out, _ = await process.communicate()
    assert json.loads(out)["argv"] == [argument]
    assert not planted.exists()


async def test_a_console_gets_none_of_the_servers_environment(monkeypatch):
    monkeypatch.setenv("BREAKERDECK_TOKEN", "the-servers-own-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-cloud-secret")
    process = await _service([sys.executable, "-c", REPORT])._open_app_process(132, 43)
    out, _ = await process.communicate()
    env = json.loads(out)["env"]
    assert "BREAKERDECK_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env[ROLE_VARIABLE] == "viewer"
    assert (env["TEXTUAL_DRIVER"], env["COLUMNS"], env["ROWS"]) == (
        "textual.drivers.web_driver:WebDriver",
        "132",
        "43",
    )
    allowed = {"PATH", "LANG", *TEXTUAL_SERVE_VARIABLES, ROLE_VARIABLE, ACTOR_VARIABLE}
    assert set(env) <= allowed, set(env) - allowed


async def test_a_console_asked_for_a_huge_terminal_gets_the_largest_allowed(capsys):
    """The size in the websocket's query string reaches the console bounded."""
    size = "import os, sys; print(os.environ['COLUMNS'], os.environ['ROWS'], file=sys.stderr)"
    service = _service([sys.executable, "-c", size])
    await service.start(100_000, 100_000)
    await service.stop()
    assert capsys.readouterr().out.split()[-2:] == [str(MAX_COLUMNS), str(MAX_ROWS)]


@pytest.fixture
def tls_files(tmp_path) -> list[str]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ),
            *("-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return ["--tls-cert", str(cert), "--tls-key", str(key)]


def test_under_tls_the_cookie_is_secure(tmp_path, tls_files):
    server = WebServer(tmp_path, ["demo"], options=tls_files).start()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        answer = httpx.get(f"{server.url}/?token={OPERATOR_TOKEN}", verify=False)
    finally:
        assert server.stop() == 0  # SIGTERM stops it as Ctrl-C does
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert all(part in cookie for part in ("Secure", "HttpOnly", "SameSite=Strict")), cookie
    assert "wss://127.0.0.1:" in answer.headers["content-security-policy"]
