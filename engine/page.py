"""The operator's page hook: a command that gets each `circuit_breaker.page` as JSON on stdin.

It runs in a thread of its own so a slow or broken pager never holds up the call path; its
failures are logged, never raised.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

PAGE_TIMEOUT_SECONDS = 30.0


def command_hook(command: str) -> Callable[[dict[str, Any]], None]:
    argv = shlex.split(command)
    if not argv:
        raise ValueError("the page hook command is empty")

    def run(page: dict[str, Any]) -> None:
        payload = json.dumps(page).encode()
        try:
            done = subprocess.run(
                argv,
                input=payload,
                capture_output=True,
                timeout=PAGE_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            log.error("page hook %r failed: %s", command, error)
            return
        if done.returncode != 0:
            log.error(
                "page hook %r exited %s: %s",
                command,
                done.returncode,
                done.stderr.decode(errors="replace").strip(),
            )

    def hook(page: dict[str, Any]) -> None:
        threading.Thread(target=run, args=(page,), name="page-hook", daemon=True).start()

    return hook
