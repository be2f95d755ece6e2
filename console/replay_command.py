"""`breakerdeck replay`: the console on a recorded incident (its own module: the app imports the
replay's source, and this command imports the app)."""

from __future__ import annotations

import argparse
import getpass

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.contexts import views_for
from breakerdeck.console.output import say
from breakerdeck.console.replay import DEFAULT_SPEED, EXIT_START, ReplaySource, load
from breakerdeck.engine.recorded.replay import ReplayError


class ReplayApp(BreakerdeckApp):
    """The console on a replay: the recording is read on in the background only once the first
    screen is drawn (from the trace's first chunk), so the scan does not slow the app's start."""

    source: ReplaySource

    def on_ready(self) -> None:
        self.source.playback.start()


def run_replay(args: argparse.Namespace) -> int:
    views, start = views_for(args.view)
    try:
        playback, label = load(args)
    except ReplayError as error:
        say(str(error))
        return EXIT_START
    source = ReplaySource(playback, label=label, speed=args.speed or DEFAULT_SPEED)
    if args.at:
        playback.start()  # the first screen is `--at` in: read up to it first
        playback.store.reach(source.start + args.at)
        source.seek(source.start + args.at)
    app = ReplayApp(
        source,
        operator=getpass.getuser(),
        views=views,
        filter_text=start,
        export_dir=args.export_dir,
    )
    app.run()
    return app.return_code or 0
