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
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.timer import Timer

from breakerdeck.console.board import SEED_EVENTS
from breakerdeck.console.contexts import Context, View, builtin_views
from breakerdeck.console.export import Exports
from breakerdeck.console.filters import EVERYTHING, Filter
from breakerdeck.console.messages import (
    ContextRequested,
    DemoFaultRequested,
    DetailsRequested,
    EnforceShownRequested,
    ExportRequested,
    FixRequested,
    ResetRequested,
    SteerRequested,
    TableRequested,
)
from breakerdeck.console.operator_actions import OperatorActions
from breakerdeck.console.palette import palette_commands
from breakerdeck.console.pulse import PulseRow, TabTitle, pulse_row, tab_title
from breakerdeck.console.replay import JUMP_SECONDS, ReplaySource
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.help import HelpScreen
from breakerdeck.console.screens.pulse import PulseScreen
from breakerdeck.console.screens.table import TableScreen
from breakerdeck.console.screens.write import WriteScreen
from breakerdeck.console.source import FaultControls, Notice, Restart, Source
from breakerdeck.console.tab import Tab
from breakerdeck.console.view_commands import ViewCommands
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


#: The keys of the operator's writes (the dashboard's, the detail screen's, and issue 32's hold,
#: release and mode): where the console is read-only, the screen does not offer them, and
#: pressing one reaches the app's binding, which says why instead of doing nothing.
WRITE_KEYS = (
    ("r", "reset"),
    ("R", "reset"),
    ("f", "mark a credential fixed"),
    ("o", "hold"),
    ("O", "release"),
    ("m", "mode change"),
    ("M", "mode change"),
)


class BreakerdeckApp(OperatorActions, Exports):
    CSS_PATH = "breakerdeck.tcss"
    TITLE = "breakerdeck"
    COMMANDS = App.COMMANDS | {ViewCommands}
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
        # Contexts (`watch --context`): the tabs' numbers switch, `p` shows them all.
        *(
            Binding(str(n), f"context({n - 1})", f"Context {n}", show=False, id=f"context-{n}")
            for n in range(1, 10)
        ),
        Binding("p", "pulse", "Pulse", id="pulse", tooltip="every context in one table"),
        *(
            Binding(key, f"read_only({what!r})", what, show=False, id=f"read-only-{n}")
            for n, (key, what) in enumerate(WRITE_KEYS)
        ),
    ]

    def __init__(
        self,
        source: Source | Sequence[tuple[Context, Source]],
        *,
        operator: str,
        controls: FaultControls | None = None,
        platform_of: Callable[[str], str | None] | None = None,
        tick_seconds: float | None = 1.0,
        min_repaint_seconds: float = 0.25,
        theme: str | None = None,
        views: Mapping[str, View] | None = None,
        filter_text: str = "",
        export_dir: Path | None = None,
    ) -> None:
        """`source`: one source, or one per context (`watch --context`), the first shown
        first. `views`: the saved views the palette offers (default: the built-in ones).
        `filter_text`: every dashboard starts filtered by it (`--view`)."""
        super().__init__()
        self.tabs = [Tab(source)] if isinstance(source, Source) else [Tab(s, c) for c, s in source]
        if not self.tabs:
            raise ValueError("BreakerdeckApp needs a source")
        self.active = 0
        self.export_dir = export_dir
        # A console `breakerdeck web` started: a viewer's writes nothing, whatever key or
        # message asks, and an operator's resets carry the web actor (console.web_role).
        session = web_session(os.environ)
        self.viewer = session is not None and session.read_only
        self.operator = operator if session is None else session.actor
        self.controls = controls
        self.platform_of = platform_of or (lambda key: None)
        self.views = dict(views) if views is not None else builtin_views()
        self.filter_text = filter_text
        self.tick_seconds = tick_seconds
        #: Under a flood, the board is folded at once but the screen repaints at most this often.
        self.min_repaint_seconds = min_repaint_seconds
        self._repainted_at = 0.0
        self._rung: dict[tuple[int, str], float] = {}
        self._repaint_timer: Timer | None = None
        #: Each source clock as read once per frame (a tick or a repaint): the cards, the
        #: header and a dialog read the same countdown (a dialog ran 2-3 s behind its card).
        self._frame: dict[object, float] = {}
        chosen = theme or os.environ.get("BREAKERDECK_THEME")
        if chosen and chosen in self.available_themes:
            self.theme = chosen

    # -- the tab shown: what the screens and the operator's actions read --------------------

    @property
    def resyncs(self) -> int:
        return self.tab.resyncs

    @property
    def contexts(self) -> bool:
        """Whether the console watches contexts (`watch --context`): the pulse is offered."""
        return any(tab.context is not None for tab in self.tabs)

    # -- life --------------------------------------------------------------------------------

    def on_mount(self) -> None:
        # The terminal went away (SSH dropped, tmux killed) or we were asked to stop: leave
        # cleanly, so the caller's cleanup runs, instead of dying on the default handler.
        loop = asyncio.get_running_loop()
        for signum in _LEAVE_ON:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.exit)
        for tab in self.tabs:
            tab.board.apply(tab.source.recent(SEED_EVENTS))
            tab.board.load(tab.source.snapshot(), at=tab.source.now())
        # One mode per tab: each keeps its own dashboard (filter, selection) and the screens
        # opened over it while another tab is shown.
        for n in range(len(self.tabs)):
            self.add_mode(_mode(n), partial(self._dashboard_screen, n))
        self.switch_mode(_mode(0))
        for n, tab in enumerate(self.tabs):
            self.run_worker(self.read_source(tab), name=f"source reader {n}", group=f"source {n}")
        if self.tick_seconds:
            self.set_interval(self.tick_seconds, self.tick, name="countdowns")

    def _dashboard_screen(self, index: int) -> DashboardScreen:
        named = "dashboard" if index == 0 else f"dashboard-{index + 1}"
        return DashboardScreen(self.filter_text, id=named)

    def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in _LEAVE_ON:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        for tab in self.tabs:
            tab.source.close()

    async def read_source(self, tab: Tab) -> None:
        """One tab's source, folded into its board: a tab whose engines are lost waits on its
        own reader, and the others read on."""
        source, board = tab.source, tab.board
        async for batch in source.updates():
            if isinstance(batch, Notice):
                said = batch.text if len(self.tabs) == 1 else f"{tab.name}: {batch.text}"
                self.notify(said, severity=batch.severity, timeout=6)  # type: ignore[arg-type]
                continue
            if isinstance(batch, Restart):
                board.clear()  # a replay moved back: its history is read again below
            if isinstance(batch, Missed | Restart):
                tab.resyncs += 1
                board.apply(source.recent(SEED_EVENTS))  # what the cards missed
                board.load(source.snapshot(), at=source.now())
                tab.pending.add("*")
            else:
                touched = board.apply(batch)
                self._announce_pages(batch, self.tabs.index(tab))
                if touched:
                    board.update(event.view for event in batch if event.view is not None)
                    tab.pending |= touched
            if tab.pending:
                self.post_message(BoardChanged())

    def _announce_pages(self, batch: list[Event], tab: int = 0) -> None:
        """A page rings the bell, once, as it happens, whichever tab (`tab`: its index) it is
        on. Its loud marks are the header's banner and the card's PAGED, which stay while it
        lasts: a toast stacked over the cards hid the very breakers it was about."""
        now = time.monotonic()
        for event in batch:
            if event.type != ev.PAGE:
                continue
            # Replicas sharing a breaker each show its page (relayed, with its origin): one
            # page, one bell, whichever of them the console hears first.
            rung = (tab, event.key)
            if now - self._rung.get(rung, -PAGE_BELL_SPACING) >= PAGE_BELL_SPACING:
                self._rung[rung] = now
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
        origin = (self.active, self.fleet.origin(ident))
        now = self._frame.get(origin)
        if now is None:
            now = self._frame[origin] = self.fleet.now_for(ident)
        return now

    def now(self) -> float:
        """The header's clock, as read for this frame."""
        header = (self.active, _HEADER)
        now = self._frame.get(header)
        if now is None:
            now = self._frame[header] = self.source.now()
        return now

    def _repaint(self) -> None:
        self._repainted_at = time.monotonic()
        self._frame.clear()
        if isinstance(self.screen, ConfirmScreen | WriteScreen):
            self.screen.tick()  # the card beneath is about to show a fresher countdown
        touched, self.tab.pending = self.tab.pending, set()
        for tab in self.tabs:
            tab.pending.clear()  # the others' screens draw them afresh when they are shown
        for screen in self.screen_stack:
            if isinstance(screen, DashboardScreen | TableScreen) and touched:
                screen.board_changed()
            elif isinstance(screen, DetailScreen) and ("*" in touched or screen.card.id in touched):
                self.run_worker(screen.reload(), group="detail", exclusive=True)
            if isinstance(screen, DashboardScreen | PulseScreen):
                screen.tabs_changed()  # the tabs' counts, news on any of them

    def tick(self) -> None:
        """The one timer: countdowns on the screen that shows them, and whether the probes of
        half-open breakers went out (admitting one writes no line)."""
        self._frame.clear()
        for tab in self.tabs:
            self._read_probes(tab)
        current = self.screen
        if isinstance(current, ConfirmScreen | WriteScreen):
            current.tick()
        screen: DashboardScreen | DetailScreen | TableScreen | PulseScreen | None = (
            current
            if isinstance(current, DashboardScreen | DetailScreen | TableScreen | PulseScreen)
            else self._dashboard()  # a dialog is up: keep the dashboard beneath it honest
        )
        if screen is not None:
            screen.tick()

    def _read_probes(self, tab: Tab) -> None:
        board, probes = tab.board, tab.probes
        half_open = board.half_open()
        if not half_open or probes is None:
            return
        changed = board.probes_changed(probes.fresh_views(half_open))
        if changed:
            board.update(changed)
            tab.pending |= {view.key for view in changed}
            self.post_message(BoardChanged())

    # -- tabs: one per context ---------------------------------------------------------------

    def tab_titles(self) -> list[TabTitle]:
        """The tabs as their bar names them; none when there is only one (the header names
        a context then)."""
        if len(self.tabs) < 2:
            return []
        return [tab_title(n + 1, tab, n == self.active) for n, tab in enumerate(self.tabs)]

    def context_title(self) -> TabTitle | None:
        """The context shown, for the header; None when the console watches no context."""
        return tab_title(self.active + 1, self.tab, True) if self.tab.context else None

    def pulse_rows(self) -> list[PulseRow]:
        return [pulse_row(n + 1, tab) for n, tab in enumerate(self.tabs)]

    def action_context(self, index: int) -> None:
        self.show_tab(index)

    @on(ContextRequested)
    def _context_requested(self, message: ContextRequested) -> None:
        self.show_tab(message.index)

    def show_tab(self, index: int) -> None:
        """Show the tab `index` (from 0): its dashboard, as it was left. The pulse, which is
        about every tab and none, closes on the way."""
        if not 0 <= index < len(self.tabs):
            return
        while isinstance(self.screen, PulseScreen):
            self.pop_screen()
        if index == self.active:
            return
        self.active = index
        self._frame.clear()
        self.tab.pending.add("*")  # drawn afresh: its news went undrawn while it was hidden
        self.switch_mode(_mode(index))
        self.post_message(BoardChanged())

    def context_names(self) -> list[str]:
        """The contexts watched, in their tabs' order (none without `--context`)."""
        return [tab.name for tab in self.tabs if tab.name is not None]

    def apply_view(self, name: str) -> None:
        """A saved view (the palette's): its filter on the tab's dashboard, brought forward."""
        view = self.views.get(name)
        if view is None:
            return
        while not isinstance(self.screen, DashboardScreen) and len(self.screen_stack) > 1:
            self.pop_screen()
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.set_filter(view.filter)

    def action_pulse(self) -> None:
        if not isinstance(self.screen, PulseScreen):
            self.push_screen(PulseScreen())

    def action_read_only(self, what: str) -> None:
        """A write key pressed where the console is read-only: the screen did not offer it
        (`check_action`), and this says why instead of doing nothing."""
        if self.viewer:
            self.notify(f"Read-only: a viewer's console sends no {what}.", timeout=4)
            return
        name = self.tab.name or "this context"
        self.notify(
            f"Read-only: {name} is a read-only context (read_only = true in contexts.toml); "
            f"no {what} is sent from this console.",
            severity="warning",
            timeout=5,
        )

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
        (`console.palette`), then Textual's own. The saved views and the contexts are the
        other provider's (`COMMANDS`, `console.view_commands`): their names come from the
        user's files, and it shows them without reading them as markup."""
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
        # Elsewhere than where they apply these keys are not offered at all.
        if action == "replay":
            return self.player is not None
        if action == "context":
            return len(self.tabs) > 1 and parameters[0] in range(len(self.tabs))
        if action == "pulse":
            return self.contexts
        if action == "read_only":  # not on the pulse: no breaker there to write to
            return self.read_only and not isinstance(self.screen, PulseScreen)
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
    # so that nothing that posts the message (a binding, a click, a palette) writes. Nor do
    # they open a dialog over another: keys read in one burst (`rr`, `om`) are all queued for
    # the dashboard before the first one's dialog is on top.

    def _may_open_dialog(self) -> bool:
        return not self.read_only and not isinstance(self.screen, ModalScreen)

    @on(ResetRequested)
    def _reset_requested(self, message: ResetRequested) -> None:
        if self._may_open_dialog():
            self.request_reset(message.card, every=message.every)

    @on(SteerRequested)
    def _steer_requested(self, message: SteerRequested) -> None:
        if self._may_open_dialog():
            self.request_steer(message.what, message.card)

    @on(EnforceShownRequested)
    def _enforce_shown_requested(self, message: EnforceShownRequested) -> None:
        if self._may_open_dialog():
            self.request_enforce_shown(message.cards)

    @on(FixRequested)
    def _fix_requested(self, message: FixRequested) -> None:
        if self._may_open_dialog():
            self.request_fix(message.card)

    @on(ExportRequested)
    def _export_requested(self, message: ExportRequested) -> None:
        self.run_worker(self.export(message.card), group="export")

    @on(DemoFaultRequested)
    def _demo_fault_requested(self, message: DemoFaultRequested) -> None:
        if self.fault_offer():
            self.demo_fault(message.what, message.card)


def _mode(index: int) -> str:
    """The Textual mode (its own screen stack) of the tab `index`."""
    return f"tab-{index}"
