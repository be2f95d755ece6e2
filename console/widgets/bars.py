"""The one-line bars above the cards: the summary (header) and the demo/filter status line."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from breakerdeck.console.model import Summary, clock_text
from breakerdeck.engine.text import printable


class SummaryBar(Static):
    """Counts per state, paged breakers loudly, and whether time is simulated or stale."""

    DEFAULT_CSS = """
    SummaryBar { height: 1; width: 1fr; }
    """

    _shown: Text | None = None

    def show(
        self,
        summary: Summary,
        *,
        now: float,
        speed: float | None,
        label: str,
        stale_since: float | None,
    ) -> None:
        width = self.size.width or self.app.size.width  # before its first layout: the screen's
        counts = Text(no_wrap=True)
        # NO_COLOR greys every colour, and red on the bar's grey is the faintest of them:
        # there, trouble counts are reversed instead, the loudest thing without colour.
        loud = "bold reverse" if self.app.no_color else ""
        for word, count, style in (
            ("OPEN", summary.open, (loud or "bold red") if summary.open else ""),
            ("HALF-OPEN", summary.half_open, (loud or "bold yellow") if summary.half_open else ""),
            ("PAUSED", summary.paused, (loud or "bold magenta") if summary.paused else ""),
            ("CLOSED", summary.closed, "green"),
        ):
            if word != "OPEN":
                counts.append("  ")
            counts.append(f"{word} {count}", style=style)
        text = Text(no_wrap=True, overflow="ellipsis")
        if summary.paged:
            names = printable(", ".join(summary.paged_keys[:3]))
            more = f" +{summary.paged - 3}" if summary.paged > 3 else ""
            banner = f" !! PAGED {summary.paged}: {names}{more} !! "
            shortest = self._right(now, speed, stale_since, full=False)
            if len(banner) + 1 + counts.cell_len + shortest.cell_len > width:
                # The paged cards head the list with their own PAGED mark: the header keeps
                # room for every count and the clock rather than for their names.
                banner = f" !! PAGED {summary.paged} !! "
            text.append(banner, style="bold reverse")
            text.append(" ")
        text.append_text(counts)
        right = self._right(now, speed, stale_since, full=True)
        if text.cell_len + right.cell_len > width:
            right = self._right(now, speed, stale_since, full=False)
        label = printable(label)  # an engine's name, as its feed reported it
        if label and text.cell_len + right.cell_len + len(label) + 5 <= width:  # gap of 2+
            right = Text.assemble((label, "dim"), " · ", right)
        gap = width - text.cell_len - right.cell_len
        text.append(" " * max(gap, 0))
        text.append_text(right)
        if text != self._shown:  # most repaints under a flood change nothing here
            self._shown = text
            self.update(text, layout=False)  # one line, always: nothing to lay out again

    @staticmethod
    def _right(now: float, speed: float | None, stale_since: float | None, full: bool) -> Text:
        right = Text(no_wrap=True)
        if stale_since is not None:
            right.append(f" STALE since {clock_text(stale_since)} ", style="bold reverse")
            return right
        if speed is not None and speed != 1:
            right.append(f"{'simulated time' if full else 'sim'} ×{speed:g} ", style="bold")
        right.append(clock_text(now))
        return right


class StatusLine(Static):
    """Demo fault state per platform and the active filter; hidden when there is neither."""

    DEFAULT_CSS = """
    StatusLine { height: 1; width: 1fr; }
    """

    _shown: Text | None = None

    def show(self, *, filter_text: str, shown: int, total: int, faults: dict[str, str]) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        if filter_text:
            shown_filter = printable(filter_text)
            text.append(f"filter “{shown_filter}”: {shown} of {total} ", style="bold reverse")
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
        self.display = bool(filter_text or faults)
        width = self.app.size.width  # the line spans the screen (it may be hidden: no size yet)
        if text.cell_len > width:  # cut where the eye sees it was cut
            text.truncate(width, overflow="ellipsis")
        if text != self._shown:  # the same line on most repaints: skip the screen's layout
            self._shown = text
            self.update(text)
