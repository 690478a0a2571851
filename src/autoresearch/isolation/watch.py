"""Watching a run while it goes: stall detection and early abort, from its steps file.

A thread beside the runner's pump reads the run's `steps.jsonl` as it grows and looks at the
size of its `output.log`. It stops the run (the runner's process-group kill) when

- it stalled: after a first step, no new step line and no output for longer than a limit learned
  from the run's own step gaps (`GAP_FACTOR` times the longest gap so far), and never less than
  the floor (2 minutes; `AUTORESEARCH_STALL_FLOOR_S` sets it, for tests). Once a step reports
  the budget nearly done (progress >= `DONE_PROGRESS`) the evaluation follows without step lines
  or output (minutes on a loaded CPU): no stall check then, the run's timeout still holds. The
  record is a `timeout`, "stalled after step N".
- early abort is on and the candidate's loss is clearly behind the best's (earlyabort.py):
  the record is a `discard` with the reason and the time saved.
"""

import json
import os
import threading
import time
from dataclasses import dataclass

from autoresearch.isolation import runner

STALL_FLOOR_S = 120.0
GAP_FACTOR = 10.0
DONE_PROGRESS = 0.95   # the last step of a budget reports about 0.99, not 1: training is over
POLL_S = 0.5


def stall_floor_s():
    try:
        value = float(os.environ.get("AUTORESEARCH_STALL_FLOOR_S", STALL_FLOOR_S))
    except ValueError:
        return STALL_FLOOR_S
    return value if value > 0 else STALL_FLOOR_S


@dataclass
class Stop:
    status: str            # "timeout" (stalled) or "discard" (early abort)
    reason: str
    step: object = None
    abort: object = None   # earlyabort.Abort for an early abort


class Watch:
    """Start with `begin(pid)` once the run's process group exists; `end()` when it is over."""

    def __init__(self, run_dir, checker=None, floor_s=None, clock=time.monotonic, poll_s=POLL_S):
        self.steps_path = os.path.join(run_dir, "steps.jsonl")
        self.output_path = os.path.join(run_dir, "output.log")
        self.checker, self.floor_s = checker, floor_s if floor_s is not None else stall_floor_s()
        self.clock, self.poll_s = clock, poll_s
        self.stopped = None
        self._done = threading.Event()
        self._thread = None
        self._offset, self._partial = 0, b""
        self.steps, self.last_step, self.last_progress = 0, None, 0.0
        self.max_gap, self._last_step_at = 0.0, None
        self._output_size, self._last_output_at = -1, None

    def begin(self, pid):
        self.pid = pid
        self._thread = threading.Thread(target=self._loop, name="autoresearch-watch", daemon=True)
        self._thread.start()

    def end(self):
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self):
        while not self._done.wait(self.poll_s):
            try:
                stop = self.poll()
            except Exception:   # noqa: BLE001 - the watcher must never break the run it watches
                continue
            if stop is not None:
                self.stopped = stop
                runner.kill_group(self.pid)
                return

    def poll(self):
        """Read what is new; the Stop when the run must end now, else None."""
        now = self.clock()
        for record in self._new_steps():
            self._took_step(record, now)
            if self.checker is not None and self.checker.add(record):
                abort = self.checker.check()
                if abort is not None:
                    return Stop("discard", abort.reason, self.last_step, abort)
        self._saw_output(now)
        return self._stalled(now)

    def _new_steps(self):
        try:
            with open(self.steps_path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read(1 << 20)
        except OSError:
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    def _took_step(self, record, now):
        if self._last_step_at is not None:
            self.max_gap = max(self.max_gap, now - self._last_step_at)
        self._last_step_at = now
        self.steps += 1
        step = record.get("step")
        self.last_step = step if isinstance(step, int) and not isinstance(step, bool) else self.steps
        progress = record.get("progress")
        if isinstance(progress, (int, float)) and not isinstance(progress, bool):
            self.last_progress = float(progress)

    def _saw_output(self, now):
        try:
            size = os.stat(self.output_path).st_size
        except OSError:
            return
        if size != self._output_size:
            self._output_size, self._last_output_at = size, now

    def limit_s(self):
        return max(self.floor_s, GAP_FACTOR * self.max_gap)

    def _stalled(self, now):
        if self._last_step_at is None or self.last_progress >= DONE_PROGRESS:
            return None
        quiet = now - max(self._last_step_at, self._last_output_at or self._last_step_at)
        limit = self.limit_s()
        if quiet <= limit:
            return None
        return Stop("timeout", f"stalled after step {self.last_step}: no new step line and no output for "
                               f"{quiet:.0f} s (limit {limit:.0f} s, from its step gaps)", self.last_step)
