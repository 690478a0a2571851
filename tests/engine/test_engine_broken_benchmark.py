"""A benchmark that prints the wrong METRIC name is a way forward, not a dead end.

The case from the issue: the benchmark printed `METRIC time=1.5` while the segment's metric is
`seconds`. The crash names what was printed and the likely name, the next step points at the
benchmark, the refusal to run with a changed benchmark says how to repair it (a new segment),
and following that advice works.
"""

import shlex
import subprocess

from helpers_engine import make_repo

WRONG = "#!/bin/bash\necho \"took $(cat value.txt) s\"\necho \"METRIC time=$(cat value.txt)\"\necho 'METRIC mem_mb=12'\n"
RIGHT = "#!/bin/bash\necho \"METRIC seconds=$(cat value.txt)\"\n"


def test_wrong_metric_name_is_named_and_the_repair_is_a_new_segment(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None, value="1.5")
    (repo.root / "bench.sh").write_text(WRONG)
    repo.git("commit", "-qam", "a benchmark that prints the wrong name")
    repo.ok("init", "--metric", "seconds", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")

    proc = repo.cli("run", "-q", "-m", "baseline")
    assert proc.returncode == 0, proc.stderr
    record = repo.runs()[-1]
    assert record["status"] == "crash"
    assert record["reason"] == ("the benchmark printed METRIC `mem_mb`, `time` but not `seconds`, the metric of "
                                "this segment; did you mean `time`?")
    next_step = [line for line in proc.stdout.splitlines() if line.startswith("next:")]
    assert len(next_step) == 1 and "the benchmark (`bash bench.sh`)" in next_step[0]
    assert "edit value.txt" not in proc.stdout
    assert "bench.sh is fixed" in next_step[0] and "start a new segment" in next_step[0]

    # fixing the (fixed) benchmark: `run` refuses, and says how to repair it on purpose
    (repo.root / "bench.sh").write_text(RIGHT)
    refused = repo.cli("run", "-q", "-m", "baseline again")
    assert refused.returncode == 3
    message = refused.stderr.strip()
    assert "to repair bench.sh on purpose, commit the fix and start a new segment" in message
    command = message.split("`")[-2]
    assert command.startswith("autoresearch init --metric seconds ")

    # following the advice: commit the fix, run the printed command, measure a new baseline
    repo.git("commit", "-qam", "bench.sh prints seconds")
    args = shlex.split(command)[1:]
    assert repo.cli(*args).returncode == 0
    proc = repo.cli("run", "-q", "-m", "baseline with the repaired benchmark")
    assert proc.returncode == 0, proc.stderr
    status = repo.status()
    assert status["segment"] == 1 and status["counts"]["keep"] == 1 and status["baseline"]["metric"] == 1.5


def test_no_metric_at_all_points_at_the_benchmark_output(tmp_path):
    repo = make_repo(tmp_path / "r", value="nometric")
    proc = repo.cli("run", "-q", "-m", "baseline")
    assert repo.runs()[-1]["reason"] == "no valid METRIC loss=<number> line in the output"
    assert "next: the benchmark (`bash bench.sh`) must print a line `METRIC loss=<number>`" in proc.stdout
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo.root, capture_output=True,
                          text=True).stdout == ""


def test_a_crash_of_the_code_still_points_at_the_scope(tmp_path):
    repo = make_repo(tmp_path / "r")
    repo.ok("run", "-q", "-m", "baseline")
    repo.set("crash")
    proc = repo.cli("run", "-q", "-m", "break it")
    assert repo.runs()[-1]["reason"] == "exit 1"
    assert proc.stdout.splitlines()[-1] == 'next: edit value.txt, then autoresearch run -m "what you changed"'
