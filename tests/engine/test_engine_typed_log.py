"""The typed log: Config and Run are the one list of fields; other tools' fields survive.

The field names are pi-autoresearch's (its result type:
https://github.com/davebcn87/pi-autoresearch/blob/main/extensions/pi-autoresearch/types.ts),
so its dashboard keeps reading our log and we keep reading logs that other tools wrote.
"""

import json

from hypothesis import given, settings, strategies as st
from helpers_engine import repo, make  # noqa: F401 (fixtures)

from autoresearch.store import log

# A segment as pi-autoresearch writes it, plus fields only other tools know about.
PI_LINES = [
    {"type": "config", "name": "Optimize tests", "metricName": "total_s", "metricUnit": "s",
     "bestDirection": "lower", "maxExperiments": 100},
    {"run": 1, "commit": "abc1234", "metric": 12.4, "metrics": {"checks_s": 4.1}, "status": "keep",
     "description": "baseline", "timestamp": 1774886400000, "segment": 0, "confidence": None,
     "iterationTokens": None, "asi": {"hypothesis": "cache setup work"}},
    {"run": 2, "commit": "def5678", "metric": 11.9, "metrics": {}, "status": "keep",
     "description": "reduce worker churn", "timestamp": 1774886460000, "segment": 0, "confidence": 2.3,
     "iterationTokens": 5120, "depth": 1, "childRunIds": [3]},
]


def test_records_of_other_tools_round_trip_with_every_field(tmp_path):
    path = tmp_path / "autoresearch.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in PI_LINES), encoding="utf-8")
    night = log.load(str(path))
    config, runs = night.current.config, night.current.runs
    assert (config.metric_name, config.metric_unit, config.direction) == ("total_s", "s", "lower")
    assert config.extra == {"maxExperiments": 100}
    assert runs[1].extra == {"iterationTokens": 5120, "depth": 1, "childRunIds": [3]}
    for raw, typed in zip(PI_LINES, night.records):
        out = typed.to_json()
        assert {k: out[k] for k in raw} == raw            # every field as it was, unknown ones too
    # written back through the typed records and read again: nothing lost, nothing renamed
    again = tmp_path / "again.jsonl"
    for record in night.records:
        log.append(str(again), record)
    assert [r.to_json() for r in log.load(str(again)).records] == [r.to_json() for r in night.records]


def test_the_engine_writes_every_record_through_the_types(make):
    repo = make("--noise-runs", "2")
    repo.experiment("1.0", "baseline")
    repo.experiment("0.5", "better")
    repo.experiment("crash", "break it")
    raw = [json.loads(line) for line in (repo.root / "autoresearch.jsonl").read_text().splitlines()]
    for record in raw:
        typed = log.Config.from_json(record) if record.get("type") == "config" else log.Run.from_json(record)
        assert typed.to_json() == record                   # exactly the fields the types list, in order
        assert typed.extra == {}
    # pi-autoresearch's own keys are all there
    for record in raw[1:]:
        assert {"run", "commit", "metric", "metrics", "status", "description", "timestamp", "segment",
                "confidence", "asi"} <= set(record)
    assert {"type", "name", "metricName", "metricUnit", "bestDirection"} <= set(raw[0])


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5)
                           | st.floats(allow_nan=False, allow_infinity=False),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3),
                           max_leaves=8)


@settings(max_examples=200)
@given(extra=st.dictionaries(st.text(min_size=1, max_size=12), json_values, max_size=5),
       metric=st.none() | st.floats(allow_nan=False, allow_infinity=False),
       status=st.sampled_from(log.STATUSES))
def test_unknown_fields_survive_and_known_ones_keep_their_values(extra, metric, status):
    raw = {"run": 7, "status": status, "metric": metric, "description": "d", **extra}
    raw.update(run=7, status=status, metric=metric, description="d")
    out = log.Run.from_json(raw).to_json()
    known = {f for f in log.Run().to_json()}
    for key, value in raw.items():
        if key not in known or key in ("run", "status", "metric", "description"):
            assert out[key] == value, key


def test_a_value_of_the_wrong_type_reads_as_empty_not_as_a_crash():
    run = log.Run.from_json({"run": 3, "status": "keep", "metric": 1.0, "metrics": [1, 2], "asi": "text",
                             "scope_lines": "many", "description": ["a", 1], "repeat_of": True})
    assert (run.metrics, run.asi, run.scope_lines, run.repeat_of) == ({}, {}, None, None)
    assert run.description == '["a", 1]'
