"""The Grafana dashboard's queries against a real Prometheus scraping a real gateway (DESIGN,
"Telemetry"; docs/telemetry.md): after a trip, every panel's query and the transitions'
annotation return series, and they say what happened."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.front.conftest import StartRig, credential_file, write_config
from tests.front.test_gateway_streams import platform
from tests.front.upstream import Recorder
from tests.telemetry.conftest import Scraped
from tests.waiting import BOUND_SECONDS

__all__ = ["platform"]

pytestmark = pytest.mark.xdist_group("prometheus")

DASHBOARD = Path(__file__).parents[2] / "dashboards" / "breakerdeck.json"
#: Grafana's own variables, as it would fill them in for a short time range.
_GRAFANA = {"$__rate_interval": "30s", "$__interval": "30s", "$__range": "5m"}


def queries() -> dict[str, str]:
    """Each panel's query and each annotation's, by title, as Grafana would send them."""
    board = json.loads(DASHBOARD.read_text())
    found = {
        panel["title"]: target["expr"] for panel in board["panels"] for target in panel["targets"]
    }
    for annotation in board["annotations"]["list"]:
        if "expr" in annotation:
            found[f"annotation: {annotation['name']}"] = annotation["expr"]
    for name, value in _GRAFANA.items():
        found = {title: expr.replace(name, value) for title, expr in found.items()}
    return found


async def until(seen: Callable[[], Any], seconds: float = BOUND_SECONDS) -> Any:
    """Polls Prometheus until `seen()` is truthy (it scrapes every second)."""
    deadline = time.monotonic() + seconds
    while not (found := await asyncio.to_thread(seen)):
        assert time.monotonic() < deadline, "Prometheus never saw it"
        await asyncio.sleep(0.2)
    return found


def values(series: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], str]:
    return {tuple(s["metric"].get(n, "") for n in labels): s["value"][1] for s in series}


async def test_after_a_trip_every_panel_and_annotation_returns_what_happened(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig, scraped: Scraped
) -> None:
    cred = credential_file(tmp_path)
    config = write_config(
        tmp_path, {"payments": platform.url("/api")}, {"billing": {"payments": cred}}
    )
    rig = await start_gateway(config, sock=scraped.sock)
    prometheus = scraped.prometheus
    await rig.call("billing", "/p/payments/x")
    # The first scrape comes once Prometheus has applied its targets (within 5 s of its start).
    await until(lambda: prometheus.query('breakerdeck_transitions_total{key="billing"}'))
    for _ in range(5):
        await rig.call("billing", "/p/payments/garbage")
    await rig.call("billing", "/p/payments/x")  # refused: the breaker is open
    await until(lambda: prometheus.query('breakerdeck_breaker_state{state="open"} == 1'))
    results = {title: prometheus.query(expr) for title, expr in queries().items()}
    assert all(results.values()), [title for title, series in results.items() if not series]
    assert values(results["Breakers per state"], "state")[("open",)] == "1"
    assert values(results["State per key"], "key") == {("billing",): "2"}
    opened = values(results["annotation: Transitions"], "key", "to")
    assert list(opened) == [("billing", "open")] and float(opened[("billing", "open")]) > 0
    assert float(values(results["Denied calls by reason"], "reason")[("circuit_breaker_open",)])
    assert values(results["Pages"], "key") == {("billing",): "0"}
