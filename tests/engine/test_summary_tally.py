"""summary.summarise, built one run at a time (summary.Tally, which the log cache keeps), gives
exactly what the segment-wide definitions in decide.py give, on random nights with repeats,
re-measurements, codes kept again, crashes and ties."""

import random

import pytest

from autoresearch.decision import decide, summary
from autoresearch.store import log


def reference(config, runs):
    """The summary from decide.py's whole-segment functions (what summarise computed before it
    was incremental)."""
    rules = decide.Rules.from_config(config)
    index = decide.code_index(runs)
    remeasured = decide.remeasurements(runs, index)
    base = decide.baseline(runs)
    best = decide.incumbent(runs, index)
    stats = decide.noise(runs, rules, index)
    current, longest = summary.streaks(runs, remeasured)
    return {"remeasured": remeasured, "baseline": base and base.run, "best": best and best.run,
            "baseline_value": decide.value_of(runs, base, index) if base else None,
            "best_value": decide.value_of(runs, best, index) if best else None, "noise": stats,
            "streaks": (current, longest), "running_best": running_best(runs, index.keys),
            "counts": {s: sum(r.status == s for r in runs) for s in log.STATUSES}}


def running_best(runs, keys):
    """After each run, the value of the code that was the incumbent then: the median of all of
    that code's measurements in the segment (one value per code)."""
    out, incumbent, fallback = [], None, None
    for r in runs:
        if r.status == "keep" and keys[r.run] != incumbent:
            incumbent, fallback = keys[r.run], r.metric
        values = [x.metric for x in runs if x.measured and keys[x.run] == incumbent]
        out.append(decide.median(values) if values else fallback)
    return out


def night(rng, n):
    runs, codes = [], []
    for i in range(1, n + 1):
        status = rng.choice(["keep", "discard", "discard", "discard", "crash", "timeout", "checks_failed"])
        repeat = rng.random() < 0.25 and runs
        if repeat:
            target = rng.choice(runs)
            code = target.scope_hash if rng.random() < 0.8 else None
            repeat_of = target.run
        else:
            code = f"code{rng.randrange(max(3, n // 3))}" if rng.random() < 0.9 else None
            repeat_of = None
        metric = None if status in ("crash", "timeout") else rng.choice([1.0, 1.5, round(rng.uniform(0.5, 2), 3)])
        runs.append(log.Run.from_json({"run": i, "status": status, "metric": metric, "scope_hash": code,
                                       "commit": f"c{rng.randrange(10)}", "repeat_of": repeat_of,
                                       "description": f"run {i}"}))
        codes.append(code)
    return runs


@pytest.mark.parametrize("seed", range(60))
def test_the_tally_equals_the_segment_wide_definitions(seed):
    rng = random.Random(seed)
    config = log.Config.from_json({"type": "config", "metricName": "m", "bestDirection": rng.choice(["lower", "higher"]),
                                   "max_iterations": rng.choice([None, 30])})
    runs = night(rng, rng.randrange(1, 60))
    s = summary.summarise(config, runs)
    ref = reference(config, runs)
    assert s.remeasured == ref["remeasured"]
    assert (s.baseline and s.baseline.run, s.best and s.best.run) == (ref["baseline"], ref["best"])
    assert (s.baseline_value, s.best_value) == (ref["baseline_value"], ref["best_value"])
    assert s.noise == ref["noise"]
    assert (s.consecutive_non_keeps, s.longest_non_keeps) == ref["streaks"]
    assert s.running_best == ref["running_best"]
    assert s.counts == ref["counts"]


@pytest.mark.parametrize("seed", range(20))
def test_a_tally_saved_and_continued_equals_one_built_at_once(seed):
    """What the cache does: save after k runs (as JSON), load, add the rest."""
    import json
    rng = random.Random(1000 + seed)
    config = log.Config.from_json({"type": "config", "metricName": "m", "bestDirection": "lower"})
    runs = night(rng, 50)
    k = rng.randrange(0, 50)
    first = summary.Tally(config)
    for r in runs[:k]:
        first.add(r)
    again = summary.Tally.from_json(json.loads(json.dumps(first.to_json())))
    for r in runs[k:]:
        again.add(r)
    if again.retro or first.retro:
        return   # the cache reads the log again in this case
    whole = summary.summarise(config, runs)
    got = again.summary()
    assert got.remeasured == whole.remeasured and got.noise == whole.noise
    assert (got.best and got.best.run, got.best_value) == (whole.best and whole.best.run, whole.best_value)
    assert (got.consecutive_non_keeps, got.longest_non_keeps) == (whole.consecutive_non_keeps, whole.longest_non_keeps)
    assert got.running_best == whole.running_best and got.counts == whole.counts
