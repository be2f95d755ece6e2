"""Export (`e`, `breakerdeck export`): a breaker's incident as Markdown and JSON, from one piece of
code; files named from the key, a notice naming them, the clipboard over OSC 52, a browser
download under `web`; hostile key text escaped; a directory that cannot be written is a notice."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest

from breakerdeck.console import cli
from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.card import Card, Thresholds
from breakerdeck.console.export import KEY_CHARS, export_stem
from breakerdeck.console.incident import as_json, incident, markdown, md, shell_word
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.table import TableScreen
from tests.console.conftest import press, running
from tests.console.test_model import view
from tests.console.test_watch import VIEWER_TOKEN, served
from tests.waiting import eventually

HOSTILE = "mal`lory\x1b]0;owned\x07<b>[x](http://e.test)|*_\u202e'$(touch pwned)"


def notices(app) -> list[str]:
    return [n.message for n in app._notifications]


async def said(app, words: str) -> None:
    """Until a notice says `words` (the export runs in a worker of its own)."""
    await eventually(lambda: any(words in n for n in notices(app)), f"a notice saying {words}")


def exported(directory: Path) -> dict[str, Path]:
    return {path.suffix: path for path in directory.iterdir()}


async def test_e_writes_the_incident_as_markdown_and_json_and_names_both(agent_world, tmp_path):
    tmp_path = tmp_path / "out"  # beside the engine's state dir
    tmp_path.mkdir()
    await agent_world.trip_upstream("ava")
    await agent_world.call("ava", "payments", 3)  # denied
    async with running(agent_world.engine, export_dir=tmp_path) as (app, pilot):
        await pilot.press("e")
        await said(app, "Exported ava")
        files = exported(tmp_path)
        assert set(files) == {".md", ".json"}
        assert re.fullmatch(r"ava-[0-9a-f]{8}-\d{8}T\d{6}Z", files[".md"].stem)
        told = " ".join(notices(app))
        assert str(files[".md"]) in told and str(files[".json"]) in told
        text = files[".md"].read_text()
        assert app.clipboard == text  # OSC 52, where the terminal allows it
    assert text.startswith("# Incident: ava (OPEN)\n")
    assert "**counter**: 5 failures · trips at auth 3 / upstream 5" in text
    assert "## Last denied calls (3 this episode)" in text
    assert "Partial" not in text
    assert "| tripped |" in text and "| call.denied |" in text
    assert "breakerdeck reset ws://HOST:PORT ava --reason" in text
    document = json.loads(files[".json"].read_text())
    assert document["key"] == "ava" and document["state"] == "OPEN"
    assert document["audit"]["partial"] is False
    assert [row["type"] for row in document["audit"]["rows"]].count("call.denied") == 3
    assert document["denied_this_episode"] == 3


async def test_e_works_from_the_table_and_the_detail_screen(agent_world, tmp_path):
    tmp_path = tmp_path / "out"  # beside the engine's state dir
    tmp_path.mkdir()
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine, export_dir=tmp_path) as (app, pilot):
        await pilot.press("t", "e")
        await eventually(lambda: len(list(tmp_path.iterdir())) == 2, "the table's export")
        assert isinstance(app.screen, TableScreen)
        await pilot.press("escape", "enter", "e")
        await eventually(lambda: len(list(tmp_path.iterdir())) == 4, "the details' export")
        assert isinstance(app.screen, DetailScreen)


async def test_a_directory_that_cannot_be_written_is_a_notice_and_the_console_goes_on(
    agent_world, tmp_path
):
    await agent_world.trip_upstream("ava")
    gone = tmp_path / "gone"
    gone.mkdir()
    async with running(agent_world.engine, export_dir=gone) as (app, pilot):
        gone.rmdir()
        await pilot.press("e")
        await said(app, f"cannot write the export into {gone}")
        assert isinstance(app.screen, DashboardScreen)
        await press(pilot, "enter")  # it goes on
        assert not isinstance(app.screen, DashboardScreen)


async def test_in_a_browser_e_is_a_download_and_writes_nothing_on_the_server(
    agent_world, tmp_path, monkeypatch
):
    await agent_world.trip_upstream("ava")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr(BreakerdeckApp, "is_web", property(lambda self: True))
    delivered: list[tuple[str, str]] = []

    def deliver_text(self, file, *, save_filename=None, **kwargs):
        delivered.append((save_filename, file.read()))

    monkeypatch.setattr(BreakerdeckApp, "deliver_text", deliver_text)
    async with running(agent_world.engine) as (app, pilot):
        await pilot.press("e")
        await said(app, "downloading it as .md and .json")
    assert [Path(name).suffix for name, _ in delivered] == [".md", ".json"]
    assert delivered[0][1].startswith("# Incident: ava (OPEN)")
    assert list(here.iterdir()) == []


def hostile_card() -> Card:
    return Card(HOSTILE, view(HOSTILE, "open", count=5, cause="upstream_failure"))


def hostile_document():
    return incident(
        hostile_card(),
        [],
        limits=Thresholds("agent"),
        now=0.0,
        exported_at=0.0,
        source="test",
        url="ws://gw:8765",
    )


def test_hostile_key_text_is_escaped_in_markdown():
    text = markdown(hostile_document())
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    prose = text.split("```sh")[0]  # the command line's code block shows it quoted, as typed
    assert "<b>" not in prose and "[x](" not in prose
    # printable's escapes (`\x1b`), their backslash escaped for Markdown in turn
    assert r"mal\`lory\\x1b\]0;owned\\x07\<b\>\[x\](http://e.test)\|\*\_\\u202e" in text


def test_the_command_line_quotes_a_hostile_key_back_to_itself():
    word = shell_word(HOSTILE)
    assert "\x1b" not in word
    echoed = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, check=True
    ).stdout.decode()
    assert echoed == HOSTILE
    assert shell_word("ava") == "ava" and shell_word("a b") == "'a b'"


def test_json_escapes_every_control_and_bidi_character():
    text = as_json(hostile_document())
    assert text.isascii() and "\x1b" not in text
    assert json.loads(text)["key"] == HOSTILE


def test_a_key_becomes_a_safe_file_name_cut_to_100_with_its_hash():
    assert re.fullmatch(r"a_b_c-[0-9a-f]{8}-19700101T000000Z", export_stem("a/b c", 0.0))
    assert export_stem("../x", 0.0).startswith("_._x-")  # no hidden file
    long = export_stem("k" * 500, 0.0)
    assert long.startswith("k" * KEY_CHARS + "-")
    assert export_stem("a/b", 0.0) != export_stem("a b", 0.0)  # same safe text, other hash


def test_breakerdeck_export_state_dir_prints_the_same_document(agent_world, tmp_path, capsys):
    asyncio.run(agent_world.trip_upstream("ava"))
    state = str(tmp_path / "state")
    assert cli.main(["export", "--state-dir", state, "ava"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# Incident: ava (OPEN)\n")
    assert "| tripped |" in text and "Partial" not in text
    assert "**counter**: ≈5 failures" in text  # an audit log keeps no successes
    assert cli.main(["export", "--state-dir", state, "ava", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["audit"]["partial"] is False


def test_breakerdeck_export_names_the_keys_it_knows(agent_world, tmp_path, capsys):
    asyncio.run(agent_world.trip_upstream("ava"))
    state = str(tmp_path / "state")
    assert cli.main(["export", "--state-dir", state, "avaa"]) == 5
    assert "did you mean 'ava'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["export", "ava"], ["export", "--state-dir", "d", "ws://x:1", "ava"], ["export", "x", "ava"]],
)
def test_breakerdeck_export_wants_a_url_and_a_key_or_a_state_dir_and_a_key(argv, cli_run):
    code, err = cli_run(argv)
    assert code == 64 and "breakerdeck export:" in err


async def export_from_feed(world, tmp_path, capsys) -> tuple[str, str]:
    """`breakerdeck export URL ava` over a viewer token: what it printed, and the feed's URL."""
    token = tmp_path / "viewer.token"
    token.write_text(VIEWER_TOKEN)
    async with served(world, "gw-1") as feed:
        url = feed.url  # while it is served
        argv = ["export", url, "ava", "--token-file", str(token)]
        assert await asyncio.to_thread(cli.main, argv) == 0
    return capsys.readouterr().out, url


async def test_breakerdeck_export_from_a_feed_is_marked_partial(agent_world, tmp_path, capsys):
    await agent_world.trip_upstream("ava")
    text, url = await export_from_feed(agent_world, tmp_path, capsys)
    assert text.startswith("# Incident: ava (OPEN)\n")
    # a feed's times are this machine's clock (watch shifts them the same way)
    assert re.search(r"> Partial: the episode began \d\d:\d\d:\d\d; the rows held here", text)
    assert f"breakerdeck reset {url} ava" in text
    assert VIEWER_TOKEN not in text


async def export_by_e(world, tmp_path) -> tuple[str, dict]:
    """`e` on the selected card of a console at 80x24: the Markdown and the JSON it wrote."""
    out = tmp_path / "out"
    out.mkdir()
    async with running(world.engine, export_dir=out) as (app, pilot):
        await pilot.press("e")
        await said(app, "Exported")
    files = exported(out)
    return files[".md"].read_text(), json.loads(files[".json"].read_text())


async def held(world, reason: str = "vendor window", seconds: float = 30 * 60) -> None:
    """ava's breaker, seen closed, then held by oncall:dana for `seconds` with `reason`."""
    await world.call("ava", "payments")
    world.engine.hold("ava", "oncall:dana", reason, seconds)


async def test_a_held_breakers_export_says_who_why_until_and_the_release_line(
    agent_world, tmp_path
):
    await held(agent_world)
    agent_world.clock.advance(60)
    text, document = await export_by_e(agent_world, tmp_path)
    assert text.startswith("# Incident: ava (HELD)\n")
    assert "- **state**: HELD, 29:00 left\n" in text
    assert "- **held by**: oncall:dana\n" in text
    assert "- **until**: 2026-01-01 12:30:00 UTC\n" in text
    assert "- **why**: vendor window\n" in text
    assert "**cause**" not in text  # held while closed: no trip, no cause
    assert "breakerdeck release ws://HOST:PORT ava --reason 'after the incident review'" in text
    assert "breakerdeck reset" not in text
    assert document["hold"] == {
        "by": "oncall:dana",
        "reason": "vendor window",
        "until": "2026-01-01 12:30:00 UTC",
        "seconds_left": 29 * 60.0,
    }
    assert document["commands"] == [
        "breakerdeck release ws://HOST:PORT ava --reason 'after the incident review'"
    ]


async def test_a_hold_taken_after_a_recovery_is_the_episode_and_not_partial(
    agent_world, tmp_path, capsys
):
    """The hold began the episode (the last trip had ended): its rows are the hold's on."""
    await agent_world.trip_upstream("ava")
    agent_world.heal("payments")
    agent_world.clock.advance(301)
    await agent_world.call("ava", "payments")  # the probe closes it
    agent_world.clock.advance(60)
    agent_world.engine.hold("ava", "oncall:dana", "vendor window", 600)
    state = str(tmp_path / "state")
    argv = ["export", "--state-dir", state, "ava", "--json"]
    assert await asyncio.to_thread(cli.main, argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["audit"]["partial"] is False
    assert [row["type"] for row in document["audit"]["rows"]] == ["circuit_breaker.held"]
    assert document["hold"]["by"] == "oncall:dana"  # read back from the audit log
    assert document["commands"][0].startswith("breakerdeck release ws://HOST:PORT ava ")


def test_a_hold_reason_is_escaped_in_markdown_and_kept_as_given_in_json():
    card = Card(
        "ava",
        view(
            "ava",
            "held",
            held_by="oncall:dana",
            held_reason=HOSTILE,
            held_until=600.0,
        ),
    )
    document = incident(
        card, [], limits=Thresholds("agent"), now=0.0, exported_at=0.0, source="t", url=None
    )
    text = markdown(document)
    assert "\x1b" not in text and "\u202e" not in text
    assert "<b>" not in text and "[x](" not in text
    assert f"- **why**: {md(HOSTILE)}\n" in text
    assert json.loads(as_json(document))["hold"]["reason"] == HOSTILE


async def test_a_shadow_breakers_export_says_shadow_beside_its_state(agent_world, tmp_path):
    await agent_world.call("ava", "payments")
    agent_world.engine.set_mode("ava", "shadow", "oncall:dana", "trial")
    await agent_world.trip_upstream("ava")
    text, document = await export_by_e(agent_world, tmp_path)
    assert text.startswith("# Incident: ava (OPEN · SHADOW)\n")
    assert "- **state**: OPEN · SHADOW, probe in 05:00" in text
    assert (document["state"], document["mode"], document["hold"]) == ("OPEN", "shadow", None)


async def test_breakerdeck_export_from_a_feed_gives_a_held_breakers_release_line(
    agent_world, tmp_path, capsys
):
    await held(agent_world)
    text, url = await export_from_feed(agent_world, tmp_path, capsys)
    assert text.startswith("# Incident: ava (HELD)\n")
    assert "- **held by**: oncall:dana\n" in text and "- **why**: vendor window\n" in text
    assert f"breakerdeck release {url} ava --reason 'after the incident review'" in text
    assert VIEWER_TOKEN not in text
