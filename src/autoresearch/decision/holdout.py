"""The hidden holdout, for the person: validation and holdout of every kept run, and whether the
night's gains transfer.

The ML template's harness evaluates the final model on a third split (disjoint from train and
validation) and writes the value only into the run's folder (`holdout.json`). The agent never
sees it: no engine output, no log field, no status, brief, hook or serve data carries it, and the
PreToolUse hook refuses reads of those files. Only `autoresearch verify` (a terminal table) and
the report page read them, through `check()` here.

The warning: the kept chain (the segment's first keep, the baseline, to the best) improved
validation by more than the keep threshold, but the holdout by no more than its own noise
threshold (Z times the spread of holdout values of runs that measured the same code, else the
validation threshold): "the night fitted the validation set".
"""

import json
import math
import os
from dataclasses import asdict, dataclass, field

from autoresearch.decision import decide, summary

HOLDOUT_FILE = "holdout.json"
KEY = "holdout_bpb"


@dataclass
class Row:
    run: int
    commit: str
    description: str
    validation: float          # the value the rule decided on (median of the code's measurements)
    holdout: object = None     # median holdout of the code's measurements; None when not written


@dataclass
class Check:
    rows: list = field(default_factory=list)
    validation_gain: object = None
    holdout_gain: object = None
    validation_threshold: object = None
    holdout_threshold: object = None
    holdout_noise: str = "none"   # "repeats" or "none" (then the validation threshold)
    warning: object = None

    @property
    def measured(self):
        """Whether any kept code has a holdout value: a night that used no holdout has nothing
        to show (the report then leaves the section out)."""
        return any(row.holdout is not None for row in self.rows)

    def to_json(self):
        return asdict(self)


def read_value(run_dir):
    """The holdout value in a run's folder (None when missing or not a finite number)."""
    try:
        with open(os.path.join(run_dir, HOLDOUT_FILE), "rb") as f:
            data = json.loads(f.read(1 << 16))
    except (OSError, ValueError):
        return None
    value = data.get(KEY) if isinstance(data, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def check(config, runs, run_dir_of):
    """The Check of one segment (`runs`, typed) whose run folders `run_dir_of(n)` gives. The
    kept chain runs from the baseline to the best, and each kept code has its value, as the
    segment's summary (summary.summarise, what `status` shows) has them."""
    s = summary.summarise(config, runs)
    holdouts = {}      # code -> holdout values of its measurements
    for r in runs:
        if r.measured:
            value = read_value(run_dir_of(r.run))
            if value is not None:
                holdouts.setdefault(s.codes[r.run], []).append(value)
    rows, seen = [], set()
    for r in runs:
        key = s.codes[r.run]
        if r.status != "keep" or key in seen:
            continue
        seen.add(key)
        values = holdouts.get(key)
        rows.append(Row(r.run, r.commit, r.description, s.value_of(r), decide.median(values) if values else None))
    result = Check(rows)
    if len(rows) < 2 or config is None:
        return result
    rules = decide.Rules.from_config(config)
    first = rows[0]
    last = next(row for row in rows if row.run == s.best.run)
    if last is first:
        return result
    result.validation_gain = decide.gain(config.direction, first.validation, last.validation)
    result.validation_threshold = s.noise["threshold"]
    spread = decide.noise_of(holdouts.values(), rules)
    result.holdout_noise = spread["source"]
    result.holdout_threshold = spread["threshold"] if spread["source"] == "repeats" else result.validation_threshold
    if first.holdout is None or last.holdout is None:
        return result
    result.holdout_gain = decide.gain(config.direction, first.holdout, last.holdout)
    if result.validation_gain > result.validation_threshold and result.holdout_gain <= result.holdout_threshold:
        result.warning = (f"the night fitted the validation set: the kept chain (run {first.run} to run "
                          f"{last.run}) gained {result.validation_gain:.4g} on validation but "
                          f"{result.holdout_gain:.4g} on the hidden holdout (noise threshold "
                          f"{result.holdout_threshold:.4g}); check the kept changes before merging them")
    return result


def table(result, name="val_bpb"):
    """The Check as terminal text: one row per kept code, then the verdict."""
    lines = [f"{'run':>5}  {'commit':<9} {name:>12} {'holdout':>12}  description"]
    for row in result.rows:
        h = f"{row.holdout:12.6g}" if row.holdout is not None else f"{'-':>12}"
        lines.append(f"{row.run:>5}  {(row.commit or '')[:9]:<9} {row.validation:12.6g} {h}  {row.description[:60]}")
    if not result.rows:
        lines.append("  (no kept run yet)")
    if result.validation_gain is not None:
        h = f"{result.holdout_gain:.4g}" if result.holdout_gain is not None else "unknown (no holdout value)"
        lines.append(f"kept chain: {name} gained {result.validation_gain:.4g} (threshold "
                     f"{result.validation_threshold:.4g}); holdout gained {h} (threshold "
                     f"{result.holdout_threshold:.4g}{', from repeated runs' if result.holdout_noise == 'repeats' else ''})")
    lines.append(f"WARNING: {result.warning}" if result.warning else
                 "holdout: no sign of fitting the validation set" if result.holdout_gain is not None else
                 "holdout: not enough to compare (needs two kept runs with holdout values)")
    return "\n".join(lines)
