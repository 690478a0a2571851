"""The hidden holdout, for the person: validation and holdout of every kept run, and whether the
night's gains transfer.

The ML template's harness evaluates the final model on a third split (disjoint from train and
validation) and writes the value into the run's folder (`holdout.json`). As soon as the benchmark
has ended the engine moves it out of the repo, into its state folder (anchor.py:
`~/.local/state/autoresearch/<repo-id>/holdout/N.json`), which the benchmark's sandbox can neither
read nor write: a later run's train.py cannot read earlier runs' values. The agent never sees
one: no engine output, no log field, no status, brief, hook or serve data carries it, the
PreToolUse hook refuses reads of those files, and what the engine relays of a run (its output.log
and other text files, the METRIC values, the streamed output) has every known holdout value
redacted (`redact`): a benchmark that found one and printed it, or crashed with it, shows
`[hidden]`. Only `autoresearch verify` (a terminal table) and the report page read the values,
through `check()` here.

The warning: the kept chain (the segment's first keep, the baseline, to the best) improved
validation by more than the keep threshold, but the holdout by no more than its own noise
threshold (Z times the spread of holdout values of runs that measured the same code, else the
validation threshold): "the night fitted the validation set".
"""

import bisect
import json
import math
import os
import re
import shutil
from dataclasses import asdict, dataclass, field

from autoresearch.decision import decide, summary
from autoresearch.store import anchor

HOLDOUT_FILE = "holdout.json"
KEY = "holdout_bpb"
FOLDER = "holdout"
VALUES = "values.txt"      # every holdout value secured so far, one per line: what `redact` hides
HIDDEN = "[hidden]"
MIN_DIGITS = 5             # a figure is a holdout value's spelling from 5 significant digits on
SCRUB_BYTES = 64 << 20     # text files of a run folder up to this size are redacted


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


def folder(repo):
    return os.path.join(anchor.folder(repo.root), FOLDER)


def read_value(run_dir, name=HOLDOUT_FILE):
    """The holdout value in a run's folder (None when missing or not a finite number)."""
    data = _read(os.path.join(run_dir, name))
    value = data.get(KEY) if isinstance(data, dict) else None
    if _finite(value):
        return float(value)
    return None


def _read(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read(1 << 16))
    except (OSError, ValueError):
        return None


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def reader(repo):
    """run number -> its holdout value: from the engine's state folder, else (a run recorded
    before the engine moved them there) from the run's folder."""
    secured = folder(repo)
    def value_of(n):
        value = read_value(secured, f"{n}.json")
        return value if value is not None else read_value(repo.run_dir(n))
    return value_of


def secure(repo, run, run_dir):
    """Move run `run`'s holdout.json out of its folder into the state folder (where no benchmark
    can read it), and note its values for `redact`. The first time, the holdout files of earlier
    runs (recorded before this) go the same way. Returns this run's values."""
    secured = folder(repo)
    if not os.path.isdir(secured):
        os.makedirs(secured, mode=0o700, exist_ok=True)
        runs = os.path.join(repo.state, "runs")
        for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
            if name.isdigit() and name != str(run):
                _move(os.path.join(runs, name), secured, int(name))
    return _move(run_dir, secured, run)


def _move(run_dir, secured, run):
    source = os.path.join(run_dir, HOLDOUT_FILE)
    if not os.path.isfile(source) or os.path.islink(source):
        return []
    data = _read(source)
    target = os.path.join(secured, f"{run}.json")
    shutil.move(source, target)
    os.chmod(target, 0o600)
    figures = [v for k, v in (data.items() if isinstance(data, dict) else ()) if "bpb" in k and _finite(v)]
    if figures:
        with open(os.path.join(secured, VALUES), "a", encoding="utf-8") as f:
            f.write("".join(f"{float(v)!r}\n" for v in figures))
    return [float(v) for v in figures]


def known_values(repo):
    """Every holdout value the engine has secured for this repo (floats)."""
    try:
        with open(os.path.join(folder(repo), VALUES), encoding="utf-8") as f:
            return sorted({float(line) for line in f if line.strip()})
    except (OSError, ValueError):
        return []


# A decimal figure: digits, a point, digits, maybe an exponent; not a part of a longer figure.
_FIGURE = re.compile(rb"(?<![\d.])(\d+)\.(\d+)(?:[eE]([-+]?\d+))?(?!\d)")


def _near(values, x, tolerance):
    """True when a value of the sorted list `values` lies within `tolerance` of `x` (bisection:
    a night of many runs has many values)."""
    i = bisect.bisect_left(values, x - tolerance)
    return i < len(values) and values[i] <= x + tolerance


def _hides(values):
    def hidden(match):
        whole, frac, exp = match.group(1), match.group(2), match.group(3)
        if len((whole + frac).lstrip(b"0")) < MIN_DIGITS:
            return match.group(0)
        x = float(match.group(0))
        tolerance = 0.5 * 10.0 ** (int(exp or 0) - len(frac)) * (1 + 1e-9)
        return HIDDEN.encode() if _near(values, x, tolerance) else match.group(0)
    return hidden


def redact(data, values):
    """`data` (bytes or text) with every spelling of a holdout value in `values` (from 5
    significant digits on, any rounding, any exponent) replaced by [hidden]."""
    if not values:
        return data
    text = isinstance(data, str)
    raw = data.encode("utf-8", "surrogateescape") if text else data
    out = _FIGURE.sub(_hides(sorted(values)), raw)
    return out.decode("utf-8", "surrogateescape") if text else out


def hides(value, values):
    """True when the number `value` is a holdout value (to 7 significant digits)."""
    return _finite(value) and _near(sorted(values), value, abs(value) * 5e-7)


def scrub(run_dir, values):
    """Redact the holdout values from every text file of a run's folder (output.log, steps.jsonl,
    what the benchmark wrote): the engine and `diagnose` read them, the agent may too."""
    if not values:
        return
    for base, _dirs, names in os.walk(run_dir):
        for name in names:
            path = os.path.join(base, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > SCRUB_BYTES:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if b"\0" in data[:4096]:
                continue   # binary (weights): not text the engine relays
            clean = redact(data, values)
            if clean != data:
                with open(path, "wb") as f:
                    f.write(clean)


class Redacting:
    """A binary stream (the benchmark's output echoed live) that passes whole lines, redacted:
    `values`, and the run's own values once its evaluator has written them to `own` (a file)."""

    def __init__(self, stream, values, own=None):
        self.stream, self.values, self.own, self.held = stream, sorted(values), own, b""

    def _learn(self):
        if self.own and os.path.exists(self.own):
            data = _read(self.own)
            figures = [float(v) for k, v in (data.items() if isinstance(data, dict) else ()) if "bpb" in k and _finite(v)]
            self.values, self.own = sorted(self.values + figures), None

    def write(self, chunk):
        self._learn()
        data = self.held + chunk
        cut = data.rfind(b"\n") + 1
        self.held = data[cut:]
        if len(self.held) > 1 << 16:   # a long line without a newline: pass it on
            cut, self.held = len(data), b""
        if cut:
            self.stream.write(redact(data[:cut], self.values))
        return len(chunk)

    def flush(self):
        # The runner flushes after each chunk: a partial line stays held (a value split across
        # two chunks must still be seen whole).
        self.stream.flush()

    def finish(self):
        self._learn()
        if self.held:
            self.stream.write(redact(self.held, self.values))
            self.held = b""
        self.stream.flush()


def hide(repo, run, run_dir, m, warn, confined):
    """After a run, before anything reads its files: its holdout.json out of the repo, and its
    holdout values out of what the engine relays (the run's text files, `m`'s METRIC values): a
    process it left behind could have read its own run's file. A run that was not `confined`
    (no sandbox: it could read the state folder) gets every known value redacted. (Only then:
    a long night holds so many values that figures near them would be hidden too.)"""
    try:
        values = secure(repo, run, run_dir)
    except OSError as exc:
        warn(f"run {run}: could not move holdout.json out of the run's folder ({exc}); it stays there")
        values, confined = [], False
    if not confined:
        values = sorted(set(values) | set(known_values(repo)))
    if not values:
        return
    scrub(run_dir, values)
    for name, value in list(m.found.items()):
        if hides(value, values):
            del m.found[name]
            m.warnings.append(f"METRIC {name} left out: its value is a hidden holdout value")


def check(config, runs, value_of):
    """The Check of one segment (`runs`, typed); `value_of(n)` gives run n's holdout value
    (`reader(repo)`). The kept chain runs from the baseline to the best, and each kept code has
    its value, as the segment's summary (summary.summarise, what `status` shows) has them."""
    s = summary.summarise(config, runs)
    holdouts = {}      # code -> holdout values of its measurements
    for r in runs:
        if r.measured:
            value = value_of(r.run)
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
