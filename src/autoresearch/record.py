"""Step 4 of an experiment, record and reset: append the run to the log, then put HEAD back at
the best commit unless the run was kept.

Signals wait until both are done, so an interrupt never splits them; a SIGKILL between the two
leaves current.json, and the next engine call finishes the reset (recovery.py).
"""

import signal

from autoresearch import gitops, log, output, recovery

TRAPPED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def record(repo, run, runs, base):
    """Append `run` (a `log.Run`) and add it to `runs` (the segment so far); on anything but a
    keep, reset to the incumbent's commit, else to `base` (where the run started)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, TRAPPED)
    try:
        log.append(repo.log, run, warn=output.warn)
        runs.append(run)
        if run.status != "keep":
            restore_best(repo, runs, base)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def restore_best(repo, runs, base):
    target = recovery.restore_target(repo, runs, base)
    if target and gitops.head(repo.root) != target:
        gitops.reset_hard(repo.root, target)
