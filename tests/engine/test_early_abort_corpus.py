"""Early abort, measured on a recorded night before it is trusted.

The corpus (tests/fixtures/early_abort/, a folder per night) is nights of the real ML template on
CPU (smoke profile): the baseline measured three times, then varied edits of train.py, each run's
steps file kept. benchmarks/early_abort_replay.py replays it through the rule; the figures in
references/early-abort.md must be the ones it gives, and early abort stays off by default unless
it stopped no eventual keep.
"""

import importlib.util
import json
import re

from conftest import ROOT
from helpers_engine import make_repo

CORPUS = ROOT / "tests" / "fixtures" / "early_abort"

# The recorded nights hold at least the 40 runs asked for (references/early-abort.md).
MIN_RUNS = 40


def _replay_module():
    spec = importlib.util.spec_from_file_location("early_abort_replay", ROOT / "benchmarks" / "early_abort_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_corpus_is_recorded_nights_with_their_steps_files():
    folders = sorted(p for p in CORPUS.iterdir() if (p / "manifest.json").exists())
    runs = [dict(r, folder=f) for f in folders for r in json.loads((f / "manifest.json").read_text())["runs"]]
    assert len(runs) >= MIN_RUNS
    statuses = {r["status"] for r in runs}
    assert {"keep", "discard"} <= statuses
    assert len({r["description"] for r in runs}) >= 40   # varied edits (the second night retries some)
    for r in runs:
        if r["status"] in ("keep", "discard"):
            lines = (r["folder"] / "runs" / str(r["run"]) / "steps.jsonl").read_text().splitlines()
            assert len(lines) >= 20 and all("loss" in json.loads(line) for line in lines)


def test_the_figures_in_the_reference_are_the_replays():
    replay = _replay_module()
    from autoresearch.pipeline import earlyabort
    result = replay.replay(CORPUS, earlyabort.Rule())
    doc = (ROOT / "references" / "early-abort.md").read_text()
    line = re.search(r"^Default rule: (.*)$", doc, re.M).group(1)
    assert line == replay.summary_line(result), (line, replay.summary_line(result))


def test_early_abort_is_off_by_default_unless_it_never_stops_a_keep(tmp_path):
    replay = _replay_module()
    from autoresearch.pipeline import earlyabort
    stopped_keeps = replay.replay(CORPUS, earlyabort.Rule())["stopped_keeps"]
    repo = make_repo(tmp_path / "r")
    header = repo.records()[0]
    if stopped_keeps:
        assert header["early_abort"] is None
    on = make_repo(tmp_path / "on", init_args=("--metric", "loss", "--command", "bash bench.sh", "--scope",
                                              "value.txt", "--early-abort"))
    assert on.records()[0]["early_abort"] == {"at": 0.4}
