"""Step 4 of an experiment, record and reset: append the run to the log, then put HEAD back at
the best commit unless the run was kept.

Signals wait until both are done, so an interrupt never splits them; a SIGKILL between the two
leaves current.json, and the next engine call finishes the reset (recovery.py).

A record the log cannot take (a full disk, a read-only log) is not lost: it waits in the
engine's state (pending.py) and the next engine call appends it; HEAD still goes back to the
best commit, so a failed run never stays on the branch. Edits the agent made while the run was
in flight (the benchmark ran a snapshot, not the work tree) are kept, uncommitted.
"""

import json
import signal

from autoresearch import output
from autoresearch.pipeline import recovery
from autoresearch.store import gitops, log, pending
from autoresearch.errors import Refused

TRAPPED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def record(repo, run, runs, base, notes=None):
    """Append `run` (a `log.Run`) and add it to `runs` (the segment so far); on anything but a
    keep, reset to the incumbent's commit, else to `base` (where the run started). `notes`
    gets a line when edits made during the run were kept."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, TRAPPED)
    try:
        try:
            log.append(repo.log, run, warn=output.warn)
        except OSError as exc:
            _keep_waiting(repo, run, runs, base, exc)
        runs.append(run)
        if run.status != "keep":
            restore_best(repo, runs, base, notes)
        else:
            _note_edits(repo, gitops.head(repo.root), notes)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _keep_waiting(repo, run, runs, base, exc):
    where = pending.save(repo, run.to_json())
    if run.status != "keep":
        try:
            restore_best(repo, runs + [run], base, None)
        except (gitops.GitError, OSError):
            pass  # current.json stays: the next engine call finishes the reset
    kept = (f"it waits in {repo.rel(where)} and the next `autoresearch run` or `status` appends it"
            if where else f"here it is: {json.dumps(run.to_json(), ensure_ascii=False)}")
    raise Refused(f"run {run.run} ({run.status}) was measured but the log cannot be written "
                  f"({exc.strerror or exc}); {kept}; free space or fix the log's permissions") from None


def restore_best(repo, runs, base, notes=None):
    target = recovery.restore_target(repo, runs, base)
    head = gitops.head(repo.root)
    if target and head != target:
        if _note_edits(repo, head, notes):
            # Edits made while the run was in flight: HEAD and the index go back, the files stay.
            gitops.git(repo.root, "reset", "-q", "--mixed", target)
        else:
            gitops.reset_hard(repo.root, target)


def _note_edits(repo, commit, notes):
    """True (and a line in `notes`) when the work tree moved on from the run's commit while it
    ran: those edits are kept, uncommitted, for the next run."""
    changed = gitops.changed_tracked(repo.root, commit) if commit else []
    if changed and notes is not None:
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        note = f"your edits made while the run was in flight are kept, uncommitted: {shown}"
        if note not in notes:
            notes.append(note)
    return bool(changed)
