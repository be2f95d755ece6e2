"""`--check-config` runs the checks the start runs: a file that checks out is one the command
starts with, and a file the start refuses is refused by the check with the same message."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.front.test_gateway_config import DIGEST, GOOD, _gateway, _write
from tests.front.test_mcp_cli import COMMAND as MCP
from tests.front.test_mcp_cli import fixture_command, write_config

PUBLIC = 'listen = "0.0.0.0:8090"'


def refusal(stderr: str) -> str:
    """The one line that says why it will not start."""
    return next(line for line in stderr.splitlines() if "refusing" in line or "needs" in line)


def test_gateway_check_refuses_a_public_listen_without_tls_as_the_start_does(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, GOOD.format(digest=DIGEST).replace('listen = "127.0.0.1:0"', PUBLIC))
    checked = _gateway("--config", str(path), "--check-config")
    started = _gateway("--config", str(path))
    assert (checked.returncode, started.returncode) == (2, 2)
    assert "refusing to listen on 0.0.0.0 without TLS" in refusal(started.stderr)
    assert refusal(checked.stderr) == refusal(started.stderr)
    assert "ok" not in checked.stderr


def test_gateway_check_refuses_a_feed_without_a_state_dir_as_the_start_does(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, GOOD.format(digest=DIGEST))
    checked = _gateway("--config", str(path), "--feed-listen", "127.0.0.1:0", "--check-config")
    started = _gateway("--config", str(path), "--feed-listen", "127.0.0.1:0")
    assert (checked.returncode, started.returncode) == (2, 2)
    assert refusal(checked.stderr) == refusal(started.stderr)
    assert "state dir" in refusal(checked.stderr)


def mcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCP, *args], capture_output=True, text=True, timeout=60)


def test_mcp_check_refuses_a_public_listener_without_tls_as_the_start_does(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n")
    token = tmp_path / "token"
    token.write_text("t" * 32)
    token.chmod(0o600)
    flags = ("--config", str(path), "--http", "0.0.0.0:0", "--token-file", str(token))
    checked = mcp(*flags, "--check-config")
    started = mcp(*flags)
    assert (checked.returncode, started.returncode) == (2, 2)
    assert "refusing to listen on 0.0.0.0 without TLS" in refusal(started.stderr)
    assert refusal(checked.stderr) == refusal(started.stderr)


def test_gateway_check_counts_one_platform_and_one_agent_in_the_singular(
    tmp_path: Path,
) -> None:
    done = _gateway("--config", str(_write(tmp_path, GOOD.format(digest=DIGEST))), "--check-config")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith(": ok (1 platform, 1 agent)")


def test_mcp_check_counts_one_server_in_the_singular_and_two_in_the_plural(
    tmp_path: Path,
) -> None:
    one = f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n"
    two = one + f"[servers.docs]\ncommand = {fixture_command(tmp_path)}\n"
    for text, counted in ((one, "1 server"), (two, "2 servers")):
        done = mcp("--config", str(write_config(tmp_path, text)), "--check-config")
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().endswith(f": ok ({counted})")


#: What only serving needs: the MCP SDK, the HTTP server and the doors' servers on them.
SERVING = ("mcp", "mcp_types", "uvicorn", "aiohttp", "breakerdeck.engine.front.mcp.serve")
SERVING += ("breakerdeck.engine.front.gateway.server",)


def _imported_by(*argv: str) -> set[str]:
    """The serving modules a `breakerdeck` run imported (its exit code is not the point)."""
    code = (
        "import sys\n"
        "from breakerdeck.console.cli import main\n"
        f"sys.argv = ['breakerdeck', *{list(argv)!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {SERVING!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))


def test_mcp_check_config_imports_no_server_nor_the_sdk(tmp_path: Path) -> None:
    """A check is as cheap as reading the file: the SDK alone was 1.5 s of CPU a process."""
    path = write_config(tmp_path, f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n")
    assert _imported_by("mcp", "--config", str(path), "--check-config") == set()


def test_gateway_check_config_imports_no_server(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.format(digest=DIGEST))
    assert _imported_by("gateway", "--config", str(path), "--check-config") == set()
