"""The engine's errors: what a command raises instead of exiting, and what ends a run early.

`cli.main` turns them into exit codes: Refused 3 (nothing run, nothing recorded), UsageError 2,
Failed 1. Interrupted is a signal (SIGTERM, SIGHUP, SIGINT) caught during a run: the run in
progress is recorded as a crash and HEAD goes back to the best commit before the engine exits.
"""

import signal


class Refused(Exception):
    """Raised by a command that refuses to act: exit 3, nothing run, nothing recorded."""


class UsageError(Exception):
    """Raised for bad arguments that argparse cannot catch: exit 2."""


class Failed(Exception):
    """Raised when a command could not finish (e.g. git failed): exit 1, with the reason."""


class Interrupted(KeyboardInterrupt):
    """A signal that asks the engine to stop: the run in progress is recorded as a crash."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
