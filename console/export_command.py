"""`breakerdeck export`: a breaker's incident (`console.incident`) on standard output, Markdown or
JSON, the same document `e` writes from a console.

From a feed (`export URL KEY`) the cards are what the engine's snapshot says, as `watch` reads
them at attach: the audit rows of the episode are the engine's, which a feed does not carry, so
the document is marked partial and says where the whole log is. From a state dir (`export
--state-dir DIR KEY`) the audit log is read as `replay --state-dir` reads it, without writing
to it (beside a running engine too), and played to its last row: the rows of the episode are
there, the counter approximate (an audit log keeps no successes).
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import time

from breakerdeck.console.board import SEED_EVENTS, Board
from breakerdeck.console.incident import EXPORT_ROWS, as_json, incident, markdown
from breakerdeck.console.output import say
from breakerdeck.console.source import Source, fleet_of
from breakerdeck.engine.feed.client import FeedError

#: The recording could not be read (said why).
EXIT_START = 2
#: No breaker with that key (as `reset` says it).
EXIT_UNKNOWN = 5
#: What a document exported from a feed says of its audit rows.
FEED_NOTE = (
    "A feed carries no audit rows: `breakerdeck export --state-dir DIR KEY` on the engine's "
    "machine reads its whole log."
)


def run_export(args: argparse.Namespace) -> int:
    from breakerdeck.console import remote

    try:
        source = _source(args)
    except FeedError as error:
        say(str(error))
        return remote._exit_for(error)
    except OSError as error:
        say(str(error))
        return EXIT_START
    try:
        return _export(source, args)
    finally:
        source.close()


def _source(args: argparse.Namespace) -> Source:
    if args.state_dir:
        from breakerdeck.console.replay import ReplaySource, load
        from breakerdeck.engine.recorded.replay import ReplayError

        recording = argparse.Namespace(state_dir=args.state_dir, trace=None, policy=None)
        try:
            playback, label = load(recording)
        except ReplayError as error:
            raise OSError(str(error)) from error
        played = ReplaySource(playback, label=label.replace("replay ", "state dir ", 1))
        played.seek(played.end)
        return played
    from breakerdeck.console import remote
    from breakerdeck.console.remote_source import RemoteSource

    token = remote.client_token(args, operator=False)
    feed = RemoteSource([args.url], tokens=[token])
    failed = asyncio.run(feed.prime(timeout=float(args.timeout)))
    if failed:
        raise failed[0][1]
    return feed


def _export(source: Source, args: argparse.Namespace) -> int:
    from breakerdeck.console.output import deliver

    fleet = fleet_of(source)
    board = Board(source.thresholds, fleet.describe, origin=fleet.origin, limits_of=fleet.limits_of)
    board.apply(source.recent(SEED_EVENTS))
    board.load(source.snapshot(), at=source.now())
    cards = [card for card in board.cards() if card.key == args.key]
    if not cards:
        keys = sorted({card.key for card in board.cards()})
        near = difflib.get_close_matches(args.key, keys, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        known = ", ".join(keys[:10]) + (f", … {len(keys) - 10} more" if len(keys) > 10 else "")
        say(f"{source.label} has no breaker with key {args.key!r}{hint} (known: {known or 'none'})")
        return EXIT_UNKNOWN
    card = cards[0]
    rows = asyncio.run(source.audit(card.id, EXPORT_ROWS))
    document = incident(
        card,
        rows,
        limits=card.limits or board.thresholds,
        now=source.now(),
        exported_at=time.time(),
        source=source.label,
        url=source.feed_url(card.id) or getattr(args, "url", None),
        note=None if args.state_dir else FEED_NOTE,
        approximate=source.approximate_counts,
    )
    text = as_json(document) if args.json else markdown(document)
    return deliver(text.splitlines(keepends=True), 0)
