"""The hidden holdout through the engine: `verify` and the person's report show it, with the
warning when the kept chain improved validation but not the holdout; nothing the agent reads has it.

The benchmark stands in for the ML harness's contract: it prints `METRIC loss=<validation>` and
writes `{"holdout_bpb": <holdout>}` into `$AUTORESEARCH_RUN_DIR/holdout.json`. `value.txt` (the
scope) holds the validation value; the holdout of each comes from a file outside the repo (as the
real holdout comes from data the agent never sees). tests/template runs the real harness.
"""

import html
import json
import sys

from agent_outputs import collect, leaks
from conftest import ROOT
from helpers_engine import make_repo

# Repeated runs of the same code differ a little: a jitter by run number (-1, 0, +1 thousandths).
BENCH = r"""#!/bin/bash
v=$(cat value.txt)
h=$(grep "^$v " HIDDEN | cut -d' ' -f2)
j=$(( AUTORESEARCH_RUN % 3 - 1 ))
echo "training"
python3 -c "import sys; j = int(sys.argv[1]) / 1000; print(f'{float(sys.argv[2]) + j:.7f} {float(sys.argv[3]) + j:.7f}')" \
  "$j" "$v" "$h" > "$AUTORESEARCH_RUN_DIR/values"
read -r val hold < "$AUTORESEARCH_RUN_DIR/values"
rm "$AUTORESEARCH_RUN_DIR/values"
printf '{"holdout_bpb": %s, "tokens": 4096}\n' "$hold" > "$AUTORESEARCH_RUN_DIR/holdout.json"
echo "METRIC loss=$val"
"""


def holdout_repo(tmp_path, steps):
    root = tmp_path / "research"
    repo = make_repo(root, init_args=None, value=steps[0].split(":")[0])
    repo.outside_data(tmp_path)
    hidden = tmp_path / "hidden.txt"
    hidden.write_text("".join(f"{s.replace(':', ' ')}\n" for s in steps))
    (root / "bench.sh").write_text(BENCH.replace("HIDDEN", str(hidden)))
    repo.git("commit", "-qam", "holdout benchmark")
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh",
            "--noise-runs", "3")
    return repo


def night(repo, steps):
    outputs = []
    for value in steps:
        value = value.split(":")[0]
        repo.set(value)
        proc = repo.cli("run", "-m", f"value {value}")
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)
    return outputs


def verify(repo):
    rc, data = repo.json("verify")
    assert rc == 0
    return data


# The baseline, measured 3 times (runs 1-3: jitter 0, +1, -1 thousandths), then two changes that
# gain on validation (runs 4 and 5: jitter 0, +1).
BASELINE = ["1.000:0.9871234"]


def test_a_validation_only_gain_is_warned_about_and_never_reaches_the_agent(tmp_path):
    steps = BASELINE + ["0.950:0.9912345", "0.900:0.9934567"]
    repo = holdout_repo(tmp_path, steps)
    outputs = night(repo, steps)
    data = verify(repo)
    assert [r["run"] for r in data["rows"]] == [1, 4, 5]
    assert [r["holdout"] for r in data["rows"]] == [0.9871234, 0.9912345, 0.9944567]
    assert data["validation_gain"] > data["validation_threshold"]
    assert data["holdout_noise"] == "repeats" and data["holdout_gain"] < 0
    assert data["warning"].startswith("the night fitted the validation set")
    text = repo.cli("verify").stdout
    assert "WARNING: the night fitted the validation set" in text and "0.994457" in text
    values = [0.9871234, 0.9881234, 0.9861234, 0.9912345, 0.9944567]
    assert leaks(collect(repo.root, outputs), values) == []
    # The person's page has the table and the warning.
    proc = repo.cli("report", "--holdout")
    assert proc.returncode == 0, proc.stderr
    page = (repo.root / ".autoresearch" / "holdout-report.html").read_text()
    assert "the night fitted the validation set" in page and "0.9944567" in page
    # Drawn in a real browser: the table of kept runs and the warning, with no errors.
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from report_browser import dump_dom, root_attributes
    dom, console = dump_dom((repo.root / ".autoresearch" / "holdout-report.html").as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert attrs.get("data-ready") == "1" and json.loads(html.unescape(attrs.get("data-errors", "[]"))) == [], attrs
    box = dom[dom.index('id="holdout-box"'):dom.index('id="waves-box"')]
    assert "hidden" not in box.split(">")[0] and "Warning: the night fitted the validation set" in box
    assert box.count("<tr>") == 4 and "0.9944567" in box, box


def test_gains_that_transfer_raise_no_warning(tmp_path):
    steps = BASELINE + ["0.950:0.9412345", "0.900:0.8934567"]
    repo = holdout_repo(tmp_path, steps)
    night(repo, steps)
    data = verify(repo)
    assert data["holdout_gain"] > data["holdout_threshold"] and data["warning"] is None
    assert "no sign of fitting the validation set" in repo.cli("verify").stdout


def test_verify_without_holdout_files_says_it_cannot_compare(tmp_path):
    repo = make_repo(tmp_path / "plain")
    repo.experiment("1.0")
    repo.experiment("0.5")
    data = verify(repo)
    assert [r["holdout"] for r in data["rows"]] == [None, None] and data["warning"] is None
    assert "not enough to compare" in repo.cli("verify").stdout
    assert json.loads(repo.cli("verify", "--json").stdout)["rows"][1]["validation"] == 0.5
