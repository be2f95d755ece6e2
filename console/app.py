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
from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.timer import Timer

from breakerdeck.console.board import Board
from breakerdeck.console.card import Card
from breakerdeck.console.messages import (
    DemoFaultRequested,
    DetailsRequested,
    FixRequested,
    ResetRequested,
    TableRequested,
)
from breakerdeck.console.replay import JUMP_SECONDS, ReplaySource
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.help import HelpScreen
from breakerdeck.console.screens.table import TableScreen
from breakerdeck.console.source import REVOKED, FaultControls, Notice, Restart, Source
from breakerdeck.console.web_role import web_session
from breakerdeck.console.words import clock_text, mmss
from breakerdeck.engine import events as ev
from breakerdeck.engine.bus import Missed
from breakerdeck.engine.events import Event
from breakerdeck.engine.text import printable

#: Audit rows read at start so cards show recent denials and trips at once.
SEED_EVENTS = 2000

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


class BreakerdeckApp(App[None]):
    CSS_PATH = "breakerdeck.tcss"
    TITLE = "breakerdeck"
    ENABLE_COMMAND_PALETTE = False
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
    ) -> None:
        super().__init__()
        self.source = source
        # A console `breakerdeck web` started: a viewer's writes nothing, whatever key or
        # message asks, and an operator's resets carry the web actor (console.web_role).
        session = web_session(os.environ)
        self.read_only = session is not None and session.read_only
        self.operator = operator if session is None else session.actor
        self.controls = controls
        self.platform_of = platform_of or (lambda key: None)
        self.board = Board(
            source.thresholds,
            source.describe,
            origin=source.origin,
            limits_of=source.limits_of,
            pooled=source.pooled,
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
        origin = self.source.origin(ident)
        now = self._frame.get(origin)
        if now is None:
            now = self._frame[origin] = self.source.now_for(ident)
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

    def _dashboard(self) -> DashboardScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, DashboardScreen)), None)

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
        if not half_open:
            return
        changed = self.board.probes_changed(self.source.fresh_views(half_open))
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

    # Screens post these; the workflows (dialogs, writes, toasts) live here.

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

    @on(DemoFaultRequested)
    def _demo_fault_requested(self, message: DemoFaultRequested) -> None:
        if self.fault_offer():
            self.demo_fault(message.what, message.card)

    def named(self, ident: str) -> str:
        """A breaker as the operator reads it: its key, and its source when there are several."""
        key, source = self.source.describe(ident)
        return f"{key} on {source}" if source else key

    def may_write(self, ident: str) -> bool:
        """Whether a write on this breaker can be sent: not from a web viewer's console, nor
        over a viewer's feed token."""
        return not self.read_only and self.source.can_write(ident)

    def fault_offer(self) -> bool:
        """The demo's fault keys: in demo mode, to anyone who may write."""
        return self.controls is not None and not self.read_only

    def can_reset(self, card: Card) -> bool:
        return card.state != "closed" and self.may_write(card.id)

    # `check_action` answers for `r` and `f`, on whichever screen shows the card: False keeps
    # the key out of the footer (it never applies here), None greys it out (not on this card).

    def reset_offer(self, card: Card | None) -> bool | None:
        if self.player is not None or self.read_only:
            return False  # a replay or a web viewer's console: never offered
        if card is not None and not self.may_write(card.id):
            return False  # a viewer token
        return True if card is not None and self.can_reset(card) else None

    def fix_offer(self, card: Card | None) -> bool | None:
        if self.read_only or not (self.source.can_mark_fixed or self.controls is not None):
            return False  # nothing here is ever fixable, or not by this console
        return True if card is not None and self.can_fix(card) else None

    def reset_targets(self, card: Card) -> list[Card]:
        """`R`: the key's cards on every source reporting it that are not closed; of replicas
        that share the breaker through their store, one (its reset reaches the others, and is
        audited once)."""
        ids = set(self.source.siblings(card.id))
        if len(ids) < 2:
            return []
        targets = []
        pooled = False
        for c in self.board.cards_of(ids):
            if c.agent != card.agent or c.state == "closed" or not self.may_write(c.id):
                continue
            if self.source.pooled(c.id):
                if pooled:
                    continue
                pooled = True
            targets.append(c)
        return targets

    def card_platform(self, card: Card) -> str | None:
        return card.platform or self.platform_of(card.key)

    def fixed(self, card: Card) -> bool:
        """The credential behind this auth trip was fixed since the trip: reset is what is
        left. In demo mode the platform's credential is valid again; elsewhere, the operator
        said so with `f` during this episode."""
        if not card.auth_trip:
            return False
        if card.trips and (card.id, card.trips[0].seq) in self._fixed:
            return True
        platform = self.card_platform(card)
        if self.controls is None or platform is None:
            return False
        return "REVOKED" not in self.controls.status().get(platform, "REVOKED")

    def can_fix(self, card: Card) -> bool:
        """`f` applies: a paused credential (tool policy); in demo mode, a card tripped on its
        credential or whose platform's credential is revoked (a healthy one has nothing to
        fix, and asking "fixed?" about it confused)."""
        if card.view.paused and self.source.can_mark_fixed and self.may_write(card.id):
            return True
        platform = self.card_platform(card)
        if self.controls is None or platform is None:
            return False
        return card.auth_trip or REVOKED in self.controls.status().get(platform, "")

    def request_reset(self, card: Card, *, every: bool = False) -> None:
        stale = self.source.stale_for(card.id)
        if stale is not None:
            # Refused before the dialog, not after `y`: nothing can reach that engine now.
            self.notify(
                f"Cannot reset {self.named(card.id)}: its source is stale since "
                f"{clock_text(stale)} (reconnecting). Try again once it is back.",
                severity="error",
                timeout=6,
            )
            return
        if every:
            self._request_reset_every(card)
            return
        view = card.view
        cause = view.trip_cause or "unknown cause"
        lines = [
            _agent_line(card),
            self._state_line(card),
            f"Counter: {self.board.thresholds.counter(view.count)}",
            f"The audit log records it as circuit_breaker_reset by {self.operator}.",
        ]
        where = self.source.source_name(card.id)
        store = self.source.shared_store(card.id)
        if where and store == "ok":
            lines.insert(0, f"Source: {where} (a shared breaker)")
        elif where:
            others = len(self.source.siblings(card.id)) - 1
            also = f" ({others} other source(s) report it: R resets them all)" if others else ""
            lines.insert(0, f"Source: {where} only{also}")
        if store == "ok":
            lines.append("Shared: every replica on the store is reset; audited here once.")
        elif store == "lost":
            lines.append("Its shared store is lost: the reset is this replica's alone.")
        warning = None
        if cause == "auth_failure" and self.fixed(card):
            lines.append("The credential was marked fixed: resetting now lets calls through.")
        elif cause == "auth_failure":
            fix_key = " (f)" if self.can_fix(card) else ""
            warning = (
                "this was an auth trip. Resetting without fixing the credential trips "
                f"it again after {self.board.thresholds.auth} calls. Fix it first{fix_key}."
            )
        elif view.paused:
            warning = "the credential is revoked: calls stay paused until it is marked fixed (f)."
        reason = f"reset from the console ({card.word} on {cause})"

        title = f"Reset {card.key}" + (f" on {where}?" if where else "?")
        live = self._live_state(card, 2 if where else 1)  # after "Source:" and "Agent:"
        screen = ConfirmScreen(title, lines, warning=warning, yes="Reset", live=live)
        self.push_screen(screen, self._then_reset(card, [card], reason))

    def _state_line(self, card: Card) -> str:
        state = card.word
        left = card.seconds_left(self.now_for(card.id))
        if left is not None:
            state += f" {mmss(left)} to the probe"
        return f"State: {state}, tripped on {card.view.trip_cause or 'unknown cause'}"

    def _live_state(self, card: Card, at: int) -> Callable[[list[str]], list[str]]:
        """The dialog's lines as the clock moves: its state line counts down with the card."""

        def lines(shown: list[str]) -> list[str]:
            fresh = self.board.card(card.ident) or card
            return [*shown[:at], self._state_line(fresh), *shown[at + 1 :]]

        return lines

    def _request_reset_every(self, card: Card) -> None:
        targets = self.reset_targets(card)
        if not targets:
            self.notify(f"No other source has {card.key} open.", timeout=3)
            return
        reporting = len(self.source.siblings(card.id))
        lines = [_agent_line(card)]
        lines.append(f"On {len(targets)} of the {reporting} sources reporting it:")
        for target in targets:
            cause = target.view.trip_cause or "unknown cause"
            shared = " (and the replicas sharing it)" if self.source.pooled(target.id) else ""
            lines.append(
                f"  {self.source.source_name(target.id)}{shared}: {target.word} on {cause}"
            )
        siblings = self.board.cards_of(self.source.siblings(card.id))
        if any(c.agent == card.agent and c.state == "closed" for c in siblings):
            lines.append("Sources where it is closed are left alone.")
        lines.append(f"Each audit log records it as circuit_breaker_reset by {self.operator}.")
        reason = f"reset from the console on every source reporting {card.key}"

        title = f"Reset {card.key} on {len(targets)} source{'s' if len(targets) > 1 else ''}?"
        self.push_screen(
            ConfirmScreen(title, lines, yes="Reset all"), self._then_reset(card, targets, reason)
        )

    def _then_reset(
        self, card: Card, targets: list[Card], reason: str
    ) -> Callable[[bool | None], Awaitable[None]]:
        """What a reset dialog's answer does."""

        async def answered(confirmed: bool | None) -> None:
            if not confirmed:
                self.notify(f"Reset cancelled: {card.key} is unchanged.", timeout=2)
                return
            await self._reset(targets, reason)

        return answered

    async def _reset(self, cards: list[Card], reason: str) -> None:
        """Send the resets; say what happened (a remote source may refuse or be gone)."""
        results = await asyncio.gather(
            *(self.source.reset(c.id, self.operator, reason) for c in cards),
            return_exceptions=True,
        )
        failed = [(c, r) for c, r in zip(cards, results, strict=True) if isinstance(r, Exception)]
        done = len(cards) - len(failed)
        if len(cards) == 1 and not failed:
            self.notify(f"{self.named(cards[0].id)} reset by {self.operator}.", timeout=4)
        elif not failed:
            self.notify(f"{cards[0].key} reset on {done} sources by {self.operator}.", timeout=4)
        for c, error in failed:
            self.notify(f"Reset of {self.named(c.id)} failed: {error}", severity="error", timeout=8)

    def request_fix(self, card: Card) -> None:
        platform = self.card_platform(card)
        marks = card.view.paused and self.source.can_mark_fixed
        demo = self.controls is not None and platform is not None
        if not (marks or demo):
            self.notify("Nothing to fix here: the credential is not paused.", timeout=3)
            return
        lines = [_agent_line(card)]
        if marks:
            lines.append(
                f"Marks the credential fixed: calls on {card.key} go out again "
                f"(writes credential.restored as {self.operator})."
            )
        if demo:
            lines.append(f"Demo: makes {platform}'s credential valid again.")
        if card.auth_trip:
            lines.append("The breaker stays open: reset it next (r), or let the probe close it.")

        async def answered(confirmed: bool | None) -> None:
            if not confirmed:
                self.notify("Nothing changed.", timeout=3)
                return
            if demo and platform is not None and self.controls is not None:
                self.controls.fix(platform)
            if marks:
                try:
                    await self.source.mark_credential_fixed(card.id, self.operator)
                except Exception as error:  # a remote source may refuse or be gone
                    self.notify(f"Not marked fixed: {error}", severity="error", timeout=8)
                    return
            if card.trips:
                self._fixed.add((card.id, card.trips[0].seq))
            follow = "  Now reset it: r." if card.auth_trip else ""
            self.notify(f"Credential for {platform or card.key} fixed.{follow}", timeout=5)
            self._refresh_status()

        self.push_screen(
            ConfirmScreen(f"Credential for {platform or card.key} fixed?", lines, yes="Fixed"),
            answered,
        )

    def demo_fault(self, what: str, card: Card | None) -> None:
        controls = self.controls
        if controls is None:
            return
        platform = self.card_platform(card) if card is not None else None
        platform = platform or (controls.platforms[0] if controls.platforms else None)
        if platform is None:
            return
        act, said = {
            "take_down": (
                controls.take_down,
                f"{platform} is down (connection refused). Watch its agents trip.",
            ),
            "bring_back": (
                controls.bring_back,
                f"{platform} is healthy again. The next probe closes its breakers.",
            ),
            "revoke": (
                controls.revoke,
                f"{platform}'s credential is revoked: expect reauth_failed and an auth trip. "
                "Fix it with f, then reset with r.",
            ),
        }[what]
        act(platform)
        self.notify(said, timeout=5)
        self._refresh_status()

    def _refresh_status(self) -> None:
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.board_changed()


def _agent_line(card: Card) -> str:
    return f"Agent: {card.agent}" + (f"   key: {card.key}" if card.key != card.agent else "")
