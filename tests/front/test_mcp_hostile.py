"""Hostile hosts and upstreams, as an attack run found them: a host's `initialize` never waits
for upstreams; garbage, batches and oversized lines get JSON-RPC 2.0's answers (a host must
never wait on an id for ever); `arguments` that are not an object are a result; an upstream's
escape codes reach neither the model's texts nor the proxy's stderr raw."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from breakerdeck.engine.front.mcp import wire
from breakerdeck.engine.front.mcp.lists import StoredLists
from breakerdeck.fixtures.mcp_plain_server import HOSTILE_MESSAGE
from tests.front.mcp_support import ANNOTATED, proxied
from tests.front.test_mcp_cli import COMMAND
from tests.front.test_mcp_state import INITIALIZE
from tests.front.test_mcp_stdio_files import INITIALIZED

#: One xdist worker runs the whole module, so its hostile run (`raw_host`, a module fixture)
#: is made once.
pytestmark = pytest.mark.xdist_group("mcp-hostile")

PLAIN = [sys.executable, "-m", "breakerdeck.fixtures.mcp_plain_server"]
FAST = {"deadline_seconds": 2.0, "backoff_seconds": 0.01, "attempts": 1}
LIMIT = 16 * 1024 * 1024
ENVIRONMENT = types.Tool(name="environment", input_schema={"type": "object"})


@pytest.fixture(scope="module")
def raw_host(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """One run of the real command with a file of hostile lines on stdin: its answers by id
    (`None` holds the answers with a null id, `"batch"` the array answered to the batch)."""
    directory = tmp_path_factory.mktemp("hostile")
    config = directory / "mcp.toml"
    # Listed from its last run's tools; it exits at once: no server process to wait for.
    config.write_text('[proxy]\nstate_dir = "state"\n[servers.plain]\ncommand = ["true"]\n')
    assert StoredLists(directory / "state").save("plain", [ENVIRONMENT]) is None
    oversized = {"name": "plain__environment", "arguments": {"pad": "x" * (LIMIT + 10)}}
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        "this is not JSON",
        json.dumps([{"jsonrpc": "2.0", "id": 10, "method": "ping"}, INITIALIZED]),
        json.dumps({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": oversized}),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 12,
                "method": "tools/call",
                "params": {"name": "plain__environment", "arguments": [1, 2]},
            }
        ),
        json.dumps({"jsonrpc": "2.0", "id": 13, "method": "tools/list"}),
    ]
    requests = directory / "requests.jsonl"
    requests.write_text("\n".join(lines) + "\n")
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [*COMMAND, "--config", str(config)], stdin=stdin, capture_output=True, timeout=120
        )
    assert done.returncode == 0, done.stderr.decode()
    by_id: dict[Any, Any] = {None: []}
    for line in done.stdout.decode().splitlines():
        answer = json.loads(line)
        if isinstance(answer, list):
            by_id["batch"] = answer
        elif answer.get("id") is None:
            by_id[None].append(answer)
        else:
            by_id[answer["id"]] = answer
    return by_id


def test_a_line_that_is_not_json_is_answered_parse_error_with_a_null_id(
    raw_host: dict[Any, Any],
) -> None:
    assert [a["error"]["code"] for a in raw_host[None]] == [-32700]


def test_a_batch_is_refused_member_by_member_in_one_array(raw_host: dict[Any, Any]) -> None:
    assert [(a["id"], a["error"]["code"]) for a in raw_host["batch"]] == [(10, -32600)]


def test_a_line_over_the_size_limit_is_answered_with_its_id(raw_host: dict[Any, Any]) -> None:
    assert raw_host[11]["error"]["code"] == -32600
    assert "over 16777216 bytes" in raw_host[11]["error"]["message"]


def test_arguments_that_are_not_an_object_are_an_invalid_request_result(
    raw_host: dict[Any, Any],
) -> None:
    result = raw_host[12]["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["status"] == "invalid_request"
    assert result["structuredContent"]["tool"] == "plain__environment"


def test_the_session_goes_on_after_hostile_lines(raw_host: dict[Any, Any]) -> None:
    names = {tool["name"] for tool in raw_host[13]["result"]["tools"]}
    assert "plain__environment" in names


def test_an_empty_batch_is_one_invalid_request() -> None:
    answer = json.loads(wire.from_host(b"[]", False, LIMIT))  # type: ignore[arg-type]
    assert (answer["id"], answer["error"]["code"]) == (None, -32600)


def test_a_malformed_notification_gets_no_answer() -> None:
    assert wire.from_host(b'{"jsonrpc": "2.0", "method": 5}', False, LIMIT) is None


def test_a_request_that_is_not_json_rpc_is_answered_with_its_id() -> None:
    line = b'{"jsonrpc": "1.0", "id": "a", "method": "ping"}'
    answer = json.loads(wire.from_host(line, False, LIMIT))  # type: ignore[arg-type]
    assert (answer["id"], answer["error"]["code"]) == ("a", -32600)


async def test_initialize_never_waits_for_an_upstream_that_never_answers(tmp_path: Path) -> None:
    silent = {"command": ["sh", "-c", "cat > /dev/null"]}  # reads, never answers
    with anyio.fail_after(20):  # its start deadline is 60 s
        async with proxied({"silent": silent}, start_deadline=60.0) as bench:
            assert bench.host.server_capabilities is not None


async def test_an_upstreams_escape_codes_reach_neither_reason_nor_unavailable_raw(
    tmp_path: Path,
) -> None:
    async with proxied({"plain": {"command": PLAIN, **FAST}}, proxy_table=ANNOTATED) as bench:
        answers = [await bench.call("plain__fail", {}) for _ in range(3)]
        reason = answers[0].structured_content["reason"]
        assert "backend down\\x1b[2J\\x1b[31m now" in reason
        assert "\x1b" not in json.dumps(answers[0].structured_content, ensure_ascii=False)
        listed = (await bench.host.list_tools()).tools
        first_line = listed[0].description.splitlines()[0]
        assert first_line.startswith("Unavailable until")
        assert "\\x1b[2J" in first_line and "\x1b" not in first_line
    assert HOSTILE_MESSAGE.startswith("backend down\x1b")


async def test_a_stdio_upstreams_stderr_reaches_the_proxys_stderr_escaped(tmp_path: Path) -> None:
    said_by_it = "hi \x1b]0;owned\x07 \u202eevil"  # sets the terminal's title; reverses text
    noisy = {"command": ["sh", "-c", 'printf "%s\\n" "$0" >&2', said_by_it], **FAST}
    async with proxied({"plain": noisy}) as bench:
        await bench.host.list_tools()  # waits for its first start, which fails
    said = bench.errlog.getvalue()
    assert "breakerdeck mcp: plain: hi \\x1b]0;owned\\x07 \\u202eevil" in said
    assert "\x1b" not in said and "\u202e" not in said
