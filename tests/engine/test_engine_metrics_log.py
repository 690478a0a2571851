"""Property tests: the METRIC parser on arbitrary text, the log reader on torn and garbage lines."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from autoresearch import metrics
from autoresearch.store import log

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


@given(names, st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "0x1F", "1_000", "1e999", "1e309", "--1", "\uff10.\uff15",
                               "1.5ms", "", "1,5"]))
def test_bad_values_are_ignored_with_a_warning(name, bad):
    found, warnings = metrics.parse(f"METRIC {name}={bad}\n")
    assert name not in found
    if bad:
        assert len(warnings) == 1 and name in warnings[0]


@pytest.mark.parametrize("line", ["METRIC x = 1", "METRIC 1x=2", "METRIC", "METRIC  loss=1 extra"])
def test_a_metric_line_off_the_grammar_is_ignored_with_a_warning(line):
    found, warnings = metrics.parse(f"METRIC ok=1\n{line}\nMETRICS: done\n")
    assert found == {"ok": 1.0}
    assert len(warnings) == 1 and "not `METRIC name=value`" in warnings[0] and line.split()[0] in warnings[0]


def test_grammar_details():
    found, _ = metrics.parse("METRIC  a=1\nMETRIC b=2 \r\nMETRICc=3\n METRIC d=4\nMETRIC e = 5\n"
                             "progress 10%\rMETRIC f=.5e1\nMETRIC g.h=-3\nMETRIC(train.py) i=1\n")
    assert found == {"a": 1.0, "b": 2.0, "d": 4.0, "f": 5.0, "g.h": -3.0}


# A "leaked ..." warning of the kind printed at interpreter exit (the audit of the uv route saw
# triton's glued onto the first METRIC line, `...refleaks.htmlMETRIC val_bpb=0.18`); the text is
# Python's resource_tracker wording, written here, not a captured log.
LEAKED = ("/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: "
          "There appear to be 1 leaked semaphore objects to clean up at shutdown; see "
          "https://docs.python.org/3/library/multiprocessing.html#multiprocessing-refleaks.html")


def test_a_metric_token_after_text_without_a_newline_counts():
    found, warnings = metrics.parse(f"{LEAKED}METRIC val_bpb=0.18\nMETRIC num_steps=12\n")
    assert found == {"val_bpb": 0.18, "num_steps": 12.0} and warnings == []
    found, warnings = metrics.parse("noiseMETRIC x = 1\n")
    assert found == {} and len(warnings) == 1


@pytest.mark.parametrize("value", ["１２", "٣", "0.５", "1e999", "-1e400"])
def test_only_ascii_finite_decimals_count(value):
    found, warnings = metrics.parse(f"METRIC v={value}\n")
    assert found == {} and len(warnings) == 1


def test_a_huge_finite_value_is_a_value():
    found, _ = metrics.parse("METRIC v=2e306\nMETRIC w=-2e306\n")
    assert found == {"v": 2e306, "w": -2e306}


# Free-form lines (neither config nor run: no "type" or "run" key) are kept as they are.
records = st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("run", "type")), st.one_of(st.none(), st.booleans(), finite, st.text(max_size=20)),
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
    config = {"type": "config", "name": "x", "metricName": "loss", "bestDirection": "lower"}
    path.write_bytes(json.dumps(config).encode() +
                     b'\n{"run":1\n\xff\xfe\n[1,2]\n\n{"run":2,"status":"keep"}\n{"run":3')
    warnings = []
    assert log.read(str(path), warn=warnings.append) == [config, {"run": 2, "status": "keep"}]
    assert len(warnings) == 4 and all("skipped" in w for w in warnings)
    log.append(str(path), {"run": 4, "status": "crash"})
    assert log.read(str(path), warn=warnings.append)[-1] == {"run": 4, "status": "crash"}


@pytest.mark.parametrize("line, why", [
    (b'{"run":51,"status":"keep","metric":NaN}', "NaN is not strict JSON"),
    (b'{"run":52,"status":"keep","metric":Infinity}', "Infinity is not strict JSON"),
    (b'{"run":"x","status":"keep","metric":"abc"}', "not a whole number"),
    (b'{"run":0,"status":"keep","metric":1}', "not a whole number"),
    (b'{"run":true,"status":"keep","metric":1}', "not a whole number"),
    (b'{"run":50,"status":"weird"}', "status 'weird'"),
    (b'{"run":53,"status":"keep","metric":"1.0"}', "not a finite number"),
    (b'{"run":54,"status":"keep","metric":1,"metrics":{"a":"x"}}', "metrics is not an object"),
    (b'{"run":55,"status":"keep","metric":1,"segment":"0"}', "segment"),
    (b'{"type":"config","name":"x","bestDirection":"lower"}', "without a metricName"),
    (b'{"type":"config","metricName":"loss","bestDirection":"up"}', "bestDirection 'up'"),
])
def test_reader_skips_invalid_records_with_a_warning(tmp_path, line, why):
    path = tmp_path / "autoresearch.jsonl"
    good = {"run": 1, "status": "keep", "metric": 1.0, "metrics": {"loss": 1.0}, "segment": 0}
    path.write_bytes(json.dumps(good).encode() + b"\n" + line + b"\n")
    warnings = []
    assert log.read(str(path), warn=warnings.append) == [good]
    assert len(warnings) == 1 and "skipped" in warnings[0] and why in warnings[0]


def test_invalid_records_are_not_counted_or_exported(tmp_path):
    """status, brief and export all read the same records: a bad line is in none of them."""
    from helpers_engine import make_repo
    repo = make_repo(tmp_path / "r")
    repo.experiment("1.0")
    with open(repo.root / "autoresearch.jsonl", "ab") as f:
        f.write(b'{"run":51,"status":"keep","metric":NaN}\n{"run":"x","status":"keep","metric":"abc"}\n'
                b'{"run":50,"status":"weird"}\n')
    status = repo.status()
    assert status["runs"] == 1 and status["counts"]["keep"] == 1
    assert "weird" not in repo.ok("brief").stdout
    tsv = repo.ok("export", "--tsv", "-")
    assert tsv.stdout.count("\n") == 2 and "nan" not in tsv.stdout
    assert tsv.stderr.count("skipped invalid record") + tsv.stderr.count("skipped malformed") == 3
    assert repo.experiment("0.9")["run"] == 2


def test_append_sanitises_what_strict_json_cannot_hold(tmp_path):
    """A record is never lost to its content: NaN becomes null, a lone surrogate U+FFFD/?."""
    path = tmp_path / "autoresearch.jsonl"
    log.append(str(path), {"run": 1, "status": "keep", "metric": 1.0})
    warnings = []
    log.append(str(path), {"run": 2, "status": "crash", "metric": float("nan"), "asi": {"k": "\ud800"}},
               warn=warnings.append)
    second = log.read(str(path))[1]
    assert second["metric"] is None and second["asi"]["k"] != "\ud800" and len(warnings) == 1


def test_run_says_why_a_metric_line_off_the_grammar_was_not_taken(tmp_path):
    from helpers_engine import make_repo
    repo = make_repo(tmp_path / "r")
    repo.set("= 0.9")  # bench.sh prints `METRIC loss== 0.9`
    proc = repo.cli("run", "-q", "-m", "spaces", "--json")
    record = json.loads(proc.stdout)["record"]
    assert record["status"] == "crash" and "not `METRIC name=value`" in record["reason"]
    assert proc.stderr == ""   # under --json the warning is in the object, not on stderr
    assert any("warning: run 1: ignored 'METRIC loss== 0.9'" in w for w in json.loads(proc.stdout)["warnings"])
