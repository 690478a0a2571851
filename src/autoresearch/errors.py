"""The engine's errors: what a command raises instead of exiting, and what ends a run early.

`cli.main` turns them into exit codes: Refused 3 (nothing run, nothing recorded), UsageError 2,
Failed 1. Interrupted is a signal (SIGTERM, SIGHUP, SIGINT) caught during a run: the run in
progress is recorded as a crash and HEAD goes back to the best commit before the engine exits.

Only the first signal counts, and it interrupts only the benchmark or the checks (`Stop`):
arriving while the engine prepares a run, it stops the run as soon as its benchmark would
start; arriving while the engine judges and records a measured run, it lets the record finish
and ends the invocation after it. A second signal (Claude Code stopping its Bash tool after the
night's Ctrl-C) changes nothing: an engine that is already stopping is not cut off mid-record.
"""

import argparse
import signal
from contextlib import contextmanager

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 3


class Refused(Exception):
    """Raised by a command that refuses to act: exit 3, nothing run, nothing recorded."""


class UsageError(Exception):
    """Raised for bad arguments that argparse cannot catch: exit 2."""


class Failed(Exception):
    """Raised when a command could not finish (e.g. git failed): exit 1, with the reason."""


def positive_int(text):
    """argparse type for counts (--repeat, --max-iterations, --noise-runs): a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


class Interrupted(KeyboardInterrupt):
    """A signal that asks the engine to stop: the run in progress is recorded as a crash."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Stop:
    """The signals a `run` invocation has received, and where they may interrupt it."""

    def __init__(self):
        self.signum = None     # the first signal, once one came
        self.armed = False     # inside `interruptible()`: the signal raises Interrupted at once

    def handler(self, signum, frame):
        if self.signum is not None:
            return   # already stopping: the run in progress is being recorded
        self.signum = signum
        if self.armed:
            raise Interrupted(signum)

    @contextmanager
    def interruptible(self):
        """A stretch (the benchmark, the checks) that a signal ends; one that came before ends it now."""
        if self.signum is not None:
            raise Interrupted(self.signum)
        self.armed = True
        try:
            yield
        finally:
            self.armed = False


def trap(signals, handler):
    """Install `handler` for `signals` and return the handlers it replaced (for `restore`). A SIGHUP
    the process was started ignoring stays ignored: `nohup` asked for that, and a night must outlive
    the terminal it was started from. An ignored SIGINT is trapped all the same: a shell ignores it
    for every command it starts in the background (Claude Code's Bash tool among them), and the
    night's Ctrl-C must still reach the run in progress so it is recorded."""
    kept = {signal.SIGHUP} if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else set()
    return {sig: signal.signal(sig, handler) for sig in signals if sig not in kept}


def restore(saved):
    for sig, old in saved.items():
        signal.signal(sig, old)


STOP = Stop()   # the running invocation's; `experiment` installs a fresh one with its handlers
