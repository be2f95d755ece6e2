"""The operator's writes from the console: which of them a card offers, the reset and fix
dialogs, what their answers send, and the demo's fault keys. `BreakerdeckApp` is built on
`OperatorActions`; the app's message handlers call into it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from textual.app import App

from breakerdeck.console.board import Board
from breakerdeck.console.card import RANK_CLOSED, Card
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.write import Answer, WriteForm, WriteScreen
from breakerdeck.console.source import (
    REVOKED,
    FaultControls,
    Fleet,
    FreshViews,
    SharedStores,
    Source,
    Writes,
)
from breakerdeck.console.states import ENFORCE, SHADOW, mode_of, word_for
from breakerdeck.console.steers import STEERS
from breakerdeck.console.tab import Tab
from breakerdeck.console.timeline import span_text
from breakerdeck.console.words import clock_text, mmss
from breakerdeck.engine.core import holds
from breakerdeck.engine.state import State

#: `M`'s dialog names this many breakers, then says how many more (it fits 80x24).
ENFORCE_LISTED = 8
#: A toast for refused writes names this many breakers with their errors, then counts the rest.
FAILURES_NAMED = 3


class OperatorActions(App[None]):
    """What the operator may do to a card, and the dialogs that do it; the state it reads is
    declared here and set up by `BreakerdeckApp`. Everything a card's breaker is read from and
    written to is the tab shown's (`console.tab`): one per context, else the only one."""

    tabs: list[Tab]
    #: The tab shown (an index into `tabs`).
    active: int
    operator: str
    controls: FaultControls | None
    #: A web viewer's console (`console.web_role`): read-only in every tab.
    viewer: bool
    platform_of: Callable[[str], str | None]

    if TYPE_CHECKING:

        def now_for(self, ident: str) -> float: ...

    @property
    def tab(self) -> Tab:
        return self.tabs[self.active]

    @property
    def source(self) -> Source:
        return self.tab.source

    @property
    def board(self) -> Board:
        return self.tab.board

    # What the source can do besides showing breakers, asked once (`console.source`): its
    # engines (a fleet of one for most), its writes and its shared stores (None: it has none).

    @property
    def fleet(self) -> Fleet:
        return self.tab.fleet

    @property
    def writes(self) -> Writes | None:
        return self.tab.writes

    @property
    def stores(self) -> SharedStores | None:
        return self.tab.stores

    @property
    def probes(self) -> FreshViews | None:
        return self.tab.probes

    @property
    def read_only(self) -> bool:
        """No write from here: a web viewer's console, or a read-only context's tab."""
        return self.viewer or self.tab.read_only

    @property
    def _fixed(self) -> set[tuple[str, int]]:
        return self.tab.fixed

    def named(self, ident: str) -> str:
        """A breaker as the operator reads it: its key, and its source when there are several."""
        key, source = self.fleet.describe(ident)
        return f"{key} on {source}" if source else key

    def may_write(self, ident: str) -> bool:
        """Whether a write on this breaker can be sent: not from a web viewer's console, nor
        over a viewer's feed token."""
        return not self.read_only and self.writes is not None and self.writes.can_write(ident)

    @property
    def marks_fixed(self) -> bool:
        """Whether the source can mark a credential fixed (the `tool` policy pauses them)."""
        return self.writes is not None and self.writes.can_mark_fixed

    def store_lost(self) -> list[tuple[str | None, str]]:
        return [] if self.stores is None else self.stores.shared_store_lost()

    def fault_offer(self) -> bool:
        """The demo's fault keys: in demo mode, to anyone who may write."""
        return self.controls is not None and not self.read_only

    # `check_action` answers for the writes, on whichever screen shows the card: False keeps
    # the key out of the footer (it never applies here), None greys it out (not on this card).

    def write_offer(self, card: Card | None, applies: Callable[[Card], bool]) -> bool | None:
        """Every operator write's one gate (`r`, `o`, `O`, `m`): never in a replay, a web
        viewer's console, a read-only context or over a viewer token; on a card only where
        `applies`."""
        if self.writes is None or self.read_only:
            return False  # a replay, a web viewer's console or a read-only context
        if card is not None and not self.may_write(card.id):
            return False  # a viewer token
        return True if card is not None and applies(card) else None

    def reset_offer(self, card: Card | None) -> bool | None:
        return self.write_offer(card, lambda c: c.state != State.CLOSED)

    def steer_offer(self, what: str, card: Card | None) -> bool | None:
        """`o` hold (not on a held breaker), `O` release (only a held one), `m` the mode."""
        return self.write_offer(card, STEERS[what])

    def enforce_targets(self, cards: list[Card]) -> list[Card]:
        """`M`: the shadow breakers among `cards` that `m` may switch (its gate). Replicas
        sharing a breaker through their store are one card, so one write reaches them all."""
        return [card for card in cards if card.shadow and self.steer_offer("mode", card)]

    def enforce_offer(self, cards: list[Card]) -> bool | None:
        """`M` where a write can be sent at all (as `m`); greyed out with no shadow one shown."""
        if self.write_offer(None, STEERS["mode"]) is False:
            return False
        return True if self.enforce_targets(cards) else None

    def fix_offer(self, card: Card | None) -> bool | None:
        if self.read_only or not (self.marks_fixed or self.controls is not None):
            return False  # nothing here is ever fixable, or not by this console
        return True if card is not None and self.can_fix(card) else None

    def reset_targets(self, card: Card) -> list[Card]:
        """`R`: the key's cards on every source reporting it that are not closed; of replicas
        that share the breaker through their store, one (its reset reaches the others, and is
        audited once)."""
        ids = set(self.fleet.siblings(card.id))
        if len(ids) < 2:
            return []
        targets = []
        pooled = False
        for c in self.board.cards_of(ids):
            if c.agent != card.agent or c.state == State.CLOSED or not self.may_write(c.id):
                continue
            if self.fleet.pooled(c.id):
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
        if card.view.paused and self.marks_fixed and self.may_write(card.id):
            return True
        platform = self.card_platform(card)
        if self.controls is None or platform is None:
            return False
        return card.auth_trip or REVOKED in self.controls.status().get(platform, "")

    def _unreachable(self, card: Card, what: str) -> bool:
        """Said and refused before the dialog, not after `y`: nothing can reach that engine
        now."""
        stale = self.fleet.stale_for(card.id)
        if stale is not None:
            self.notify(
                f"Cannot {what} {self.named(card.id)}: its source is stale since "
                f"{clock_text(stale)} (reconnecting). Try again once it is back.",
                severity="error",
                timeout=6,
            )
        return stale is not None

    def request_reset(self, card: Card, *, every: bool = False) -> None:
        if self._unreachable(card, "reset"):
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
        where = self.fleet.source_name(card.id)
        store = None if self.stores is None else self.stores.shared_store(card.id)
        if where and store == "ok":
            lines.insert(0, f"Source: {where} (a shared breaker)")
        elif where:
            others = len(self.fleet.siblings(card.id)) - 1
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
        if card.state == State.HELD:
            warning = (
                f"it is {card.held_words(self.now_for(card.id))}. A reset ends the hold "
                "(released, then reset): calls go through at once."
            )
        reason = f"reset from the console ({card.word} on {cause})"

        title = f"Reset {card.key}" + (f" on {where}?" if where else "?")
        live = self._live_state(card, 2 if where else 1)  # after "Source:" and "Agent:"
        screen = ConfirmScreen(title, lines, warning=warning, yes="Reset", live=live)
        self.push_screen(screen, self._then_reset(card, [card], reason))

    def _state_line(self, card: Card) -> str:
        if card.state == State.HELD:
            return f"State: {card.word}, {card.held_words(self.now_for(card.id))}"
        if card.state == State.CLOSED:
            return f"State: {card.word}"
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
        reporting = len(self.fleet.siblings(card.id))
        lines = [_agent_line(card)]
        lines.append(f"On {len(targets)} of the {reporting} sources reporting it:")
        for target in targets:
            cause = target.view.trip_cause or "unknown cause"
            shared = " (and the replicas sharing it)" if self.fleet.pooled(target.id) else ""
            lines.append(f"  {self.fleet.source_name(target.id)}{shared}: {target.word} on {cause}")
        siblings = self.board.cards_of(self.fleet.siblings(card.id))
        if any(c.agent == card.agent and c.state == State.CLOSED for c in siblings):
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
        """What a reset dialog's answer does: to the tab the dialog was about, whichever is
        shown when it is answered."""
        writes = self.writes

        async def answered(confirmed: bool | None) -> None:
            if not confirmed:
                self.notify(f"Reset cancelled: {card.key} is unchanged.", timeout=2)
                return
            await self._reset(writes, targets, reason)

        return answered

    async def _reset(self, writes: Writes | None, cards: list[Card], reason: str) -> None:
        """Send the resets; say what happened (a remote source may refuse or be gone)."""
        if writes is None:  # never offered (`reset_offer`)
            return
        results = await asyncio.gather(
            *(writes.reset(c.id, self.operator, reason) for c in cards),
            return_exceptions=True,
        )
        failed = [(c, r) for c, r in zip(cards, results, strict=True) if isinstance(r, Exception)]
        done = len(cards) - len(failed)
        if len(cards) == 1 and not failed:
            self.notify(f"{self.named(cards[0].id)} reset by {self.operator}.", timeout=4)
        elif not failed:
            self.notify(f"{cards[0].key} reset on {done} sources by {self.operator}.", timeout=4)
        self._say_failed("not reset", failed)

    def _say_failed(self, what: str, failed: Sequence[tuple[Card, BaseException]]) -> None:
        """An error toast for each of the first `FAILURES_NAMED` writes a source refused, with
        its error, and one counting the rest: a fleet-wide refusal must not bury the screen
        under a toast per breaker."""
        for card, error in failed[:FAILURES_NAMED]:
            self.notify(f"{self.named(card.id)} {what}: {error}", severity="error", timeout=8)
        if len(failed) > FAILURES_NAMED:
            more = len(failed) - FAILURES_NAMED
            self.notify(f"… and {more} more {what}.", severity="error", timeout=8)

    # -- hold, release, mode: the dialogs that take words (`screens/write.py`) ---------------

    def request_steer(self, what: str, card: Card) -> None:
        """`o`, `O` or `m` on a card: its dialog, whose `y` sends the write to the tab the
        dialog was about, whichever is shown when it is answered."""
        verb = {"hold": "hold", "release": "release", "mode": "switch the mode of"}[what]
        writes = self.writes
        if writes is None or self._unreachable(card, verb):
            return
        form = {"hold": self._hold_form, "release": self._release_form, "mode": self._mode_form}
        self.push_screen(WriteScreen(form[what](card, writes)), self._then_steer(card))

    def _then_steer(self, card: Card) -> Callable[[bool | None], None]:
        def answered(sent: bool | None) -> None:
            if not sent:
                self.notify(f"Cancelled: {card.key} is unchanged.", timeout=2)

        return answered

    def _where(self, card: Card) -> str:
        where = self.fleet.source_name(card.id)
        return f" on {where}" if where else ""

    def _hold_form(self, card: Card, writes: Writes) -> WriteForm:
        most = writes.max_hold_seconds(card.id)
        bound = f", at most {span_text(most)} (max_hold_seconds)" if most is not None else ""
        lines = [
            _agent_line(card),
            self._state_line(card),
            "Every call is refused without reaching the platform (no probe, nothing counted) "
            "until released (O) or the hold ends; then it half-opens.",
            f"Duration: 90s, 30m or 2h{bound}.",
            f"The audit log records circuit_breaker.held by {self.operator}.",
        ]

        async def send(answer: Answer) -> None:
            reason, duration = answer.reason.strip(), answer.duration.strip()
            if not reason:
                raise ValueError("a hold needs a reason (the audit log and every refusal say it)")
            if not duration:
                raise ValueError("a hold needs a duration: 90s, 30m or 2h")
            holds.duration_seconds(duration, math.inf if most is None else most)
            await writes.hold(card.id, self.operator, reason, duration)
            self.notify(f"{self.named(card.id)} held for {duration} by {self.operator}.", timeout=4)

        return WriteForm(
            f"Hold {card.key}{self._where(card)} open?",
            lines,
            "Hold",
            send,
            reason_hint="reason (required): why calls are refused",
            duration_hint="duration (required): 90s, 30m, 2h",
            warning="it is in shadow, but a hold refuses calls in either mode."
            if card.shadow
            else None,
            live=self._live_state(card, 1),
        )

    def _release_form(self, card: Card, writes: Writes) -> WriteForm:
        lines = [
            _agent_line(card),
            self._state_line(card),
            f"The audit log records circuit_breaker.released by {self.operator}.",
        ]

        async def send(answer: Answer) -> None:
            await writes.release(card.id, self.operator, answer.reason.strip(), close=answer.close)
            into = "closed" if answer.close else "half-open"
            self.notify(f"{self.named(card.id)} released ({into}) by {self.operator}.", timeout=4)

        return WriteForm(
            f"Release {card.key}{self._where(card)}?",
            lines,
            "Release",
            send,
            close_choice=(
                f"Then: {word_for('half_open')}, the next call is the probe (c: closed instead)",
                f"Then: {word_for('closed')}, calls go through: you vouch for the platform "
                "(c: half-open)",
            ),
            live=self._live_state(card, 1),
        )

    def _mode_form(self, card: Card, writes: Writes) -> WriteForm:
        now = mode_of(card.view)
        to = ENFORCE if now == SHADOW else SHADOW
        if to == SHADOW:
            does = (
                "In shadow it counts, trips and probes as it would, but refuses nothing: a call "
                "it would refuse goes through, written as call.would_deny."
            )
        elif card.rank != RANK_CLOSED:
            does = (
                f"Enforcing, it refuses calls while open: it is {card.word} now, so from the "
                "next call on."
            )
        else:
            does = "Enforcing, it refuses calls while open."
        lines = [
            _agent_line(card),
            f"Mode: {now} → {to}   (state {card.word})",
            does,
            f"The audit log records circuit_breaker.mode by {self.operator}.",
        ]

        async def send(answer: Answer) -> None:
            reason = answer.reason.strip() or f"switched to {to} from the console"
            await writes.set_mode(card.id, to, self.operator, reason)
            self.notify(f"{self.named(card.id)} switched to {to} by {self.operator}.", timeout=4)

        return WriteForm(f"Switch {card.key}{self._where(card)} to {to}?", lines, "Switch", send)

    def request_enforce_shown(self, cards: list[Card]) -> None:
        """`M`: one dialog for every shadow breaker shown, then one mode write each, as `m`
        sends it; a source gone stale is left out and said."""
        writes = self.writes
        targets = self.enforce_targets(cards)
        stale = [c for c in targets if self.fleet.stale_for(c.id) is not None]
        targets = [c for c in targets if c not in stale]
        if writes is None or not targets:
            said = "No shadow breaker shown" + (" that can be reached" if stale else "")
            self.notify(f"{said}: nothing to switch.", timeout=3)
            return
        lines = [
            f"One write each, as m sends it; the audit log records circuit_breaker.mode by "
            f"{self.operator} for each:"
        ]
        lines += [f"  {self.named(c.id)}: {c.word}" for c in targets[:ENFORCE_LISTED]]
        if len(targets) > ENFORCE_LISTED:
            lines.append(f"  … and {len(targets) - ENFORCE_LISTED} more")
        if stale:
            lines.append(f"Left out: {len(stale)} on a stale source (reconnecting).")
        if any(c.rank != RANK_CLOSED for c in targets):
            lines.append("An open one refuses calls from the next call on.")

        async def send(answer: Answer) -> None:
            reason = answer.reason.strip() or "switched to enforce from the console (M)"
            results = await asyncio.gather(
                *(writes.set_mode(c.id, ENFORCE, self.operator, reason) for c in targets),
                return_exceptions=True,
            )
            failed = [
                (c, r) for c, r in zip(targets, results, strict=True) if isinstance(r, Exception)
            ]
            done = len(targets) - len(failed)
            if done:
                self.notify(f"{done} switched to enforce by {self.operator}.", timeout=4)
            self._say_failed("not switched", failed)

        many = f"{len(targets)} shadow breaker{'s' if len(targets) > 1 else ''}"
        form = WriteForm(f"Switch {many} shown to enforce?", lines, "Switch all", send)
        self.push_screen(WriteScreen(form), self._then_enforce(len(targets)))

    def _then_enforce(self, count: int) -> Callable[[bool | None], None]:
        def answered(sent: bool | None) -> None:
            if not sent:
                self.notify(f"Cancelled: the {count} stay in shadow.", timeout=2)

        return answered

    def request_fix(self, card: Card) -> None:
        platform = self.card_platform(card)
        marks = card.view.paused and self.marks_fixed
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
        tab = self.tab  # the answer writes to the tab the dialog was about

        async def answered(confirmed: bool | None) -> None:
            if not confirmed:
                self.notify("Nothing changed.", timeout=3)
                return
            if demo and platform is not None and self.controls is not None:
                self.controls.fix(platform)
            if marks and tab.writes is not None:
                try:
                    await tab.writes.mark_credential_fixed(card.id, self.operator)
                except Exception as error:  # a remote source may refuse or be gone
                    self.notify(f"Not marked fixed: {error}", severity="error", timeout=8)
                    return
            if card.trips:
                tab.fixed.add((card.id, card.trips[0].seq))
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

    def _dashboard(self) -> DashboardScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, DashboardScreen)), None)


def _agent_line(card: Card) -> str:
    return f"Agent: {card.agent}" + (f"   key: {card.key}" if card.key != card.agent else "")
