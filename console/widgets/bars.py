"""The one-line bars above the cards: the summary (header) and the demo/filter status line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from breakerdeck.console.board import Summary
from breakerdeck.console.card import Card
from breakerdeck.console.pulse import TabTitle
from breakerdeck.console.widgets.tabs import name_style
from breakerdeck.console.words import clock_text
from breakerdeck.engine.text import printable

if TYPE_CHECKING:
    from breakerdeck.console.messages import Deck

#: The header keeps at most this much of a context's name (the counts and the clock come first).
CONTEXT_CHARS = 24


class SummaryBar(Static):
    """Counts per state, paged breakers loudly, whether time is simulated or stale, and which
    engines lost their shared store."""

    DEFAULT_CSS = """
    SummaryBar { height: 1; width: 1fr; }
    """

    _shown: Text | None = None

    def show_deck(self, deck: Deck) -> None:
        """The header of whatever screen shows the deck's tab: the same on every screen."""
        source = deck.source
        self.show(
            deck.board.summary(),
            now=deck.now(),
            speed=source.speed,
            label=source.label,
            stale_since=source.stale_since,
            store_lost=[name for name, _ in deck.store_lost()],
            engines=deck.fleet.engines,
            recorded=source.recorded,
            context=deck.context_title(),
        )

    def show(
        self,
        summary: Summary,
        *,
        now: float,
        speed: float | None,
        label: str,
        stale_since: float | None,
        store_lost: Sequence[str | None] = (),
        engines: int = 1,
        recorded: bool = False,
        context: TabTitle | None = None,
    ) -> None:
        """`store_lost`: the engines whose shared store is lost, by label (None: the only
        one), of `engines` watched. `recorded`: the clock is a replay's, the recorded time.
        `context`: the context shown, named first in its colour (the name says it without)."""
        self._recorded = recorded
        width = self.size.width or self.app.size.width  # before its first layout: the screen's
        marks = _store_marks(store_lost, engines)
        counts = Text(no_wrap=True)
        if context is not None:
            name = printable(context.name)  # from contexts.toml: outside text
            if len(name) > CONTEXT_CHARS:
                name = name[: CONTEXT_CHARS - 1] + "…"
            counts.append(name, name_style(context.color, self.app.no_color))
            counts.append(" read-only" if context.read_only else "", "bold")
            counts.append("  ")
        # NO_COLOR greys every colour, and red on the bar's grey is the faintest of them:
        # there, trouble counts are reversed instead, the loudest thing without colour.
        loud = "bold reverse" if self.app.no_color else ""
        shown = 0
        for look, count in summary.counts:
            if not count and not look.shown_at_zero:
                continue
            if shown:
                counts.append("  ")
            shown += 1
            style = look.label if not look.loud else (loud or look.label) if count else ""
            counts.append(f"{look.word} {count}", style=style)
        text = Text(no_wrap=True, overflow="ellipsis")
        if summary.paged:
            names = printable(", ".join(summary.paged_keys[:3]))
            more = f" +{summary.paged - 3}" if summary.paged > 3 else ""
            banner = f" !! PAGED {summary.paged}: {names}{more} !! "
            shortest = _marked(marks[-1], self._right(now, speed, stale_since, full=False))
            if len(banner) + 1 + counts.cell_len + shortest.cell_len > width:
                # The paged cards head the list with their own PAGED mark: the header keeps
                # room for every count and the clock rather than for their names.
                banner = f" !! PAGED {summary.paged} !! "
            text.append(banner, style="bold reverse")
            text.append(" ")
        text.append_text(counts)
        # The most the right side can say and still fit: the store's mark before the clock
        # (it names the replicas, else counts them), the clock shortened before the mark.
        rights = [
            _marked(mark, self._right(now, speed, stale_since, full=full))
            for mark in marks
            for full in (True, False)
        ]
        right = next((r for r in rights if text.cell_len + r.cell_len <= width), rights[-1])
        label = printable(label)  # an engine's name, as its feed reported it
        if label and text.cell_len + right.cell_len + len(label) + 5 <= width:  # gap of 2+
            right = Text.assemble((label, "dim"), " · ", right)
        gap = width - text.cell_len - right.cell_len
        text.append(" " * max(gap, 0))
        text.append_text(right)
        if text != self._shown:  # most repaints under a flood change nothing here
            self._shown = text
            self.update(text, layout=False)  # one line, always: nothing to lay out again

    _recorded = False

    def _right(
        self, now: float, speed: float | None, stale_since: float | None, full: bool
    ) -> Text:
        right = Text(no_wrap=True)
        if self._recorded:
            right.append("recorded time " if full else "rec ", style="bold")
        if stale_since is not None:
            right.append(f" STALE since {clock_text(stale_since)} ", style="bold reverse")
            return right
        if speed is not None and speed != 1:
            right.append(f"{'simulated time' if full else 'sim'} ×{speed:g} ", style="bold")
        right.append(clock_text(now))
        return right


def _store_marks(lost: Sequence[str | None], engines: int) -> list[str]:
    """What the header may say of lost shared stores, the most telling first: the replicas'
    names, how many of how many, then the fewest words. Empty text when none is lost."""
    if not lost:
        return [""]
    names = [printable(name) for name in lost if name is not None]
    if not names:  # the only engine
        return ["shared store lost", "store lost"]
    return [
        f"shared store lost on {', '.join(names)}",
        f"shared store lost on {len(lost)} of {engines}",
        f"store lost {len(lost)}/{engines}",
    ]


def _marked(mark: str, right: Text) -> Text:
    """The header's right side with a lost store's mark before it: reversed, as STALE is, so
    it reads without colour."""
    if not mark:
        return right
    return Text.assemble((f" {mark} ", "bold reverse"), " ", right, no_wrap=True)


class StatusLine(Static):
    """The active filter, why shared stores are lost, and the demo's fault state per platform;
    hidden when there is none of them."""

    DEFAULT_CSS = """
    StatusLine { height: 1; width: 1fr; }
    """

    _shown: Text | None = None

    def show(
        self,
        *,
        filter_text: str,
        shown: int,
        total: int,
        faults: dict[str, str],
        store_lost: Sequence[tuple[str | None, str]] = (),
        player: str | None = None,
        store_warnings: Sequence[tuple[str | None, str]] = (),
    ) -> None:
        """`store_lost`: (engine label, or None for the only one; why) for each engine whose
        shared store is lost. The header says which; this line says why, once per reason
        (replicas that lost one Redis usually give the same). `player`: a replay's state and
        keys, first. `store_warnings`: the same for each engine whose store answers though
        something is wrong (its clock is off the store's), said as loudly."""
        text = Text(no_wrap=True, overflow="ellipsis")
        if player:
            state, _, keys = player.partition("  ")
            text.append(state, style="bold reverse")
            text.append("  " + keys + "  ")
        if filter_text:
            shown_filter = printable(filter_text)
            text.append(f"filter “{shown_filter}”: {shown} of {total} ", style="bold reverse")
            text.append("  ")
        for title, troubles in (("store lost", store_lost), ("shared store", store_warnings)):
            if not troubles:
                continue
            reasons: dict[str, list[str]] = {}
            for name, why in troubles:
                reasons.setdefault(why, []).extend([name] if name else [])
            text.append(title, style="bold reverse")
            for why, names in reasons.items():
                where = f" on {', '.join(names)}" if names else ""
                text.append(printable(f"{where}: {why}"))
                text.append(" · ", style="dim")
            text.right_crop(3)
            text.append("  ")
        if faults:
            text.append("demo ", style="bold")
            # The platforms the filter names first: filtering on a platform must never push
            # that platform's own fault off the line.
            words = filter_text.lower().split()
            order = sorted(faults, key=lambda p: not any(w in p.lower() for w in words))
            troubled = [(p, faults[p]) for p in order if faults[p] != "ok"]
            for platform, state in troubled:
                text.append(printable(platform))
                text.append(" ")
                text.append(printable(state), style="bold reverse")
                text.append(" · ", style="dim")
            healthy = [p for p in order if faults[p] == "ok"]
            if healthy:
                text.append("ok: " + printable(" ".join(healthy)))
        self.display = bool(filter_text or faults or store_lost or store_warnings or player)
        width = self.app.size.width  # the line spans the screen (it may be hidden: no size yet)
        if text.cell_len > width:  # cut where the eye sees it was cut
            text.truncate(width, overflow="ellipsis")
        if text != self._shown:  # the same line on most repaints: skip the screen's layout
            self._shown = text
            self.update(text)


class SelectionHint(Static):
    """Under the cards, only while the selected card is off screen (the operator moved the
    selection, then trips re-sorted the board or the wheel scrolled): says where `r` and
    `enter` would act, on a line of its own so it never hides the platforms' health."""

    DEFAULT_CSS = """
    SelectionHint { height: 1; width: 1fr; }
    """

    _shown: Text | None = None

    def show(self, hidden: Card | None) -> None:
        self.display = hidden is not None
        text = Text(no_wrap=True, overflow="ellipsis")
        if hidden is not None:
            text.append(f"▶ {printable(hidden.name or hidden.agent)}", style="bold reverse")
            text.append(f" ({hidden.state}) is off screen: j selects the top card shown, ")
            text.append("g follows the top card")
        if text != self._shown:
            self._shown = text
            self.update(text)
