"""The decision rule as a function: properties that must hold for any history."""

import pytest
from hypothesis import given, settings, strategies as st

from autoresearch.decision import decide
from autoresearch.store.log import Run

values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def _history(metrics, direction="lower"):
    """A segment where every measurement was decided by the rule itself, in order."""
    rules = decide.Rules(direction=direction)
    runs = []
    for i, m in enumerate(metrics, start=1):
        record = Run(run=i, metric=m, scope_hash=f"code{i}", commit=f"c{i}")
        d = decide.decide(runs, record, rules)
        record.status = d.status
        runs.append(record)
    return runs, rules


@settings(max_examples=200)
@given(st.lists(values, min_size=1, max_size=12), st.sampled_from(["lower", "higher"]))
def test_keeps_form_a_strictly_improving_chain(metrics, direction):
    runs, _ = _history(metrics, direction)
    kept = [r.metric for r in runs if r.status == "keep"]
    assert runs[0].status == "keep"  # the baseline
    for before, after in zip(kept, kept[1:]):
        assert (after < before) if direction == "lower" else (after > before)


@settings(max_examples=200)
@given(st.lists(values, min_size=1, max_size=8), st.data())
def test_ties_and_regressions_are_never_kept(metrics, data):
    runs, rules = _history(metrics)
    best = decide.value_of(runs, decide.incumbent(runs))
    worse_or_equal = data.draw(st.floats(min_value=best, max_value=best + 1e6, allow_nan=False))
    d = decide.decide(runs, Run(run=99, metric=worse_or_equal, scope_hash="new"), rules)
    assert d.status == "discard"


@given(st.floats(min_value=0.001, max_value=10), st.floats(min_value=0.0, max_value=0.5))
def test_threshold_from_repeats(spread, gain):
    runs = [Run(run=1, metric=10.0, status="keep", scope_hash="a"),
            Run(run=2, metric=10.0 + spread, status="keep", scope_hash="a"),
            Run(run=3, metric=10.0 - spread, status="keep", scope_hash="a")]
    rules = decide.Rules()
    noise = decide.noise(runs, rules)
    assert noise["mad"] == pytest.approx(spread) and noise["threshold"] == pytest.approx(2 * 1.4826 * spread)
    d = decide.decide(runs, Run(run=4, metric=10.0 - gain, scope_hash="b"), rules)
    assert d.status == ("keep" if gain > noise["threshold"] else "discard")
    assert d.threshold == noise["threshold"]


def test_implausible_beats_everything():
    runs, _ = _history([1.0])
    rules = decide.Rules(implausible_gain=0.3)
    d = decide.decide(runs, Run(run=2, metric=0.5, scope_hash="x"), rules)
    assert d.status == "discard" and d.implausible
    assert decide.decide(runs, Run(run=2, metric=0.75, scope_hash="x"), rules).status == "keep"


def test_confirmation_is_requested_only_for_borderline_wins():
    runs = [Run(run=1, metric=1.0, status="keep", scope_hash="a"),
            Run(run=2, metric=1.1, status="keep", scope_hash="a")]  # MAD 0.05 -> threshold 0.148
    rules = decide.Rules(confirm=True, confirm_within=2.0)
    border = decide.decide(runs, Run(run=3, metric=1.05 - 0.2, scope_hash="b"), rules)
    clear = decide.decide(runs, Run(run=3, metric=1.05 - 0.4, scope_hash="b"), rules)
    assert border.needs_confirmation and not clear.needs_confirmation and clear.status == "keep"


def test_median_matches_the_definition():
    assert decide.median([3, 1, 2]) == 2 and decide.median([4, 1, 2, 3]) == 2.5
    with pytest.raises(ValueError):
        decide.median([])
