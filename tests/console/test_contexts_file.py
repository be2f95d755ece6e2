"""Issue 35: `contexts.toml` and `views.toml`, read as files another user may have planted:
their shape, where they live, and what is refused (naming the file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from breakerdeck.console.contexts import (
    BUILTIN_VIEWS,
    ConfigError,
    Context,
    UnknownName,
    chosen,
    config_dir,
    contexts_path,
    load_contexts,
    load_views,
    views_for,
)

PROD = """
[contexts.prod]
urls = ["ws://gw-1:8765", "ws://gw-2:8765"]
token_file = "prod-operator.token"
read_only = true
color = "red"

[contexts.staging]
urls = ["wss://staging:8765"]
"""


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_the_files_live_in_the_xdg_config_dir(config_home, monkeypatch):
    assert config_dir() == config_home
    assert contexts_path() == config_home / "contexts.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert config_dir() == Path.home() / ".config" / "breakerdeck"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # not absolute: ignored, as XDG says
    assert config_dir() == Path.home() / ".config" / "breakerdeck"


def test_a_context_has_its_urls_a_token_file_beside_the_file_read_only_and_a_colour(tmp_path):
    path = write(tmp_path / "conf" / "contexts.toml", PROD)
    contexts = load_contexts(path)
    assert list(contexts) == ["prod", "staging"]
    assert contexts["prod"] == Context(
        "prod",
        ("ws://gw-1:8765", "ws://gw-2:8765"),
        tmp_path / "conf" / "prod-operator.token",
        read_only=True,
        color="red",
    )
    assert contexts["staging"] == Context("staging", ("wss://staging:8765",))


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_contexts_file_others_can_write_is_refused_naming_it(tmp_path, mode):
    path = write(tmp_path / "contexts.toml", PROD, mode)
    with pytest.raises(ConfigError) as refused:
        load_contexts(path)
    assert str(refused.value).startswith(f"refused: file {path} is writable by others (mode ")


def test_a_views_file_others_can_write_is_refused_naming_it(config_home):
    path = write(config_home / "views.toml", '[views.mine]\nfilter = "pay"\n', 0o664)
    with pytest.raises(ConfigError, match=f"^refused: file {path} is writable by others"):
        load_views()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
def test_a_file_another_user_owns_is_refused(tmp_path):
    path = write(tmp_path / "contexts.toml", PROD)
    os.chown(path, 4242, -1)
    with pytest.raises(ConfigError, match="belongs to uid 4242"):
        load_contexts(path)


def test_a_fifo_is_refused_and_not_waited_on(tmp_path):
    path = tmp_path / "contexts.toml"
    os.mkfifo(path, 0o600)
    with pytest.raises(ConfigError, match=f"^refused: {path} is not a regular file"):
        load_contexts(path)


def test_a_missing_contexts_file_is_named_and_a_missing_views_file_leaves_the_built_in_views(
    tmp_path,
):
    with pytest.raises(ConfigError, match=f"^{tmp_path / 'contexts.toml'}: no such file"):
        load_contexts(tmp_path / "contexts.toml")
    assert {name: view.filter for name, view in load_views(tmp_path / "views.toml").items()} == (
        BUILTIN_VIEWS
    )


@pytest.mark.parametrize(
    ("table", "said"),
    [
        # A mistyped key must not leave a context writable that was meant read-only.
        ('urls = ["ws://a:1"]\nread-only = true', "[contexts.prod] key 'read-only': unknown key"),
        ('urls = ["ws://a:1"]\nread_only = "yes"', "[contexts.prod] key 'read_only'"),
        ('urls = ["http://a:1"]', "not a feed URL: 'http://a:1'"),
        ("urls = []", "[contexts.prod] key 'urls'"),
        ('urls = ["ws://a:1"]\ncolor = "[b]"', "not a colour: '[b]'"),
    ],
)
def test_a_bad_context_is_refused_naming_the_file_and_the_key(tmp_path, table, said):
    path = write(tmp_path / "contexts.toml", f"[contexts.prod]\n{table}\n")
    with pytest.raises(ConfigError) as refused:
        load_contexts(path)
    assert str(refused.value).startswith(f"{path}: ")
    assert said in str(refused.value)


def test_not_toml_is_refused_naming_the_file(tmp_path):
    path = write(tmp_path / "contexts.toml", "[contexts.prod\n")
    with pytest.raises(ConfigError, match=f"^{path}: not valid TOML"):
        load_contexts(path)


def test_an_unknown_context_names_the_known_ones(tmp_path):
    path = write(tmp_path / "contexts.toml", PROD)
    with pytest.raises(UnknownName) as unknown:
        chosen(load_contexts(path), ["prod", "stagin"], "context", path)
    said = str(unknown.value)
    assert f"no context 'stagin' in {path}" in said
    assert "did you mean 'staging'?" in said
    assert "(known: prod, staging)" in said


def test_contexts_are_chosen_in_the_order_given_and_once_each(tmp_path):
    path = write(tmp_path / "contexts.toml", PROD)
    contexts = load_contexts(path)
    picked = chosen(contexts, ["staging", "prod", "staging"], "context", path)
    assert [context.name for context in picked] == ["staging", "prod"]


def test_views_beside_the_contexts_file_add_to_and_may_redefine_the_built_in_ones(tmp_path):
    write(tmp_path / "contexts.toml", PROD)
    write(
        tmp_path / "views.toml",
        '[views.billing]\nfilter = "agent:billing* state:open"\n'
        '[views.open]\nfilter = "state:open paged"\n',
    )
    views, start = views_for("billing", tmp_path / "contexts.toml")
    assert start == "agent:billing* state:open"
    assert views["open"].filter == "state:open paged"
    assert [name for name in views] == ["open", "held", "probing", "billing"]
    assert views["held"].filter == "state:held"


def test_an_unknown_view_names_the_known_ones(config_home):
    with pytest.raises(UnknownName, match=r"no view 'opne' .*did you mean 'open'\?"):
        views_for("opne")
