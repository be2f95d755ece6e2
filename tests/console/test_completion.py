"""`breakerdeck completion bash|zsh|fish`: scripts made from the parser, run in the real shells;
a breaker's key completed from a live engine's feed (`breakerdeck __complete keys URL`)."""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from breakerdeck.console import completion
from breakerdeck.console.cli import build_parser
from breakerdeck.console.completion import commands_of
from tests.console.test_watch import VIEWER_TOKEN, served

#: The venv's `breakerdeck` first on the PATH, as the scripts call it for keys.
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

#: Completes the words given (the last is the one under the cursor), one reply a line. The
#: script is `breakerdeck completion bash`'s, made once in this process (a `breakerdeck` started
#: per completion cost the suite a minute); `test_bash_registers_the_completion` sources the
#: command's own output.
BASH_COMPLETE = """
eval "$BREAKERDECK_COMPLETION"
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
_breakerdeck
printf '%s\\n' "${COMPREPLY[@]}"
"""


@functools.cache
def script(shell: str) -> str:
    make = completion.bash if shell == "bash" else completion.fish
    return make(build_parser())


def bash(*words: str) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", BASH_COMPLETE, "bash", "breakerdeck", *words],
        capture_output=True,
        text=True,
        # the test's own config dir (`config_home`), where the default contexts.toml is read
        env={
            **ENV,
            "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"],
            "BREAKERDECK_COMPLETION": script("bash"),
        },
        check=True,
        timeout=60,
    )
    return [line for line in done.stdout.splitlines() if line]


def fish(line: str) -> list[str]:
    """What fish offers for `line`, from the fish script made once in this process."""
    done = subprocess.run(
        ["fish", "-c", f"printf '%s' $BREAKERDECK_COMPLETION | source; complete -C {line!r}"],
        capture_output=True,
        text=True,
        env={**ENV, "BREAKERDECK_COMPLETION": script("fish")},
        check=True,
        timeout=60,
    )
    return [row.split("\t")[0] for row in done.stdout.splitlines()]


def test_bash_registers_the_completion():
    done = subprocess.run(
        ["bash", "-c", "source <(breakerdeck completion bash); complete -p breakerdeck"],
        capture_output=True,
        text=True,
        env=ENV,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "complete -F _breakerdeck breakerdeck"
    assert done.stderr == ""


def test_bash_completes_the_subcommands_but_the_hidden_one():
    assert bash("st") == ["status"]
    offered = bash("")
    assert {"demo", "watch", "replay", "export", "completion", "gateway"} <= set(offered)
    assert "__complete" not in offered


def test_bash_completes_every_option_of_every_subcommand_from_the_parser():
    for command in commands_of(build_parser())[1:]:
        names = {name for option in command.options for name in option.names if "--" in name}
        assert names <= set(bash(command.name, "--")), command.name


def test_bash_completes_choices_and_the_served_console_of_web():
    assert bash("replay", "--policy", "") == ["agent", "tool"]
    assert bash("completion", "") == ["bash", "zsh", "fish"]
    assert bash("web", "--listen", "127.0.0.1:8000", "") == ["demo", "watch", "replay"]
    assert bash("web", "watch", "--tok") == ["--token-file"]  # the served command's options


def test_bash_completes_a_directory_for_a_dir_option(tmp_path):
    (tmp_path / "incidents").mkdir()
    assert bash("demo", "--export-dir", f"{tmp_path}/inc") == [f"{tmp_path}/incidents"]


async def test_bash_completes_a_key_from_the_engines_feed(agent_world, tmp_path):
    for agent in ("ava", "avery", "bo"):
        await agent_world.call(agent, "crm")
    token = tmp_path / "viewer.token"
    token.write_text(VIEWER_TOKEN)
    async with served(agent_world, "gw-1") as feed:
        url = feed.url
        words = ("reset", url, "--token-file", str(token), "av")
        assert await asyncio.to_thread(bash, *words) == ["ava", "avery"]
        words = ("export", url, "--token-file", str(token), "")
        assert await asyncio.to_thread(bash, *words) == ["ava", "avery", "bo"]
    # an engine gone: nothing, and no error on the terminal
    assert await asyncio.to_thread(bash, "reset", url, "--token-file", str(token), "") == []


CONTEXTS = """
[contexts.prod]
urls = ["ws://gw-1:8765"]
read_only = true

[contexts.preprod]
urls = ["ws://gw-2:8765"]

[contexts.staging]
urls = ["ws://gw-3:8765"]
"""


def _contexts_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONTEXTS, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_bash_completes_a_context_name_from_the_default_contexts_file(config_home):
    _contexts_file(config_home / "contexts.toml")
    assert bash("watch", "--context", "pr") == ["prod", "preprod"]
    assert bash("web", "watch", "--context", "prod", "--context", "st") == ["staging"]


def test_bash_completes_a_context_name_from_the_contexts_file_on_the_line(tmp_path):
    where = _contexts_file(tmp_path / "elsewhere.toml")
    assert bash("watch", "--contexts", str(where), "--context", "") == [
        "prod",
        "preprod",
        "staging",
    ]


def test_a_contexts_file_that_cannot_be_read_completes_nothing_and_says_nothing(tmp_path):
    where = _contexts_file(tmp_path / "open.toml")
    where.chmod(0o666)  # refused: others could have written it
    assert bash("watch", "--contexts", str(where), "--context", "") == []
    done = subprocess.run(
        ["breakerdeck", "__complete", "contexts", "--contexts", str(where)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_fish_completes_a_context_name(tmp_path):
    where = _contexts_file(tmp_path / "contexts.toml")
    assert fish(f"breakerdeck watch --contexts {where} --context st") == ["staging"]


def test_zsh_loads_the_script_through_bashcompinit():
    script = (
        "autoload -U +X compinit && compinit -u; source <(breakerdeck completion zsh); "
        'emulate sh -c \'COMP_WORDS=(breakerdeck replay --policy ""); COMP_CWORD=3; '
        "_breakerdeck; echo ${COMPREPLY[*]}'"
    )
    done = subprocess.run(
        ["zsh", "-c", script], capture_output=True, text=True, env=ENV, check=True, timeout=60
    )
    assert done.stdout.strip() == "agent tool"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("breakerdeck sta", "status"),
        ("breakerdeck status --", "--json"),
        ("breakerdeck replay --policy ", "agent"),
        ("breakerdeck completion ", "fish"),
    ],
)
def test_fish_completes_from_its_own_script(line, expected):
    assert expected in fish(line)


def test_fish_loads_the_script_the_command_prints():
    script = "breakerdeck completion fish | source; complete -C 'breakerdeck completion '"
    done = subprocess.run(
        ["fish", "-c", script], capture_output=True, text=True, env=ENV, check=True, timeout=60
    )
    assert [row.split("\t")[0] for row in done.stdout.splitlines()] == ["bash", "fish", "zsh"]
