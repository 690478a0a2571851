"""The one summary of a segment (summary.summarise): what every view prints.

The first case is the night the issue started from: the demo's baseline measured twice
(0.181849, then 0.182366) and no keep after it. The report then said "0.181849 -> 0.1821075",
status said 0.182108 for both; the one summary says the baseline's value is the median of its
code's measurements and, while the incumbent is that code, the change is exactly 0.
"""

import pytest
from hypothesis import given, settings, strategies as st

from autoresearch.decision import summary
from autoresearch.views import status as status_view
from autoresearch.store.log import Config, Run


def night(*rows, direction="lower"):
    """rows: (status, metric, code[, repeat_of]) -> (config, runs)."""
    runs = []
    for n, row in enumerate(rows, start=1):
        status, metric, code = row[:3]
        runs.append(Run(run=n, status=status, metric=metric, scope_hash=code, commit=f"c{n}",
                        repeat_of=row[3] if len(row) > 3 else None, description=f"run {n}"))
    return Config(metric_name="val_bpb", direction=direction), runs


def test_a_baseline_measured_twice_is_its_median_and_no_improvement_yet():
    config, runs = night(("keep", 0.181849, "a"), ("discard", 0.182366, "a", 1),
                         ("discard", 2.07, "b"), ("crash", None, "c"), ("discard", 0.19, "d"))
    s = summary.summarise(config, runs)
    assert s.baseline.run == 1 and s.baseline_value == pytest.approx(0.1821075)
    assert s.best.run == 1 and s.best_value == s.baseline_value
    assert (s.change.value, s.change.percent, s.change.word, s.change.text) == (0.0, 0.0, None, "no improvement yet")
    assert s.confidence is None                    # nothing but the baseline: no gain to weigh
    assert s.remeasured == {2}
    assert (s.consecutive_non_keeps, s.longest_non_keeps) == (3, 3)   # ideas, not noise samples
    # one value per code: the chart's line starts at the baseline the header shows, no step up
    assert s.running_best == [pytest.approx(0.1821075)] * 5


@pytest.mark.parametrize("direction,base,best,word", [("lower", 1.0, 0.6, "better"), ("higher", 1.0, 1.4, "better"),
                                                      ("lower", 1.0, 1.2, "worse"), ("higher", 1.0, 0.9, "worse")])
def test_one_sign_convention_with_the_word(direction, base, best, word):
    config, runs = night(("keep", base, "a"), ("keep", best, "b"), direction=direction)
    change = summary.summarise(config, runs).change
    assert change.word == word and (change.value > 0) == (word == "better") and (change.percent > 0) == (word == "better")
    assert change.text == f"{abs(change.percent):.2f}% {word} than the baseline"
    assert abs(change.percent) == pytest.approx(abs(best - base) / base * 100)


def test_confidence_only_when_noise_was_measured():
    config, runs = night(("keep", 1.0, "a"), ("discard", 1.1, "b"), ("discard", 0.95, "c"), ("keep", 0.5, "d"))
    s = summary.summarise(config, runs)
    assert not s.noise_measured and s.confidence is None      # spread across codes is not noise
    config, runs = night(("keep", 1.0, "a"), ("discard", 1.02, "a", 1), ("keep", 0.5, "d"))
    s = summary.summarise(config, runs)
    assert s.noise_measured and s.confidence == pytest.approx((1.01 - 0.5) / (1.4826 * 0.01), rel=1e-3)


def test_the_best_is_the_incumbent_value_as_its_code_is_measured_again():
    config, runs = night(("keep", 1.0, "a"), ("keep", 0.8, "b"), ("discard", 0.84, "b", 2), ("discard", 0.9, "x"))
    s = summary.summarise(config, runs)
    assert s.best.run == 2 and s.best_value == pytest.approx(0.82)
    assert s.running_best == [1.0, pytest.approx(0.82), pytest.approx(0.82), pytest.approx(0.82)]
    assert (s.consecutive_non_keeps, s.longest_non_keeps) == (1, 1)


def test_status_text_warns_while_noise_is_not_measured():
    status = {"name": "n", "segment": 0, "direction": "lower", "metric_name": "loss", "metric_unit": "",
              "runs": 1, "total_runs": 1, "counts": {"keep": 1}, "remeasurements": 0,
              "baseline": {"run": 1, "commit": "c1", "metric": 1.0, "description": "b"},
              "best": {"run": 1, "commit": "c1", "metric": 1.0, "description": "b"},
              "change": {"value": 0.0, "percent": 0.0, "word": None, "text": "no improvement yet"},
              "noise": None, "threshold": 0.0, "confidence": None, "last_runs": [],
              "consecutive_non_keeps": 0, "longest_non_keeps": 0, "iterations_left": None,
              "max_iterations": None, "active": True, "owner_session": None, "running": None}
    text = status_view.status_text(status)
    assert "best: run 1 (c1) 1 (no improvement yet): b" in text
    warning = [line for line in text.splitlines() if line.startswith("warning:")]
    assert warning == ["warning: noise not measured, so any gain will keep; measure it with "
                       '`autoresearch run --baseline --repeat 3 -m "measure noise"`']


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["keep", "discard", "crash", "timeout", "checks_failed"]),
                          st.floats(min_value=0.1, max_value=10), st.sampled_from("abcde")), min_size=1, max_size=30))
def test_the_running_best_ends_at_the_best_and_streaks_fit_the_counts(rows):
    config, runs = night(*[(st_, None if st_ in ("crash", "timeout") else m, code) for st_, m, code in rows])
    s = summary.summarise(config, runs)
    assert len(s.running_best) == len(runs) == s.runs == sum(s.counts.values())
    if s.best is not None:
        assert s.running_best[-1] == pytest.approx(s.best_value)
    assert s.consecutive_non_keeps <= s.longest_non_keeps <= s.runs - s.counts["keep"]
    if s.best is not None and s.baseline is not None and s.change.word is None:
        assert s.change.value == 0
