"""A metric named `...fingerprint` is what the benchmark measured *on* (the ML template's data,
tokenizer and evaluation settings), not a result: a run that prints another value than its
segment's first run is recorded with its value and never compared, so better-looking numbers from
easier data (prepared again between runs) are never kept."""

from helpers_engine import make_repo

BENCH = """v=$(cat value.txt)
echo "METRIC loss=$v"
echo "METRIC settings_fingerprint=$(cat '{fp}')"
"""


def test_a_run_on_other_data_is_recorded_and_never_kept(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    repo.outside_data(tmp_path)
    fp = tmp_path / "fingerprint"            # outside the repo: the data cache stands in here
    fp.write_text("228790876542091\n")
    (repo.root / "bench.sh").write_text(BENCH.format(fp=fp))
    repo.git("commit", "-qam", "bench prints its fingerprint")
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
    base = repo.experiment("1.0", "baseline", "--baseline")
    assert base["status"] == "keep" and base["metrics"]["settings_fingerprint"] == 228790876542091
    same = repo.experiment("0.9", "a real gain on the same data")
    assert same["status"] == "keep"
    fp.write_text("1\n")                     # the data prepared again, differently
    other = repo.experiment("0.5", "far better, on other data")
    assert other["status"] == "checks_failed" and other["metric"] == 0.5   # the value is kept, not judged
    assert other["reason"].startswith("not comparable: settings_fingerprint is 1, the segment's first run "
                                      "printed 228790876542091")
    status = repo.status()
    assert status["best"]["run"] == same["run"] and status["best"]["metric"] == 0.9
    assert repo.head().startswith(same["commit"])
    fp.write_text("228790876542091\n")        # put back as it was: compared again
    back = repo.experiment("0.8", "a gain on the baseline's data")
    assert back["status"] == "keep"
