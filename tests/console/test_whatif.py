"""Issue 32: `breakerdeck whatif`, as a user runs it: a trace or a state dir's audit log of
shadow breakers in, a table (or JSON lines) of what enforcing would have done per key out;
what it read and skipped on standard error, and replay's exit statuses for a recording it
cannot read. Through the real parser and `main()`; the million-line trace through the real
command in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from breakerdeck.console import cli
from breakerdeck.engine.events import Event
from breakerdeck.engine.recorded.whatif import WOULD_DENY
from tests.engine.test_whatif import (
    big_trace,
    incident,
    would_deny,
    write_audit,
    write_trace,
)

#: A key that would drive a terminal, and one that Rich would read as markup.
ESCAPING = "evil\x1b]0;owned\x07"
MARKUP = "[bold red]mallory[/]"

TABLE = [
    "KEY      WOULD DENY  FALSE REFUSALS  SAVED  SECONDS SAVED",
    "billing          11               1     10          300.0",
    "crm               4               3      1            1.5",
    "-------  ----------  --------------  -----  -------------",
    "total            15               4     11          301.5",
]


@pytest.fixture
def run(capsys):
    """`main(argv)` -> (exit status, standard output, standard error)."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        try:
            code = cli.main(argv)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    return run


@pytest.fixture
def trace(tmp_path) -> Path:
    return write_trace(tmp_path / "shadow.jsonl", incident())


def test_the_table_has_a_row_per_key_most_refusals_first_and_the_total(run, trace):
    code, out, err = run(["whatif", str(trace)])
    assert code == 0
    assert out.splitlines() == TABLE
    assert err == f"breakerdeck: {trace}: 15 would-be refusals on 2 keys\n"


def test_json_is_one_object_per_key_a_line(run, trace):
    code, out, _ = run(["whatif", str(trace), "--json"])
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    named = ("key", "would_deny", "false_refusals", "saved", "seconds_saved")
    assert [tuple(row[name] for name in named) for row in rows] == [
        ("billing", 11, 1, 10, 300.0),
        ("crm", 4, 3, 1, 1.5),
    ]
    assert rows[0]["by_reason"]["probe_in_flight"] == {
        "would_deny": 1, "false_refusals": 0, "saved": 1, "seconds_saved": 30.0
    }  # fmt: skip
    assert all(r["false_refusals"] + r["saved"] == r["would_deny"] for r in rows)


def test_by_reason_is_a_row_per_key_and_reason(run, trace):
    code, out, _ = run(["whatif", str(trace), "--by-reason"])
    assert code == 0
    assert out.splitlines() == [
        "KEY      REASON                WOULD DENY  FALSE REFUSALS  SAVED  SECONDS SAVED",
        "billing  circuit_breaker_open          10               1      9          270.0",
        "billing  probe_in_flight                1               0      1           30.0",
        "crm      circuit_breaker_open           4               3      1            1.5",
        "-------  --------------------  ----------  --------------  -----  -------------",
        "total                                  15               4     11          301.5",
    ]


def test_a_state_dirs_audit_log_reads_as_its_trace(run, trace, tmp_path):
    state = write_audit(tmp_path / "state", incident())
    code, out, err = run(["whatif", "--state-dir", str(state)])
    assert (code, out.splitlines()) == (0, TABLE)
    assert err == f"breakerdeck: {state}: 15 would-be refusals on 2 keys\n"


def test_standard_input_is_read_as_a_trace(trace):
    done = subprocess.run(
        [sys.executable, "-m", "breakerdeck.console.cli", "whatif", "-"],
        input=trace.read_bytes(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert done.stdout.decode().splitlines() == TABLE
    assert b"standard input: 15 would-be refusals" in done.stderr


def test_keys_and_reasons_from_outside_are_shown_escaped_never_as_markup(run, tmp_path):
    events = [
        would_deny(1, ESCAPING, "upstream_failure", 1.0),
        would_deny(2, MARKUP, "success", 1.0, reason="[link=http://x]open[/link]\x1b[2J"),
    ]
    path = write_trace(tmp_path / "hostile.jsonl", events)
    code, out, err = run(["whatif", str(path), "--by-reason"])
    assert code == 0
    assert "\x1b" not in out + err and "\x07" not in out
    assert "evil\\x1b]0;owned\\x07" in out
    assert "[bold red]mallory[/]" in out and "[link=http://x]open[/link]\\x1b[2J" in out
    code, out, _ = run(["whatif", str(path), "--json"])
    assert "\x1b" not in out
    assert {json.loads(line)["key"] for line in out.splitlines()} == {ESCAPING, MARKUP}


def test_malformed_lines_are_skipped_counted_and_said_and_the_rest_tallied(run, trace):
    lines = trace.read_bytes().splitlines(keepends=True)
    bad = would_deny(99, "crm", "success", -3.0)
    head = {"seq": 99, "t": 1.0, "at": "2026-01-01T00:00:01.000Z", "type": WOULD_DENY}
    bad_line = json.dumps({**head, "key": "crm", "agent": "crm", **bad.fields})
    garbage = [b"not json\n", b'{"seq": 1}\n', b"\xff\xfe\n", bad_line.encode() + b"\n"] * 2
    trace.write_bytes(b"".join([*lines[:4], *garbage, *lines[4:]]))
    code, out, err = run(["whatif", str(trace)])
    assert code == 0
    assert out.splitlines() == TABLE
    said = err.splitlines()
    for n, line in zip((5, 6, 7, 9, 10), said[:5], strict=True):  # the first five of each kind
        assert line.startswith(f"breakerdeck: skipped {trace}, line {n}: not a trace line")
    assert said[5:] == [
        *[f"breakerdeck: skipped {WOULD_DENY} seq 99 (key 'crm'): attempt_seconds -3.0 is not 0 "
          "to 3.16224e+07"] * 2,
        "breakerdeck: 8 lines skipped in all",
        f"breakerdeck: {trace}: 15 would-be refusals on 2 keys",
    ]  # fmt: skip


def test_a_recording_without_would_deny_lines_says_so_and_prints_an_empty_table(run, tmp_path):
    enforcing = [e for e in incident() if e.type != WOULD_DENY]
    for path in (tmp_path / "empty.jsonl", write_trace(tmp_path / "enforcing.jsonl", enforcing)):
        path.touch()
        code, out, err = run(["whatif", str(path)])
        assert code == 0
        assert out.splitlines()[-1] == "total           0               0      0            0.0"
        assert len(out.splitlines()) == 3  # the header, the rule, the total
        assert err == (
            f"breakerdeck: {path}: no {WOULD_DENY} lines: no breaker ran in shadow there, or "
            "none would have refused a call\n"
        )
        code, out, _ = run(["whatif", str(path), "--json"])
        assert (code, out) == (0, "")


def test_an_empty_audit_log_says_so_too(run, tmp_path):
    state = write_audit(tmp_path / "state", [Event(1, "call.denied", "k", "k", 0.0, {})])
    code, out, err = run(["whatif", "--state-dir", str(state)])
    assert (code, len(out.splitlines())) == (0, 3)
    assert f"no {WOULD_DENY} lines" in err


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: ["whatif", str(d / "gone.jsonl")], "cannot read {d}/gone.jsonl: No such file"),
        (lambda d: ["whatif", str(d)], "{d} is a directory; a state dir is read with --state-dir"),
        (lambda d: ["whatif", "--state-dir", str(d)], "no audit log at {d}/audit.sqlite3"),
        (lambda d: ["whatif", str(d / "ls")], "{d}/ls holds no trace line: {d}/ls, line 1: not a"),
    ],
)  # fmt: skip
def test_a_recording_that_cannot_be_read_is_one_line_and_exit_2(run, tmp_path, make, said):
    (tmp_path / "ls").write_bytes(b"\x7fELF\x02\x01\x01\x00" * 1000 + b"\n" + b"PK\x03\x04" * 10)
    code, out, err = run(make(tmp_path))
    assert (code, out) == (2, "")
    assert err.startswith(f"breakerdeck: {said.format(d=tmp_path)}")
    assert len(err.splitlines()) == 1


def test_a_damaged_audit_log_is_exit_2(run, tmp_path):
    (tmp_path / "audit.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    code, _, err = run(["whatif", "--state-dir", str(tmp_path)])
    assert code == 2
    assert "is not a readable audit log" in err


@pytest.mark.parametrize("argv", [["whatif"], ["whatif", "t.jsonl", "--state-dir", "."]])
def test_whatif_wants_one_recording(run, argv):
    code, out, err = run(argv)
    assert (code, out) == (64, "")
    assert "give one recording: a trace file, or --state-dir DIR" in err


def test_the_table_into_a_closed_pipe_is_an_io_error(trace):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "breakerdeck.console.cli", "whatif", str(trace)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 74
    assert b"reader is gone" in done.stderr and b"Traceback" not in done.stderr


def test_a_large_trace_is_tallied_in_bounded_memory(tmp_path):
    """The command in its own process, as a user runs it, over a trace of 300,000 lines
    (40 MiB; 30,000 would-be refusals): its peak RSS stays within 16 MiB of the same command's
    on an empty trace (3.5 MiB above it at 1,000,000 lines; 130 MiB above it there when the
    refusals were kept to the end, so about 39 MiB at this size)."""
    path = big_trace(tmp_path / "big.jsonl", 30_000)
    (tmp_path / "empty.jsonl").touch()
    try:
        empty, _ = _peak_rss(tmp_path / "empty.jsonl")
        big, out = _peak_rss(path)
        size = path.stat().st_size
    finally:
        path.unlink()
    assert [line.split() for line in out.splitlines()[1:3]] == [
        ["billing", "15,000", "0", "15,000", "7,500.0"],
        ["crm", "15,000", "15,000", "0", "0.0"],
    ]
    assert size > 38 << 20
    assert big - empty < 16 << 20, f"{empty / 2**20:.0f} MiB empty, {big / 2**20:.0f} MiB big"


def _peak_rss(path: Path) -> tuple[int, str]:
    """`whatif PATH` run alone; its peak resident set (bytes) and its output. The peak is the
    process's own (VmHWM: this program's memory since its exec), not `ru_maxrss`, which
    Linux carries over from the forked copy of the test's process."""
    code = (
        "import re, sys\n"
        "from breakerdeck.console.cli import main\n"
        "status = main(['whatif', sys.argv[1]])\n"
        "with open('/proc/self/status') as own:\n"
        "    print(re.search(r'VmHWM:\\s+(\\d+) kB', own.read())[1], file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return int(done.stderr.split()[-1]) * 1024, done.stdout.decode()
