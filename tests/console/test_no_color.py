"""Issue 10, item 3: with NO_COLOR, trouble is the loudest thing on screen. The contrast of each
word against its own background is measured (WCAG 2 ratio) on what the screen composes, after
Textual's NO_COLOR filter turned every colour grey."""

from __future__ import annotations

from rich.segment import Segment

from tests.console.conftest import AgentWorld, running, settle

#: WCAG AAA for body text: what the trouble words must reach.
LOUD = 7.0


def luminance(rgb: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(segment: Segment) -> float:
    """The ratio of a segment's text to its background, as a terminal draws it (reverse
    swaps them)."""
    style = segment.style
    assert style is not None and style.color is not None and style.bgcolor is not None
    fore = luminance(tuple(style.color.get_truecolor()))
    back = luminance(tuple(style.bgcolor.get_truecolor()))
    if style.reverse:
        fore, back = back, fore
    light, dark = max(fore, back), min(fore, back)
    return (light + 0.05) / (dark + 0.05)


def screen_segments(app) -> list[list[Segment]]:
    """Each screen line's segments as the compositor sends them to the terminal."""
    update = app.screen._compositor.render_update(full=True)
    return [[seg for strip in line for seg in strip] for line in update.strips]


def find(lines: list[list[Segment]], row: int, text: str) -> Segment:
    return next(seg for seg in lines[row] if seg.text.strip().startswith(text))


async def page(world: AgentWorld, agent: str) -> None:
    """Two failed probes in a row: the page."""
    await world.trip_upstream(agent)
    for _ in range(2):
        world.clock.advance(300)
        world.engine.poll()
        await world.call(agent, "payments")


async def test_with_no_color_open_and_paged_are_the_loudest_words(agent_world, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    await page(agent_world, "ava")
    await agent_world.trip_upstream("bo")
    await agent_world.call("cy", "crm")
    async with running(agent_world.engine) as (app, pilot):
        app.clear_notifications()
        await settle(pilot)
        lines = screen_segments(app)
        header = 0
        closed = contrast(find(lines, header, "CLOSED"))
        paged = contrast(find(lines, header, "!! PAGED"))
        opened = contrast(find(lines, header, "OPEN"))
        assert paged >= LOUD and opened >= LOUD
        assert opened > closed and paged > closed
        cards = [i for i, line in enumerate(lines) if any("probe in" in s.text for s in line)]
        paged_card, open_card = cards[0], cards[1]  # ava (paged) heads the list, then bo
        closed_card = next(
            i
            for i, line in enumerate(lines)
            if any("CLOSED " in s.text for s in line) and i > header
        )
        card_closed = contrast(find(lines, closed_card, "CLOSED"))
        assert contrast(find(lines, paged_card, "PAGED")) >= LOUD
        assert contrast(find(lines, open_card, "OPEN")) >= LOUD
        assert contrast(find(lines, open_card, "OPEN")) > card_closed
