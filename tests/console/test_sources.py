"""Issue 31: a `Source` gives breakers, events and an audit log; what only some sources can do
is a capability the app asks for once (`console/source.py`)."""

from __future__ import annotations

from breakerdeck.console.remote_source import RemoteSource
from breakerdeck.console.replay import ReplaySource
from breakerdeck.console.source import (
    FreshViews,
    InProcessSource,
    OneEngine,
    SharedStores,
    Writes,
    fleet_of,
)
from tests.console.conftest import make_app


def test_each_source_has_the_capabilities_it_can_answer():
    has = {
        source: {c.__name__ for c in (Writes, FreshViews, SharedStores) if issubclass(source, c)}
        for source in (InProcessSource, RemoteSource, ReplaySource)
    }
    assert has == {
        InProcessSource: {"Writes", "FreshViews", "SharedStores"},
        RemoteSource: {"Writes", "SharedStores"},
        ReplaySource: {"FreshViews"},
    }


def test_a_source_of_one_engine_is_a_fleet_of_one_where_each_id_is_its_key(agent_world):
    source = InProcessSource(agent_world.engine)
    fleet = fleet_of(source)
    assert isinstance(fleet, OneEngine)
    assert (fleet.engines, fleet.describe("ava"), fleet.siblings("ava")) == (
        1,
        ("ava", None),
        ["ava"],
    )
    assert (fleet.now_for("ava"), fleet.stale_for("ava")) == (source.now(), None)


def test_the_app_asks_each_capability_once(agent_world):
    app = make_app(agent_world.engine)
    assert app.writes is app.source and app.stores is app.source and app.probes is app.source
    assert isinstance(app.fleet, OneEngine)
