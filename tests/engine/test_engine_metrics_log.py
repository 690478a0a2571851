"""Property tests: the METRIC parser on arbitrary text, the log reader on torn and garbage lines."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from autoresearch import log, metrics

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True)
finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.text())
def test_parser_never_fails_and_only_returns_finite_numbers(text):
    found, warnings = metrics.parse(text)
    for name, value in found.items():
        assert metrics.valid_name(name)
        assert isinstance(value, float) and math.isfinite(value)
    assert all(isinstance(w, str) for w in warnings)


@given(st.text(), names, finite, st.text())
def test_a_metric_line_is_found_anywhere(before, name, value, after):
    text = f"{before}\nMETRIC {name}={value!r}\n"
    found, _ = metrics.parse(text)
    assert found[name] == value  # repr round-trips the float exactly
    # The last value of a repeated name wins, whatever text follows it (without METRIC lines).
    found, _ = metrics.parse(f"METRIC {name}=1.5\n{text}{after.replace('METRIC', 'metric')}")
    assert found[name] == value


@given(names, st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "0x1F", "1_000", "1e999", "--1",
                               "1.5ms", "", "1,5"]))
def test_bad_values_are_ignored_with_a_warning(name, bad):
    found, warnings = metrics.parse(f"METRIC {name}={bad}\n")
    assert name not in found
    if bad:
        assert len(warnings) == 1 and name in warnings[0]


def test_grammar_details():
    found, _ = metrics.parse("METRIC  a=1\nMETRIC b=2 \r\nMETRICc=3\n METRIC d=4\nMETRIC e = 5\n"
                             "progress 10%\rMETRIC f=.5e1\nMETRIC g.h=-3\n")
    assert found == {"a": 1.0, "b": 2.0, "f": 5.0, "g.h": -3.0}


records = st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), finite, st.text(max_size=20)),
                          max_size=5)


@settings(max_examples=60, deadline=None)
@given(st.lists(records, max_size=8), st.lists(st.binary(max_size=40), max_size=5), st.data())
def test_reader_keeps_every_whole_record(tmp_path_factory, good, garbage, data):
    """Whole records survive any garbage between them and a torn last line."""
    path = tmp_path_factory.mktemp("log") / "autoresearch.jsonl"
    expected = []
    for record in good:
        log.append(str(path), record)
        expected.append(record)
        if garbage and data.draw(st.booleans()):
            junk = b"\x00" + garbage.pop().replace(b"\n", b" ")  # never valid JSON
            with open(path, "ab") as f:
                f.write(junk)  # no newline: like a torn write; the next append must isolate it
    if good:
        whole = json.dumps(good[-1]).encode()
        cut = data.draw(st.integers(min_value=1, max_value=max(1, len(whole) - 1)))
        with open(path, "ab") as f:
            f.write(whole[:cut])
    warnings = []
    assert log.read(str(path), warn=warnings.append) == expected


def test_reader_warns_per_malformed_line(tmp_path):
    path = tmp_path / "autoresearch.jsonl"
    path.write_bytes(b'{"type":"config","name":"x"}\n{"run":1\n\xff\xfe\n[1,2]\n\n{"run":2}\n{"run":3')
    warnings = []
    assert log.read(str(path), warn=warnings.append) == [{"type": "config", "name": "x"}, {"run": 2}]
    assert len(warnings) == 4 and all("skipped" in w for w in warnings)
    log.append(str(path), {"run": 4})
    assert log.read(str(path), warn=warnings.append)[-1] == {"run": 4}


def test_append_refuses_nan_without_writing(tmp_path):
    path = tmp_path / "autoresearch.jsonl"
    log.append(str(path), {"run": 1})
    with pytest.raises(ValueError):
        log.append(str(path), {"run": 2, "metric": float("nan")})
    assert log.read(str(path)) == [{"run": 1}]
