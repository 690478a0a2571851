"""Early abort: stop a run whose training loss is clearly behind the best run's at the same point.

Opt-in (`init --early-abort`). From a progress point (`at`, default 40% of the budget) the
candidate's smoothed training loss is compared with the incumbent's at the same progress. The
smoothing is the mean loss over the last `WINDOW` of progress; the margin is `Z` times the spread
(standard deviation) of the smoothed curves of runs that measured the same code again (the noise
runs), and never less than `FLOOR` of the incumbent's loss. Clearly behind means more than the
margin behind at `CONFIRM` consecutive checks. The curves are the steps files (`steps.jsonl`: one
JSON object per step with `progress` and `loss`) the harness writes into each run's folder.

`benchmarks/early_abort_replay.py` replays recorded nights through `check` before anyone trusts
it; the figures are in references/early-abort.md.
"""

import json
import math
import os
import statistics
from dataclasses import dataclass, field

from autoresearch.decision import decide

DEFAULT_AT = 0.4
WINDOW = 0.05        # progress over which the loss is averaged
Z = 3.0              # margin = Z * spread of repeated curves ...
FLOOR = 0.01         # ... and at least 1% of the incumbent's smoothed loss
CONFIRM = 3          # consecutive checks behind before stopping
SPREAD_POINTS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class Curve:
    progress: list = field(default_factory=list)
    loss: list = field(default_factory=list)

    def add(self, record):
        """Take one steps.jsonl record; False when it is not a step with a finite loss."""
        if not isinstance(record, dict):
            return False
        p, loss = record.get("progress"), record.get("loss")
        if not _finite(p) or not _finite(loss):
            return False
        self.progress.append(float(p))
        self.loss.append(float(loss))
        return True

    @property
    def last_progress(self):
        return self.progress[-1] if self.progress else 0.0

    def smoothed(self, p, window=WINDOW):
        """Mean loss over the steps with progress in (p - window, p]; None when there are none."""
        values = [v for q, v in zip(self.progress, self.loss) if p - window < q <= p]
        # each term divided first: a mean of losses near 1e308 is finite, as they are
        return decide.clamp(sum(v / len(values) for v in values)) if values else None


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_curve(path):
    """The curve in a steps file (lines that are not steps are skipped); empty when missing."""
    curve = Curve()
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return curve
    for line in raw.split(b"\n"):
        try:
            curve.add(json.loads(line))
        except ValueError:
            continue
    return curve


def spread(groups):
    """The noise of a curve: the median, over groups of curves of the same code and over
    SPREAD_POINTS, of the standard deviation of their smoothed losses. None without a group of 2."""
    deviations = []
    for curves in groups:
        for p in SPREAD_POINTS:
            values = [v for v in (c.smoothed(p) for c in curves) if v is not None]
            if len(values) >= 2:
                deviations.append(_stdev(values))
    return decide.median(deviations) if deviations else None


def _stdev(values):
    """statistics.stdev, the largest float where the exact value is beyond the floats."""
    try:
        return statistics.stdev(values)
    except OverflowError:
        return decide.FLOAT_MAX


@dataclass
class Reference:
    """What a candidate is compared with: the incumbent's curve and the noise of curves."""
    run: int
    curve: Curve
    spread: object = None        # float or None (no repeated runs)
    duration_s: object = None    # the incumbent's duration, for the time saved


@dataclass
class Rule:
    at: float = DEFAULT_AT
    z: float = Z
    floor: float = FLOOR
    confirm: int = CONFIRM

    def margin(self, ref_loss, spread_value):
        return max(decide.clamp(self.z * (spread_value or 0.0)), self.floor * abs(ref_loss))


@dataclass
class Abort:
    progress: float
    loss: float
    best_loss: float
    margin: float
    against: int

    @property
    def reason(self):
        return (f"stopped at {100 * self.progress:.0f}%: loss {self.loss:.4g} vs the best's "
                f"{self.best_loss:.4g} at the same point (early abort, margin {self.margin:.2g}, "
                f"best is run {self.against})")


class Checker:
    """Feed it the candidate's steps as they come (`add`); `check()` says when to stop."""

    def __init__(self, reference, rule=None):
        self.reference, self.rule = reference, rule or Rule()
        self.curve = Curve()
        self.behind = 0
        self.checked_at = None

    def add(self, record):
        return self.curve.add(record)

    def check(self):
        """An `Abort` once the candidate is clearly behind, else None. One check per new step."""
        p = self.curve.last_progress
        if p < self.rule.at or p == self.checked_at or p > 1.0:
            return None
        self.checked_at = p
        ref = self.reference.curve
        if ref.last_progress < p:
            return None   # the incumbent's curve does not reach this far: nothing to compare with
        mine, theirs = self.curve.smoothed(p), ref.smoothed(p)
        if mine is None or theirs is None:
            return None
        margin = self.rule.margin(theirs, self.reference.spread)
        if decide.difference(mine, theirs) > margin:
            self.behind += 1
        else:
            self.behind = 0
        if self.behind >= self.rule.confirm:
            return Abort(p, mine, theirs, margin, self.reference.run)
        return None


def replay(candidate, reference, rule=None):
    """Feed a whole recorded curve through the rule: the Abort it would have given, or None."""
    checker = Checker(reference, rule)
    for p, loss in zip(candidate.progress, candidate.loss):
        checker.add({"progress": p, "loss": loss})
        found = checker.check()
        if found is not None:
            return found
    return None


def reference_for(runs, run_dir_of):
    """The Reference of a segment's records: the incumbent's curve, the spread of the curves of
    every group of runs that measured the same code. None when there is no incumbent curve."""
    from autoresearch.decision import decide
    best = decide.incumbent(runs)
    if best is None:
        return None
    curve = read_curve(os.path.join(run_dir_of(best.run), "steps.jsonl"))
    if not curve.progress:
        return None
    index, groups = decide.code_index(runs), {}
    for r in runs:
        if r.measured:
            groups.setdefault(index.key(r), []).append(r.run)
    curves = [[read_curve(os.path.join(run_dir_of(n), "steps.jsonl")) for n in members]
              for members in groups.values() if len(members) >= 2]
    return Reference(best.run, curve, spread(curves), best.duration_s)


def rule_of(config):
    """The segment's Rule when early abort is on (`init --early-abort`), else None."""
    settings = getattr(config, "early_abort", None)
    if not isinstance(settings, dict):
        return None
    at = settings.get("at", DEFAULT_AT)
    return Rule(at=float(at) if _finite(at) and 0 < at < 1 else DEFAULT_AT)
