"""The decision rule , in code: keep or discard, never the agent's call.

Terms (all within one segment of the log):
- a *measurement* is a run record with a finite metric and status keep or discard;
- runs with the same scope content (same `scope_hash`) measure the same *code*; the *value* of
  a piece of code is the median of its measurements;
- the *incumbent* is the code of the last kept run (what HEAD holds); the best value is its value;
- *noise* is the spread of repeated measurements of the same code: the pooled median absolute
  deviation (MAD) from each code's median; sigma = 1.4826 * MAD (the normal-consistent scale);
- the *threshold* is max(min_delta, z * sigma), or min_delta while no code was measured twice.

The rule: the first measurement of a segment is the baseline and is kept. A re-measurement of
the incumbent's code is a noise sample: recorded as discard (HEAD stays), it counts in the
code's value and the noise. After that a run is kept only when its gain over the best value is strictly greater than the threshold (a tie is
never kept), and never when the gain is implausible (larger than `implausible_gain` times the
best value). Opt-in policies: `confirm` re-runs a borderline win before deciding; `simplicity`
keeps a change within noise that makes the scope smaller. references/decision-rule.md has the why.

Huge finite values (a benchmark may print 2e306 or -1e308) never overflow here: a midpoint is
taken without adding first, and a difference, ratio or product whose exact value lies beyond
the largest float is clamped to +-FLOAT_MAX (its sign and order stay right, so every comparison
the rule makes still decides the same way), so no value the engine writes or shows is inf/NaN.
"""

import sys
from dataclasses import dataclass, field, replace

from autoresearch.store.log import is_finite

MAD_TO_SIGMA = 1.4826
DEFAULT_Z = 2.0
DEFAULT_CONFIRM_WITHIN = 2.0
ML_IMPLAUSIBLE_GAIN = 0.3
MEASURED = ("keep", "discard")
FLOAT_MAX = sys.float_info.max


def clamp(x):
    """`x` (the result of arithmetic on finite numbers) as a finite float: an overflow to +-inf
    becomes +-FLOAT_MAX (the nearest finite value; the sign, so the comparison, is kept). NaN,
    which finite inputs only give through inf - inf, is never passed in by this module."""
    return max(-FLOAT_MAX, min(FLOAT_MAX, x))


def midpoint(a, b):
    """(a + b) / 2 of two finite numbers, finite: -1e308 and -1e308 give -1e308, not -inf."""
    m = (a + b) / 2
    return m if m - m == 0 else a / 2 + b / 2


def difference(a, b):
    """a - b, clamped to a finite float (1e308 - -1e308 is FLOAT_MAX, not inf)."""
    return clamp(a - b)


def ratio(a, b):
    """a / b (b not 0), clamped: 1.0 / 1e-310 is FLOAT_MAX, not inf."""
    return clamp(a / b)


def percent(change, base):
    """`change` as a percentage of |base|; None when base is 0 or the percentage is not a
    finite number (a change of 1e10 over a baseline of 1e-300): no percentage then, only the
    change itself."""
    if not base:
        return None
    p = change / abs(base) * 100
    return p if p - p == 0 else None


@dataclass
class Rules:
    direction: str = "lower"
    min_delta: float = 0.0
    z: float = DEFAULT_Z
    implausible_gain: object = None  # fraction, or None (off)
    confirm: bool = False
    confirm_within: float = DEFAULT_CONFIRM_WITHIN
    simplicity: bool = False

    @classmethod
    def from_config(cls, config):
        """The rule of a segment, from its `log.Config` (None: the defaults)."""
        if config is None:
            return cls()
        rule, policies = config.rule, config.policies
        confirm = policies.get("confirm")
        within = confirm.get("within") if isinstance(confirm, dict) else None
        return cls(
            direction=config.direction,
            min_delta=_float(rule.get("min_delta"), 0.0),
            z=_float(rule.get("z"), DEFAULT_Z),
            implausible_gain=_float(rule.get("implausible_gain"), None) or None,
            confirm=bool(confirm),
            confirm_within=_float(within, DEFAULT_CONFIRM_WITHIN),
            simplicity=bool(policies.get("simplicity")),
        )


def _float(value, default):
    return float(value) if is_finite(value) else default


@dataclass
class Decision:
    status: str
    reason: str
    value: object = None          # the candidate's value (median of its measurements)
    best_before: object = None    # the incumbent's value before this run
    threshold: float = 0.0
    confidence: object = None
    gain: object = None
    policy: object = None         # None, "confirm", "simplicity"
    rule: object = None           # the parameters the threshold came from (rule_record)
    implausible: bool = False
    needs_confirmation: bool = False
    extra: dict = field(default_factory=dict)


def median(values):
    """The median (statistics.median without importing it: the engine starts in milliseconds)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of nothing")
    return sorted_median(ordered)


def sorted_median(ordered):
    """The median of an already sorted, non-empty list (finite for finite values)."""
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else midpoint(ordered[mid - 1], ordered[mid])


def code_key(run):
    """What identifies a run's code: its scope hash (commit for hand-made logs)."""
    return run.scope_hash or run.commit or f"run-{run.run}"


@dataclass
class CodeIndex:
    """A segment's runs grouped by code, built in one pass: `keys` {run number: code} and
    `groups` {code: the metric of each of its measurements, in order}."""
    keys: dict
    groups: dict

    def key(self, record):
        return self.keys.get(record.run) or code_key(record)


def code_index(runs):
    """The CodeIndex of a segment. A hand-made record without a scope hash that names the run
    it re-measures (`repeat_of`) measures that run's code."""
    keys, groups = {}, {}
    for r in runs:
        key = r.scope_hash or (keys.get(r.repeat_of) if r.repeat_of is not None else None) or code_key(r)
        keys[r.run] = key
        if r.measured:
            groups.setdefault(key, []).append(r.metric)
    return CodeIndex(keys, groups)


def code_keys(runs):
    """{run number: code} for a segment (see code_index)."""
    return code_index(runs).keys


def iterations_used(runs):
    """Runs that count against the iteration budget: every run but a wave's controls and its
    winner's confirmation re-run (the pool's own measurements of code already counted)."""
    return sum(1 for r in runs if r.extra.get("role") not in ("control", "confirm"))


def incumbent(runs, index=None):
    """The record that introduced the code HEAD holds: earliest keep of the last kept code."""
    kept = [r for r in runs if r.status == "keep"]
    if not kept:
        return None
    index = index or code_index(runs)
    key = index.key(kept[-1])
    return next(r for r in kept if index.key(r) == key)


def remeasurement_reason(run):
    return f"re-measurement of run {run}'s code (noise sample)"


def remeasurements(runs, index=None):
    """Run numbers of the discards that measured already-kept code again (noise samples, not
    rejected ideas): two passes over the segment."""
    index = index or code_index(runs)
    kept_codes = {index.key(r) for r in runs if r.status == "keep"}
    return {r.run for r in runs
            if r.status == "discard" and r.repeat_of is not None and index.key(r) in kept_codes}


def baseline(runs):
    return next((r for r in runs if r.status == "keep"), None)


def value_of(runs, record, index=None):
    """The value of a record's code: the median of its measurements (its own metric if none)."""
    index = index or code_index(runs)
    values = index.groups.get(index.key(record))
    return median(values) if values else record.metric


def rule_record(rules, stats):
    """What a record carries of the rule that judged it: threshold = max(min_delta, z * sigma),
    sigma = 1.4826 * mad of `samples` deviations from repeated measurements (source "repeats"),
    or no sigma (source "none") while no code was measured twice."""
    return {"z": rules.z, "min_delta": rules.min_delta, "sigma": stats["sigma"], "mad": stats["mad"],
            "samples": stats["samples"], "source": stats["source"]}


def noise(runs, rules, index=None):
    """Noise from repeated measurements of the same code: {threshold, mad, sigma, samples, source}.

    `source` is "repeats" when some code was measured at least twice, else "none": then there
    is no sigma (the spread of different codes is real change, not noise) and the threshold is
    min_delta.
    """
    index = index or code_index(runs)
    return noise_of(index.groups.values(), rules)


def noise_of(groups, rules):
    """decide.noise() from each code's measurements (`groups`: lists of metrics)."""
    deviations = []
    for values in groups:
        if len(values) >= 2:
            centre = median(values)
            deviations.extend(abs(difference(v, centre)) for v in values)
    if not deviations:
        return {"threshold": rules.min_delta, "mad": None, "sigma": None, "samples": 0, "source": "none"}
    mad = median(deviations)
    sigma = clamp(MAD_TO_SIGMA * mad)
    return {"threshold": max(rules.min_delta, clamp(rules.z * sigma)), "mad": mad, "sigma": sigma,
            "samples": len(deviations), "source": "repeats"}


def gain(direction, best, value):
    """Improvement of `value` over `best` (positive = better) in the metric's units."""
    return difference(best, value) if direction == "lower" else difference(value, best)


def confidence(gain_value, sigma):
    if gain_value is None or not sigma:
        return None
    return round(ratio(gain_value, sigma), 3)


def decide(runs, candidate, rules, scope_lines=None, confirmed=False):
    """Decide for `candidate` (a record with a finite metric, not yet in `runs`).

    `runs` are the segment's earlier records. Returns a Decision with status keep/discard,
    or needs_confirmation=True when the confirm policy wants one more measurement first.
    """
    # Provisional status: the candidate counts as a measurement of its code while deciding.
    candidate = replace(candidate, status="discard")
    before, after = code_index(runs), code_index(runs + [candidate])
    best = incumbent(runs, before)
    stats = noise(None, rules, after)
    threshold = stats["threshold"]
    if best is None:
        return Decision("keep", "baseline: first measurement of the segment", value=candidate.metric,
                        threshold=threshold, rule=rule_record(rules, stats))
    value = value_of(None, candidate, after)
    best_value = value_of(None, best, before)
    g = gain(rules.direction, best_value, value)
    conf = confidence(g, stats["sigma"])   # None unless noise was measured
    common = dict(value=value, best_before=best_value, threshold=threshold, confidence=conf, gain=g,
                  rule=rule_record(rules, stats))
    same_code = after.key(candidate) == after.key(best)
    if same_code:
        # The incumbent's code measured again: a noise sample, not a new win (only the baseline
        # and a strict improvement keep). It still counts in the code's value.
        return Decision("discard", f"{remeasurement_reason(best.run)}: value now {_fmt(value)}", **common)
    if rules.implausible_gain is not None and best_value != 0:
        relative = ratio(g, abs(best_value))
        if relative > float(rules.implausible_gain):
            return Decision("discard", f"implausible: gain {_pct(relative)} over best exceeds the "
                            f"{float(rules.implausible_gain):.0%} limit; never kept, check the result",
                            implausible=True, **common)
    if g > threshold:
        if rules.confirm and not confirmed and _borderline(g, threshold, rules):
            return Decision("discard", "borderline win: confirming with a re-run", needs_confirmation=True,
                            policy="confirm", **common)
        why = f"gain {_fmt(g)} > threshold {_fmt(threshold)}"
        return Decision("keep", ("confirmed by re-run: " if confirmed else "") + why,
                        policy="confirm" if confirmed else None, **common)
    best_lines = best.scope_lines
    if (rules.simplicity and g >= -threshold and scope_lines is not None and best_lines is not None
            and scope_lines < best_lines):
        return Decision("keep", f"simplicity: within noise (gain {_fmt(g)}, threshold {_fmt(threshold)}) "
                        f"and the scope shrinks from {best_lines} to {scope_lines} lines",
                        policy="simplicity", **common)
    if g == 0:
        why = f"tie with the best ({_fmt(value)}); ties are never kept"
    elif g > 0:
        why = f"gain {_fmt(g)} within the noise threshold {_fmt(threshold)}"
    else:
        why = f"worse than the best by {_fmt(-g)}"
    if confirmed:
        why = "not confirmed by re-run: " + why
    return Decision("discard", why, policy="confirm" if confirmed else None, **common)


def _borderline(g, threshold, rules):
    # Without a threshold every win is borderline: nothing tells luck from a real gain.
    return threshold <= 0 or g <= rules.confirm_within * threshold


def _pct(fraction):
    return f"{fraction:.0%}" if fraction < 1e6 else f"{fraction:.3g}x"


def _fmt(x):
    return "None" if x is None else f"{x:.6g}"
