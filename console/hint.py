"""The plain hint at a card's cause, as the design words it."""

from __future__ import annotations

from collections.abc import Iterable

from breakerdeck.console.card import Card, Failure
from breakerdeck.console.words import cause_word
from breakerdeck.engine.state import State

#: What a counted upstream failure's fault says, in the hint's words.
_FAULT_WORDS = {
    "refused": "refused",
    "reset": "connection reset",
    "timeout": "timeouts",
    "slow": "timeouts",
    "expired": "timeouts",
    "tls": "TLS",
    "dns": "DNS",
    "vault_down": "vault down",
    #: An MCP stdio server whose process ended before its handshake: it did not refuse.
    "exited": "server exits",
}


def fault_words(failures: Iterable[Failure]) -> str:
    """`refused`, `timeouts`, `502s`: what the counted failures were, at most two kinds (the
    hint said "502s/timeouts" for a refused connection)."""
    words: list[str] = []
    for failure in failures:
        fault = failure.fault
        word = _FAULT_WORDS.get(fault)
        if word is None and fault.startswith("http_"):
            word = f"{fault.removeprefix('http_')}s"
        word = word or "upstream failures"
        if word not in words:
            words.append(word)
    return " and ".join(words[:2]) if words else "502s/timeouts"


def hint(
    card: Card,
    *,
    keys: bool = False,
    fixable: bool = False,
    resettable: bool = False,
    releasable: bool = False,
    fixed: bool = False,
    short: bool = False,
) -> str:
    """The plain hint at the cause, as the design words it; `keys` adds the keys that act,
    those this console offers on the card (`fixable`, `resettable`, `releasable`: a viewer's
    web console and a replay offer none); `fixed`: the credential behind an auth trip was fixed
    since, so reset is what is left; `short`: a closed card's last failure in fewer words, for
    a card line that has no room for the long form."""
    view = card.view
    f_key = " (f)" if keys and fixable else ""
    if view.state == State.HELD:  # an operator's hold: who; the card's line above says why
        o_key = " (O)" if keys and releasable else ""
        who = view.held_by or "?"
        return f"held by {who}: every call is refused until release{o_key} or expiry"
    if view.paused:
        where = _on(card.platform)
        return f"credential revoked{where}: reconnect it, then mark it fixed{f_key}"
    if view.state == State.CLOSED:
        if view.count:
            last = next((f for f in card.failures if f.counted), None)
            if last is None:
                return "not tripped, failures counted"
            last_failure = "last:" if short else "last failure"
            return f"{last_failure} {cause_word(last.outcome)} on {last.platform}"
        return "healthy"
    said = _trip_hint(card, f_key, " (r)" if keys and resettable else "", fixed=fixed)
    # A shadow breaker refuses nothing: its would-be refusals are listed, marked.
    return f"shadow, nothing refused · {said}" if card.shadow else said


def _trip_hint(card: Card, f_key: str, r_key: str, *, fixed: bool) -> str:
    """The hint at what tripped an open or half-open breaker (`f_key`, `r_key`: the keys
    offered, as the hint names them)."""
    view = card.view
    cause = view.trip_cause or ""
    counted = [f for f in card.failures if f.counted]
    platforms = sorted({f.platform for f in counted[: max(view.count, 1)]}) or (
        [card.platform] if card.platform else []
    )
    where = ", ".join(platforms)
    if cause == "auth_failure" and fixed:
        return f"credential fixed{_on(where)}: reset it now{r_key}"
    if cause == "auth_failure":
        return f"reauth_failed{_on(where)}: reconnect that credential{f_key}, then reset{r_key}"
    if cause == "upstream_failure":
        down = where or "the platform"
        what = fault_words(counted[: max(view.count, 1)])
        return f"{down} or the path to it is down ({what}); wait for the probe"
    if cause == "malformed_output":
        backend = where or "the backend"
        return f"{backend} answers, but its output fails the tool's schema (bad deploy?)"
    if cause == "rate_limited":
        return f"{where or 'the backend'} is rate limiting hard (long Retry-After); wait it out"
    return f"tripped on {cause}"


def _on(where: str | None) -> str:
    return f" on {where}" if where else ""
