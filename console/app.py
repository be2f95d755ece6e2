"""The breakerdeck console: a Textual app over one `Source`.

Parts: the model (`console.card`, `console.board` and their helpers, plain data the UI never
changes), the source (`console.source`, in-process today), the UI (`screens/`, `widgets/`,
`breakerdeck.tcss`) and messages. One exclusive worker reads the source's event batches, folds
them into the board and posts a `BoardChanged` that replaces any still queued, so a flood
collapses into one repaint. One one-second timer drives every countdown; it repaints only
visible open cards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer

from breakerdeck.console.board import SEED_EVENTS, Board
from breakerdeck.console.export import Exports
from breakerdeck.console.filters import EVERYTHING, Filter
from breakerdeck.console.messages import (
    DemoFaultRequested,
    DetailsRequested,
    ExportRequested,
    FixRequested,
    ResetRequested,
    TableRequested,
)
from breakerdeck.console.operator_actions import OperatorActions
from breakerdeck.console.palette import palette_commands
from breakerdeck.console.replay import JUMP_SECONDS, ReplaySource
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.help import HelpScreen
from breakerdeck.console.screens.table import TableScreen
from breakerdeck.console.source import (
    FaultControls,
    FreshViews,
    Notice,
    Restart,
    SharedStores,
    Source,
    Writes,
    fleet_of,
)
from breakerdeck.console.web_role import web_session
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.engine.feed.bus import Missed
from breakerdeck.engine.text import printable

#: Real seconds within which a second page of one key rings no bell: the same page relayed by
#: the other replicas that share its breaker.
PAGE_BELL_SPACING = 60.0

#: The header clock's place in the frame's clock readings (sources key theirs by origin).
_HEADER = object()

#: The terminal went away (SSH dropped, tmux killed) or we were asked to stop.
_LEAVE_ON = (signal.SIGHUP, signal.SIGTERM)


class BoardChanged(Message):
    """The board has news; one queued instance stands for any number of batches."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, BoardChanged)


class BreakerdeckApp(OperatorActions, Exports):
    CSS_PATH = "breakerdeck.tcss"
    TITLE = "breakerdeck"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="app-quit"),
        # A replay's player (`check_action` offers them only there); the status line says
        # where the recording is and lists these keys.
        Binding("space", "replay('play')", "Play/pause", id="replay-play"),
        Binding("full_stop", "replay('step', 1)", "Step", show=False, id="replay-step"),
        Binding("comma", "replay('step', -1)", "Back", show=False, id="replay-back"),
        Binding("right_square_bracket", "replay('jump', 1)", "+1m", show=False, id="replay-on"),
        Binding("left_square_bracket", "replay('jump', -1)", "-1m", show=False, id="replay-off"),
        Binding("n", "replay('change', 1)", "Next change", show=False, id="replay-next"),
        Binding("N", "replay('change', -1)", "Previous", show=False, id="replay-previous"),
        Binding("plus,equals_sign", "replay('speed', 1)", "Faster", show=False, id="replay-up"),
        Binding("minus", "replay('speed', -1)", "Slower", show=False, id="replay-down"),
    ]

    def __init__(
        self,
        source: Source,
        *,
        operator: str,
        controls: FaultControls | None = None,
        platform_of: Callable[[str], str | None] | None = None,
        tick_seconds: float | None = 1.0,
        min_repaint_seconds: float = 0.25,
        theme: str | None = None,
        export_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.export_dir = export_dir
        self.source = source
        # A console `breakerdeck web` started: a viewer's writes nothing, whatever key or
        # message asks, and an operator's resets carry the web actor (console.web_role).
        session = web_session(os.environ)
        self.read_only = session is not None and session.read_only
        self.operator = operator if session is None else session.actor
        self.controls = controls
        self.platform_of = platform_of or (lambda key: None)
        self.fleet = fleet_of(source)
        self.writes = source if isinstance(source, Writes) else None
        self.stores = source if isinstance(source, SharedStores) else None
        #: Views read now, where the source can (a probe out writes no line).
        self.probes = source if isinstance(source, FreshViews) else None
        self.board = Board(
            source.thresholds,
            self.fleet.describe,
            origin=self.fleet.origin,
            limits_of=self.fleet.limits_of,
            pooled=self.fleet.pooled,
        )
        self.tick_seconds = tick_seconds
        self._pending: set[str] = set()
        #: (breaker id, the open episode's trip seq) whose credential the operator marked fixed.
        self._fixed: set[tuple[str, int]] = set()
        self.resyncs = 0  # snapshots taken: one at start, one after each overflow
        #: Under a flood, the board is folded at once but the screen repaints at most this often.
        self.min_repaint_seconds = min_repaint_seconds
        self._repainted_at = 0.0
        self._rung: dict[str, float] = {}
        self._repaint_timer: Timer | None = None
        #: Each source clock as read once per frame (a tick or a repaint): the cards, the
        #: header and a dialog read the same countdown (a dialog ran 2-3 s behind its card).
        self._frame: dict[object, float] = {}
        chosen = theme or os.environ.get("BREAKERDECK_THEME")
        if chosen and chosen in self.available_themes:
            self.theme = chosen

    # -- life --------------------------------------------------------------------------------

    def on_mount(self) -> None:
        # The terminal went away (SSH dropped, tmux killed) or we were asked to stop: leave
        # cleanly, so the caller's cleanup runs, instead of dying on the default handler.
        loop = asyncio.get_running_loop()
        for signum in _LEAVE_ON:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.exit)
        self.board.apply(self.source.recent(SEED_EVENTS))
        self.board.load(self.source.snapshot(), at=self.source.now())
        self.push_screen(DashboardScreen())
        self.read_source()
        if self.tick_seconds:
            self.set_interval(self.tick_seconds, self.tick, name="countdowns")

    def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in _LEAVE_ON:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        self.source.close()

    @work(exclusive=True, group="source", name="source reader")
    async def read_source(self) -> None:
        async for batch in self.source.updates():
            if isinstance(batch, Notice):
                self.notify(batch.text, severity=batch.severity, timeout=6)  # type: ignore[arg-type]
                continue
            if isinstance(batch, Restart):
                self.board.clear()  # a replay moved back: its history is read again below
            if isinstance(batch, Missed | Restart):
                self.resyncs += 1
                self.board.apply(self.source.recent(SEED_EVENTS))  # what the cards missed
                self.board.load(self.source.snapshot(), at=self.source.now())
                self._pending.add("*")
            else:
                touched = self.board.apply(batch)
                self._announce_pages(batch)
                if touched:
                    self.board.update(event.view for event in batch if event.view is not None)
                    self._pending |= touched
            if self._pending:
                self.post_message(BoardChanged())

    def _announce_pages(self, batch: list[Event]) -> None:
        """A page rings the bell, once, as it happens. Its loud marks are the header's banner
        and the card's PAGED, which stay while it lasts: a toast stacked over the cards hid
        the very breakers it was about."""
        now = time.monotonic()
        for event in batch:
            if event.type != ev.PAGE:
                continue
            # Replicas sharing a breaker each show its page (relayed, with its origin): one
            # page, one bell, whichever of them the console hears first.
            if now - self._rung.get(event.key, -PAGE_BELL_SPACING) >= PAGE_BELL_SPACING:
                self._rung[event.key] = now
                self.bell()

    def on_board_changed(self, _message: BoardChanged) -> None:
        if self._repaint_timer is not None:
            # A repaint is already due. Without this, news that arrives after it fell due but
            # before the busy loop ran its timer repainted at once, and the timer again just
            # after: about six repaints a second instead of four.
            return
        wait = self._repainted_at + self.min_repaint_seconds - time.monotonic()
        if wait > 0:
            self._repaint_timer = self.set_timer(wait, self._repaint_later)
            return
        self._repaint()

    def _repaint_later(self) -> None:
        self._repaint_timer = None
        self._repaint()

    def now_for(self, ident: str) -> float:
        """The clock `ident`'s countdown runs on, as read for this frame."""
        origin = self.fleet.origin(ident)
        now = self._frame.get(origin)
        if now is None:
            now = self._frame[origin] = self.fleet.now_for(ident)
        return now

    def now(self) -> float:
        """The header's clock, as read for this frame."""
        now = self._frame.get(_HEADER)
        if now is None:
            now = self._frame[_HEADER] = self.source.now()
        return now

    def _repaint(self) -> None:
        self._repainted_at = time.monotonic()
        self._frame.clear()
        if isinstance(self.screen, ConfirmScreen):
            self.screen.tick()  # the card beneath is about to show a fresher countdown
        touched, self._pending = self._pending, set()
        for screen in self.screen_stack:
            if isinstance(screen, DashboardScreen | TableScreen):
                screen.board_changed()
            elif isinstance(screen, DetailScreen) and ("*" in touched or screen.card.id in touched):
                self.run_worker(screen.reload(), group="detail", exclusive=True)

    def tick(self) -> None:
        """The one timer: countdowns on the screen that shows them, and whether the probes of
        half-open breakers went out (admitting one writes no line)."""
        self._frame.clear()
        self._read_probes()
        current = self.screen
        if isinstance(current, ConfirmScreen):
            current.tick()
        screen: DashboardScreen | DetailScreen | TableScreen | None = (
            current
            if isinstance(current, DashboardScreen | DetailScreen | TableScreen)
            else self._dashboard()  # a dialog is up: keep the dashboard beneath it honest
        )
        if screen is not None:
            screen.tick()

    def _read_probes(self) -> None:
        half_open = self.board.half_open()
        if not half_open or self.probes is None:
            return
        changed = self.board.probes_changed(self.probes.fresh_views(half_open))
        if changed:
            self.board.update(changed)
            self._pending |= {view.key for view in changed}
            self.post_message(BoardChanged())

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast here carries text from outside (keys, sources, a feed's error): shown
        escaped and never read as markup, whatever the caller asked for."""
        super().notify(
            printable(message),
            title=printable(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette (`ctrl+p`): the screen's actions as `check_action` offers them now
        (`console.palette`), then Textual's own."""
        return palette_commands(self, screen, super().get_system_commands(screen))

    def active_filter(self) -> Filter:
        dashboard = self._dashboard()
        return EVERYTHING if dashboard is None else dashboard.filter

    # -- replay ------------------------------------------------------------------------------

    @property
    def player(self) -> ReplaySource | None:
        return self.source if isinstance(self.source, ReplaySource) else None

    def player_status(self) -> str | None:
        player = self.player
        return None if player is None else player.status()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "replay":
            return self.player is not None  # elsewhere these keys are not offered at all
        return True

    def action_replay(self, what: str, amount: int = 1) -> None:
        player = self.player
        if player is None:
            return
        if what == "play":
            player.play_pause()
        elif what == "step":
            player.step(amount)
        elif what == "jump":
            player.jump(amount * JUMP_SECONDS)
        elif what == "change":
            player.next_change(amount)
        elif what == "speed":
            player.faster(amount)
        self._frame.clear()
        self._refresh_status()  # the player's line, at once

    # -- operator actions ------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # Screens post these; the workflows (dialogs, writes, toasts) are `OperatorActions`'.

    @on(DetailsRequested)
    def _details_requested(self, message: DetailsRequested) -> None:
        self.push_screen(DetailScreen(message.card))

    @on(TableRequested)
    def _table_requested(self) -> None:
        if not isinstance(self.screen, TableScreen):
            self.push_screen(TableScreen())

    # The keys are not offered to a read-only console (`check_action`); these refuse again,
    # so that nothing that posts the message (a binding, a click, a palette) writes.

    @on(ResetRequested)
    def _reset_requested(self, message: ResetRequested) -> None:
        if not self.read_only:
            self.request_reset(message.card, every=message.every)

    @on(FixRequested)
    def _fix_requested(self, message: FixRequested) -> None:
        if not self.read_only:
            self.request_fix(message.card)

    @on(ExportRequested)
    def _export_requested(self, message: ExportRequested) -> None:
        self.run_worker(self.export(message.card), group="export")

    @on(DemoFaultRequested)
    def _demo_fault_requested(self, message: DemoFaultRequested) -> None:
        if self.fault_offer():
            self.demo_fault(message.what, message.card)
