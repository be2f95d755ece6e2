"""`make demo` installs the package alone: a command that needs an extra says which, and how
to install it, instead of an import traceback."""

from __future__ import annotations

import sys

import pytest

from breakerdeck.console.cli import main


def test_gateway_without_its_extra_names_the_extra_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if not installed
    for name in [m for m in sys.modules if m.startswith("breakerdeck.engine.front.gateway.")]:
        if name != "breakerdeck.engine.front.gateway.cli":
            monkeypatch.delitem(sys.modules, name)
    config = tmp_path / "gateway.toml"
    config.write_text('[gateway]\nlisten = "127.0.0.1:0"\n')
    assert main(["gateway", "--config", str(config)]) == 2
    said = capsys.readouterr().err
    assert "gateway needs breakerdeck's 'front' extra" in said
    assert "uvicorn" in said and "make test" in said and "Traceback" not in said
