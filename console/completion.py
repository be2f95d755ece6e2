"""`breakerdeck completion bash|zsh|fish`: a completion script made from the command line's own
parser (`console.cli.build_parser`), so a new option completes the day it is added; and
`breakerdeck __complete keys URL` and `__complete contexts`, which a script runs for a breaker's
key and a context's name.

None of the listed dependencies completes (argparse has no completion of its own; argcomplete
and shtab are not ours to add), so the scripts are written here from the parser: the
subcommands with their help, each one's options (a value from its choices, a file, a directory,
or anything), its positionals, and `web`'s served console (`web … watch --token-file …`). A key
after `reset URL` or `export URL` is asked of the engine itself (a viewer token is enough, found
as `status` finds one; two seconds at most; nothing on error). A context's name after
`--context` is read from `contexts.toml` (the `--contexts FILE` on the line, else the default
one; nothing when it cannot be read). zsh runs the bash script through its own `bashcompinit`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from dataclasses import dataclass

from breakerdeck.console.completion_args import COMPLETE
from breakerdeck.console.web_command import SERVED

#: A value's completion: a breaker's key from the engine named before it, a context's name from
#: `contexts.toml`, files, fixed words, or nothing to offer (a URL).
KEYS, CONTEXTS, FILES, DIRS, ANY = "keys", "contexts", "files", "dirs", "any"
#: Positionals the parser cannot say the kind of.
_POSITIONALS = {
    ("reset", "key"): [KEYS],
    ("export", "target"): [ANY, KEYS],
    ("replay", "trace"): [FILES],
    ("web", "console"): list(SERVED),
}
_FILE_DESTS = re.compile(r"(file|config|events|out|tls_cert|tls_key|trace)$")


@dataclass(frozen=True, slots=True)
class Option:
    names: tuple[str, ...]
    #: None: a flag; else what its value completes from (`KEYS`… or the choices).
    value: tuple[str, ...] | None
    help: str


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    options: tuple[Option, ...]
    #: Each positional's completion in order (the last repeats): one kind, or fixed words.
    positionals: tuple[tuple[str, ...], ...]


def commands_of(parser: argparse.ArgumentParser) -> list[Command]:
    """Every subcommand (but the hidden one) as a completion script needs it; the first, named
    "", is the top level's options and subcommands."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    top = Command("", "", _options(parser), ())
    return [top] + [
        Command(name, helps.get(name, ""), _options(command), _positionals(name, command))
        for name, command in sub.choices.items()
        if name != COMPLETE
    ]


def _options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    return tuple(
        Option(tuple(action.option_strings), _value(action), _help(action.help))
        for action in parser._actions
        if action.option_strings and action.help != argparse.SUPPRESS
    )


def _value(action: argparse.Action) -> tuple[str, ...] | None:
    if action.nargs == 0:
        return None
    if action.choices:
        return tuple(str(choice) for choice in action.choices)
    if action.dest == "context":
        return (CONTEXTS,)
    if action.dest.endswith("dir"):
        return (DIRS,)
    if _FILE_DESTS.search(action.dest):
        return (FILES,)
    return (ANY,)


def _positionals(name: str, parser: argparse.ArgumentParser) -> tuple[tuple[str, ...], ...]:
    kinds: list[tuple[str, ...]] = []
    for action in parser._actions:
        if action.option_strings:
            continue
        known = _POSITIONALS.get((name, action.dest))
        if known == list(SERVED):
            kinds.append(tuple(SERVED))
        elif known is not None:
            kinds.extend((kind,) for kind in known)
        elif action.choices:
            kinds.append(tuple(str(choice) for choice in action.choices))
        else:
            kinds.append((ANY,))
    return tuple(kinds)


def _help(text: str | None) -> str:
    """An option's help, short: its first clause, without argparse's `%(default)s`."""
    plain = re.sub(r"%\([a-z_]+\)s", "", text or "").replace("%%", "%")
    return re.split(r"[;(]", plain, maxsplit=1)[0].strip().rstrip(",:")


# -- bash (and zsh) ----------------------------------------------------------------------------


def _words(words: tuple[str, ...]) -> str:
    return " ".join(words)


def bash(parser: argparse.ArgumentParser) -> str:
    commands = commands_of(parser)
    names = _words(tuple(c.name for c in commands if c.name))
    option_cases = []
    value_options = []
    value_cases = []
    positional_cases = []
    for command in commands:
        options = _words(tuple(n for o in command.options for n in o.names))
        option_cases.append(f'        "{command.name}") echo "{options}" ;;')
        for option in command.options:
            if option.value is None:
                continue
            for name in option.names:
                value_options.append(f'"{command.name} {name}"')
                value_cases.append(
                    f'        "{command.name} {name}") {_bash_reply(option.value)} ;;'
                )
        for index, kind in enumerate(command.positionals):
            last = index == len(command.positionals) - 1
            pattern = f'"{command.name} {index}"' + (f'|"{command.name} "*' if last else "")
            positional_cases.append(f"        {pattern}) {_bash_reply(kind)} ;;")
    return _BASH.format(
        names=names,
        served=_words(SERVED),
        option_cases="\n".join(option_cases),
        value_options="|".join(value_options),
        value_cases="\n".join(value_cases),
        positional_cases="\n".join(positional_cases),
    )


def _bash_reply(kind: tuple[str, ...]) -> str:
    if kind == (FILES,):
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))'
    if kind == (DIRS,):
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))'
    if kind == (KEYS,):
        return "_breakerdeck_keys"
    if kind == (CONTEXTS,):
        return "_breakerdeck_contexts"
    if kind == (ANY,):
        return "COMPREPLY=()"
    return f'COMPREPLY=($(compgen -W "{_words(kind)}" -- "$cur"))'


_BASH = """\
# breakerdeck completion (bash; zsh through bashcompinit): source <(breakerdeck completion bash)
_breakerdeck_options() {{
    case "$1" in
{option_cases}
    esac
}}

_breakerdeck_takes_value() {{
    case "$1 $2" in
        {value_options}) return 0 ;;
    esac
    return 1
}}

_breakerdeck_value() {{
    case "$1 $2" in
{value_cases}
        *) COMPREPLY=() ;;
    esac
}}

_breakerdeck_positional() {{
    case "$1 $2" in
{positional_cases}
        *) COMPREPLY=() ;;
    esac
}}

# _breakerdeck_option: the option $1 and its value, as given last on the line (else empty).
_breakerdeck_given() {{
    local i
    _breakerdeck_option=()
    for ((i = COMP_CWORD - 1; i > 1; i--)); do
        if [[ ${{COMP_WORDS[i - 1]}} == "$1" ]]; then
            _breakerdeck_option=("$1" "${{COMP_WORDS[i]}}")
            return
        fi
    done
}}

# A breaker's key, asked of the engine named first on the line (with its --token-file).
_breakerdeck_keys() {{
    _breakerdeck_given --token-file
    COMPREPLY=($(compgen -W "$(breakerdeck __complete keys "${{_breakerdeck_args[0]}}" \\
        "${{_breakerdeck_option[@]}}" 2>/dev/null)" -- "$cur"))
}}

# A context's name, from the contexts file named on the line (--contexts), else the default.
_breakerdeck_contexts() {{
    _breakerdeck_given --contexts
    COMPREPLY=($(compgen -W "$(breakerdeck __complete contexts "${{_breakerdeck_option[@]}}" \\
        2>/dev/null)" -- "$cur"))
}}

_breakerdeck() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} cmd="" word skip=0 i
    _breakerdeck_args=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        if ((skip)); then skip=0; continue; fi
        if [[ $word == -* ]]; then
            [[ $word != *=* ]] && _breakerdeck_takes_value "$cmd" "$word" && skip=1
            continue
        fi
        if [[ -z $cmd || ( $cmd == web && " {served} " == *" $word "* ) ]]; then
            cmd=$word
            _breakerdeck_args=()
            continue
        fi
        _breakerdeck_args+=("$word")
    done
    if ((skip)); then
        _breakerdeck_value "$cmd" "${{COMP_WORDS[COMP_CWORD - 1]}}"
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_breakerdeck_options "$cmd")" -- "$cur"))
    elif [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "{names}" -- "$cur"))
    else
        _breakerdeck_positional "$cmd" "${{#_breakerdeck_args[@]}}"
    fi
}}

complete -F _breakerdeck breakerdeck
"""


def zsh(parser: argparse.ArgumentParser) -> str:
    return (
        "# breakerdeck completion (zsh): source <(breakerdeck completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser).split("\n", 1)[1]
    )


# -- fish ------------------------------------------------------------------------------------


def fish(parser: argparse.ArgumentParser) -> str:
    lines = [
        "# breakerdeck completion (fish): breakerdeck completion fish | source",
        "complete -c breakerdeck -f",
        "function __breakerdeck_given",  # the option $argv[1] and its value, if given
        "    set -l words (commandline -opc)",
        "    set -l at (contains -i -- $argv[1] $words)",
        "    and printf '%s\\n' $argv[1] $words[(math $at + 1)]",
        "end",
        "function __breakerdeck_keys",
        "    set -l url (string match -r '^wss?://.*' -- (commandline -opc))[1]",
        "    set -l token (__breakerdeck_given --token-file)",
        '    test -n "$url"; and breakerdeck __complete keys $url $token 2>/dev/null',
        "end",
        "function __breakerdeck_contexts",
        "    breakerdeck __complete contexts (__breakerdeck_given --contexts) 2>/dev/null",
        "end",
    ]
    commands = commands_of(parser)
    for command in commands[1:]:
        lines.append(
            f"complete -c breakerdeck -n __fish_use_subcommand -a {command.name} "
            f"-d {_fish_quote(command.help)}"
        )
    for command in commands:
        condition = (
            "__fish_use_subcommand"
            if not command.name
            else f"'__fish_seen_subcommand_from {command.name}'"
        )
        for option in command.options:
            names = " ".join(
                f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in option.names
            )
            lines.append(
                f"complete -c breakerdeck -n {condition} {names}{_fish_value(option.value)} "
                f"-d {_fish_quote(option.help)}"
            )
        if not command.name:
            continue
        for kind in command.positionals:
            if kind == (KEYS,):
                lines.append(f"complete -c breakerdeck -n {condition} -a '(__breakerdeck_keys)'")
            elif kind == (FILES,):
                lines.append(f"complete -c breakerdeck -n {condition} -F")
            elif kind not in ((ANY,), (DIRS,)):
                lines.append(
                    f"complete -c breakerdeck -n {condition} -a {_fish_quote(_words(kind))}"
                )
    return "\n".join(lines) + "\n"


def _fish_value(value: tuple[str, ...] | None) -> str:
    if value is None:
        return ""
    if value == (FILES,):
        return " -r -F"
    if value == (DIRS,):
        return " -r -a '(__fish_complete_directories)'"
    if value == (CONTEXTS,):
        return " -x -a '(__breakerdeck_contexts)'"
    if value == (ANY,):
        return " -x"
    return f" -x -a {_fish_quote(_words(value))}"


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


SCRIPTS = {"bash": bash, "zsh": zsh, "fish": fish}


def run_completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from breakerdeck.console.output import deliver

    script = SCRIPTS[args.shell](parser)
    return deliver(script.splitlines(keepends=True), 0)


def run_complete(args: argparse.Namespace) -> int:
    """The keys of the engine at `args.url`, or the contexts' names, one a line; nothing on any
    trouble (a shell shows whatever this prints)."""
    from breakerdeck.console.output import deliver

    words = _context_names(args) if args.what == CONTEXTS else _keys(args)
    # One word a line, as a shell splits them: a word with a space or a control character
    # would complete as something else, so it is not offered.
    return deliver([f"{w}\n" for w in words if w.isprintable() and " " not in w], 0)


def _keys(args: argparse.Namespace) -> list[str]:
    from breakerdeck.console import remote
    from breakerdeck.engine.feed.client import FeedError, fetch_snapshot

    if args.url is None:
        return []
    try:
        token = remote.client_token(args, operator=False)
        snapshot = asyncio.run(fetch_snapshot(args.url, token, timeout=args.timeout))
    except (FeedError, OSError, ValueError):
        return []
    return sorted({breaker.key for breaker in snapshot.breakers})


def _context_names(args: argparse.Namespace) -> list[str]:
    """In the file's order, as the tabs would be."""
    from breakerdeck.console.contexts import ConfigError, load_contexts

    try:
        return list(load_contexts(args.contexts))
    except (ConfigError, OSError, ValueError):
        return []
