"""A change nobody waits for (a counter, when a credential last worked) is queued with its time
and built into a verdict by the store's writer when it writes it (DESIGN, "Durability":
within a second); a transition's verdict is built at once and waited for."""

from pathlib import Path

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.policy import ToolPolicy

KEY = "search@default"


def _engine(tmp_path: Path, clock: ManualClock) -> Engine:
    engine = Engine(ToolPolicy(), clock=clock, state_dir=tmp_path / "state")
    engine.restore()
    return engine


def _stored(engine: Engine) -> dict[str, tuple[float | None, int, float]]:
    """Each stored verdict's credential time, count and save time, once all is written."""
    assert engine.store is not None and engine.store.flush(10)
    return {v.key: (v.credential_ok_at, v.count, v.saved_at) for v in engine.store.load()}


def test_a_new_keys_first_success_stores_that_its_credential_works(tmp_path: Path) -> None:
    clock = ManualClock()
    with _engine(tmp_path, clock) as engine:
        with engine.guard(KEY, agent="planner", lease=61):
            pass
        assert _stored(engine) == {KEY: (clock.wall(), 0, clock.wall())}


def test_a_queued_verdict_is_saved_at_the_time_of_its_change(tmp_path: Path) -> None:
    clock = ManualClock()
    with _engine(tmp_path, clock) as engine:
        changed = clock.wall()
        with engine.guard(KEY, agent="planner", lease=61):
            pass
        clock.advance(500)
        assert _stored(engine)[KEY][2] == changed


def test_a_counted_failure_is_stored_with_its_count(tmp_path: Path) -> None:
    clock = ManualClock()
    with _engine(tmp_path, clock) as engine:
        guard = engine.guard(KEY, agent="planner", lease=61)
        with pytest.raises(ConnectionError), guard:
            raise ConnectionError("connection refused")
        assert _stored(engine)[KEY][1] == 1
