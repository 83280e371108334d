"""How a command stops on SIGINT or SIGTERM: it unwinds (open transactions roll back), and a process still alive
a few seconds later ends at once."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

STOP_GRACE_S = 3.0  # after SIGINT or SIGTERM, the most a command unwinds before the process exits regardless
_stop_code: int | None = None  # the exit status a stop signal asked for


def exit_now(code: int) -> None:
    """Flush and end the process without the interpreter's shutdown, which aborts ("terminate called without an
    active exception") when a native thread (torch's pool, a model call on a daemon thread) still runs."""
    import logging

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def stop_on_signals() -> None:
    """SIGINT (exit 130) and SIGTERM (exit 0) raise ``KeyboardInterrupt`` in the main thread, so open transactions
    roll back and the command unwinds; a process still alive ``STOP_GRACE_S`` later (a thread inside a model call,
    which cannot be interrupted) exits at once. Either way the store is intact: each file is one transaction."""

    def on_signal(signum: int, frame: object) -> None:
        global _stop_code
        if _stop_code is None:
            _stop_code = 130 if signum == signal.SIGINT else 0
            timer = threading.Timer(STOP_GRACE_S, exit_now, (_stop_code,))
            timer.daemon = True
            timer.start()
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)


def stop_code() -> int | None:
    """The exit status a stop signal asked for, or None while none came."""
    return _stop_code
