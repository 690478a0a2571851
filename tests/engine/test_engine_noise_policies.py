"""Noise measurement, the threshold, implausible gains, and the two opt-in policies."""

import json
import subprocess
import sys
import time

import pytest

from helpers_engine import engine_env, make_repo


class Sequence:
    """Make bench.sh report successive values from a queue file, to fake a noisy benchmark.
    The queue lives in a folder of its own outside the repository, declared a cache (`init
    --cache`): the benchmark runs in a snapshot of its commit, sandboxed, and writes nothing else
    of the user's."""

    def __init__(self, repo):
        self.repo = repo
        self.queue = repo.root.parent / f"{repo.root.name}-queue" / "queue"
        self.queue.parent.mkdir(exist_ok=True)
        (repo.root / "bench.sh").write_text(
            f"q='{self.queue}'\n"
            'v=$(head -n1 "$q"); sed -i 1d "$q"\n'
            'if [ "$v" = sleep ]; then sleep 30; fi; echo "METRIC loss=$v"\n')

    def feed(self, *values):
        self.queue.parent.mkdir(exist_ok=True)
        self.queue.write_text("".join(f"{v}\n" for v in values))


@pytest.fixture
def noisy(tmp_path):
    """factory(*init_args): a repo whose benchmark prints the values fed to it, one per run."""

    def factory(*init_args):
        repo = make_repo(tmp_path / "noisy", init_args=None)
        seq = Sequence(repo)
        repo.git("commit", "-qam", "queue bench")
        repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
                "--fixed", "bench.sh", "--cache", str(seq.queue.parent), *init_args)
        return repo, seq
    return factory


def test_baseline_repeat_measures_noise_and_sets_the_threshold(noisy):
    repo, seq = noisy()
    seq.feed(1.00, 1.02, 0.98)
    rc, data = repo.json("run", "-q", "--baseline", "--repeat", "3", "-m", "baseline x3")
    assert rc == 0
    records = data["records"]
    # Only the baseline keeps; its repeats are noise samples (discard), HEAD stays on it.
    assert [r["status"] for r in records] == ["keep", "discard", "discard"]
    assert [r["repeat_of"] for r in records] == [None, 1, 1]
    assert all("re-measurement of run 1's code (noise sample)" in r["reason"] for r in records[1:])
    assert len({r["commit"] for r in records}) == 1 and repo.head().startswith(records[0]["commit"])
    status = repo.status()
    # deviations from the median 1.00: 0, 0.02, 0.02 -> MAD 0.02, sigma 0.0297, threshold 2 sigma
    assert status["noise"]["samples"] == 3 and status["noise"]["mad"] == pytest.approx(0.02)
    threshold = status["noise"]["threshold"]
    assert threshold == pytest.approx(2 * 1.4826 * 0.02)
    assert status["best"]["metric"] == pytest.approx(1.00) and status["best"]["run"] == 1
    # A gain inside the threshold is discarded, one beyond it is kept; both record the threshold.
    seq.feed(0.97)
    small = repo.experiment("0.5", "small gain")
    assert small["status"] == "discard" and "within the noise threshold" in small["reason"]
    assert small["threshold"] == pytest.approx(threshold) and small["confidence"] == pytest.approx(
        0.03 / (1.4826 * 0.02), abs=1e-3)
    seq.feed(0.9)
    big = repo.experiment("0.6", "big gain")
    assert big["status"] == "keep" and big["confidence"] > 3
    # Each record carries the rule's parameters, and they give its threshold back.
    first = records[0]["rule"]
    assert first["source"] == "none" and first["sigma"] is None and records[0]["threshold"] == first["min_delta"] == 0
    for r in (small, big):
        rule = r["rule"]
        assert rule["source"] == "repeats" and rule["samples"] == 3 and rule["z"] == 2
        assert rule["sigma"] == pytest.approx(1.4826 * rule["mad"]) and rule["mad"] == pytest.approx(0.02)
        assert r["threshold"] == pytest.approx(max(rule["min_delta"], rule["z"] * rule["sigma"]))
    on_disk = [json.loads(line) for line in (repo.root / "autoresearch.jsonl").read_text().splitlines()]
    assert [r["rule"] for r in on_disk if r.get("run") in (small["run"], big["run"])] == [small["rule"], big["rule"]]


def test_init_noise_runs_repeats_the_baseline(noisy):
    repo, seq = noisy("--noise-runs", "2")
    seq.feed(1.0, 1.1)
    rc, data = repo.json("run", "-q", "-m", "baseline")
    assert rc == 0 and [r["status"] for r in data["records"]] == ["keep", "discard"]
    assert data["records"][1]["repeat_of"] == 1
    assert repo.status()["noise"]["mad"] == pytest.approx(0.05)
    assert repo.status()["best"]["metric"] == pytest.approx(1.05)  # the median of its measurements


def test_min_delta(noisy):
    repo, seq = noisy("--min-delta", "0.1")
    seq.feed(1.0, 0.95, 0.85)
    repo.experiment("0.1")
    assert repo.experiment("0.2")["status"] == "discard"
    assert repo.experiment("0.3")["status"] == "keep"


def test_higher_is_better(noisy):
    repo, seq = noisy("--direction", "higher")
    seq.feed(10, 9, 11)
    repo.experiment("0.1")
    assert repo.experiment("0.2")["status"] == "discard"
    assert repo.experiment("0.3")["status"] == "keep"


def test_implausible_gain_is_never_kept(noisy):
    repo, seq = noisy("--implausible-gain", "0.3")
    seq.feed(1.0, 0.5, 0.8)
    repo.experiment("0.1")
    record = repo.experiment("0.2", "too good to be true")
    assert record["status"] == "discard" and "implausible" in record["reason"]
    assert record["diagnosis"] is not None
    assert (repo.root / record["run_dir"] / "diagnosis.json").exists()
    assert repo.experiment("0.3", "plausible")["status"] == "keep"


def test_confirm_policy_keeps_a_confirmed_borderline_win(noisy):
    repo, seq = noisy("--confirm-borderline")
    seq.feed(1.0, 0.9, 0.92)
    repo.experiment("0.1")
    repo.set("0.2")
    rc, data = repo.json("run", "-q", "-m", "borderline")
    assert rc == 0
    first, second = data["records"]
    assert second["repeat_of"] == first["run"] and first["commit"] == second["commit"]
    # Exactly one keep per accepted change: the re-run is a noise sample of the kept code.
    assert (first["status"], second["status"]) == ("keep", "discard") and first["policy"] == "confirm"
    assert "re-measurement of run 2's code" in second["reason"] and repo.head().startswith(first["commit"])
    assert [r["status"] for r in repo.runs()].count("keep") == 2  # the baseline and this win
    assert repo.status()["consecutive_non_keeps"] == 0
    assert repo.status()["best"] == {"run": first["run"], "commit": first["commit"],
                                     "metric": pytest.approx(0.91), "description": "borderline"}


def test_confirm_policy_discards_an_unconfirmed_win(noisy):
    repo, seq = noisy("--confirm-borderline")
    seq.feed(1.0, 0.9, 1.2)
    repo.experiment("0.1")
    best = repo.head()
    repo.set("0.2")
    rc, data = repo.json("run", "-q", "-m", "lucky")
    first, second = data["records"]
    assert first["status"] == second["status"] == "discard"
    assert "not confirmed" in first["reason"] and repo.head() == best


def test_confirm_policy_leaves_clear_wins_alone(noisy):
    repo, seq = noisy("--confirm-borderline", "2")
    seq.feed(1.0, 1.02, 0.98, 0.5)
    repo.json("run", "-q", "--baseline", "--repeat", "3", "-m", "noise")
    record = repo.experiment("0.1", "clear win")  # gain 0.5 >> 2 x threshold 0.059
    assert record["status"] == "keep" and record["policy"] is None and len(repo.runs()) == 4


def test_simplicity_policy(noisy):
    repo, seq = noisy("--simplicity")
    (repo.root / "value.txt").write_text("a\nb\nc\n")
    seq.feed(1.0, 1.0, 1.0)
    repo.json("run", "-q", "-m", "baseline")
    (repo.root / "value.txt").write_text("a\nb\nc\nd\n")
    assert repo.json("run", "-q", "-m", "more code, same result")[1]["record"]["status"] == "discard"
    (repo.root / "value.txt").write_text("a\nb\n")
    record = repo.json("run", "-q", "-m", "less code, same result")[1]["record"]
    assert record["status"] == "keep" and record["policy"] == "simplicity"
    assert "scope shrinks from 3 to 2 lines" in record["reason"]


def test_without_simplicity_a_tie_that_shrinks_is_discarded(noisy):
    repo, seq = noisy()
    (repo.root / "value.txt").write_text("a\nb\nc\n")
    seq.feed(1.0, 1.0)
    repo.json("run", "-q", "-m", "baseline")
    (repo.root / "value.txt").write_text("a\n")
    assert repo.json("run", "-q", "-m", "less code")[1]["record"]["status"] == "discard"


def test_remeasuring_the_best_code(noisy):
    repo, seq = noisy()
    seq.feed(1.0, 0.8, 0.82)
    repo.experiment("0.1")
    repo.experiment("0.2")
    head = repo.head()
    record = repo.json("run", "-q", "--baseline", "-m", "re-measure")[1]["record"]
    assert record["repeat_of"] == 2 and record["status"] == "discard"
    assert "re-measurement of run 2's code (noise sample)" in record["reason"] and repo.head() == head
    status = repo.status()
    assert status["counts"]["discard"] == 1 and status["remeasurements"] == 1
    assert status["consecutive_non_keeps"] == 0  # a noise sample is not a failed idea
    assert status["best"]["run"] == 2 and status["best"]["metric"] == pytest.approx(0.81)
    assert status["noise"]["samples"] == 2


def test_engine_killed_during_a_confirmation_rerun(noisy):
    repo, seq = noisy("--confirm-borderline")
    seq.feed(1.0, 0.9, "sleep")
    repo.experiment("0.1")
    best = repo.head()
    repo.set("0.2")
    engine = subprocess.Popen([sys.executable, "-m", "autoresearch", "run", "-q", "-m", "borderline"],
                              cwd=repo.root, env=engine_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    current = repo.root / ".autoresearch/current.json"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            data = json.loads(current.read_text())
            if data.get("pending") and data.get("child_pid"):
                break
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.02)
    else:
        raise AssertionError("the confirmation re-run never started")
    engine.kill()
    engine.wait()
    repo.status()
    first, second = repo.runs()[-2:]
    assert first["metric"] == 0.9 and first["status"] == "discard" and "interrupted" in first["reason"]
    assert second["status"] == "crash" and second["repeat_of"] == first["run"]
    assert repo.head() == best


def test_forced_rerun_of_unchanged_code_is_a_noise_sample_never_a_keep(noisy):
    """A tie with itself used to be kept (`KEEP (+0 vs best)`); ties never keep."""
    repo, seq = noisy()
    seq.feed(1.0, 1.0, 0.7)
    repo.experiment("0.1")
    head = repo.head()
    rc, data = repo.json("run", "-q", "--force", "-m", "same")
    record = data["record"]
    assert rc == 0 and record["status"] == "discard" and record["repeat_of"] == 1
    assert "re-measurement of run 1's code (noise sample)" in record["reason"]
    assert repo.head() == head and repo.status()["best"]["run"] == 1
    tsv = repo.ok("export", "--tsv", "-").stdout.splitlines()
    assert tsv[2].split("\t")[3] == "discard" and tsv[2].endswith("(re-measurement of run 1)")
    assert "1 re-measurement of kept code (noise samples, not counted)" in repo.ok("status").stdout
    # The noise sample feeds the next decision: noise 0 here, so a real gain keeps.
    assert repo.experiment("0.2")["status"] == "keep"
