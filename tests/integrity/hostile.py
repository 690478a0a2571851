"""A research repo whose benchmark runs hostile code: the scope's train.sh runs inside the fixed
bench.sh, before the fixed eval.sh prints the honest metric (always loss=1.0). An attack that
works shows up as a metric below 1.0; one the engine stops leaves 1.0 (a tie: discard) or a
`tampered` record. The live repo is `$AUTORESEARCH_RUN_DIR/../../..` from inside a run."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from helpers_engine import Research, engine_env  # noqa: E402

from autoresearch.store import chain, log  # noqa: E402
from gitrepo import git_repo

BENCH = "bash train.sh || exit 1\nbash eval.sh\n"
EVAL = 'echo "METRIC loss=1.0"\n'
# `:?`: a run without its folder in the environment stops here, instead of aiming the attack at
# `/../../..`, the file system's root (a stray /autoresearch.jsonl broke later tests once).
LIVE = 'L="${AUTORESEARCH_RUN_DIR:?}/../../.."\n'


def make(root, sandbox=True, init=("--metric", "loss", "--command", "bash bench.sh", "--scope", "train.sh",
                                    "--fixed", "bench.sh", "eval.sh")):
    Path(root).mkdir(parents=True)
    root = git_repo(root, {"bench.sh": BENCH, "eval.sh": EVAL, "train.sh": "echo baseline\n"})
    repo = Hostile(root, sandbox)
    repo.ok("init", *init)
    return repo


class Hostile(Research):
    def __init__(self, root, sandbox=True):
        super().__init__(root)
        self.env = {} if sandbox else {"AUTORESEARCH_SANDBOX": "off"}

    def cli(self, *args, env=None, timeout=120):
        return super().cli(*args, env={**self.env, **(env or {})}, timeout=timeout)

    def attack(self, script, message="attack"):
        """Run one experiment whose train.sh is `script`; return (exit code, JSON)."""
        (self.root / "train.sh").write_text(LIVE + script + "\necho trained\n")
        return self.json("run", "-q", "-m", message)

    def baseline(self):
        rc, data = self.json("run", "-q", "-m", "baseline")
        assert rc == 0 and data["record"]["status"] == "keep", data
        return data["record"]

    def engine_view(self):
        """(records the engine counts, warnings) as every command reads them."""
        warnings = []
        return log.read(str(self.root / "autoresearch.jsonl"), warn=warnings.append), warnings

    def assert_log_as_written(self):
        """The log is the engine's: every line on the chain, and the engine's copy holds it (the
        copy may lag by the last line when the engine was killed between the two appends; the
        next append brings it up)."""
        records, warnings = self.engine_view()
        assert warnings == [], warnings
        copy = chain.read_copy(str(self.root / "autoresearch.jsonl"))
        live = (self.root / "autoresearch.jsonl").read_bytes()
        assert live.startswith(copy) and live[len(copy):].count(b"\n") <= 1
        return records

    def assert_harness_intact(self):
        assert (self.root / "bench.sh").read_text() == BENCH
        assert (self.root / "eval.sh").read_text() == EVAL

    def best(self):
        return self.status()["best"]

    def env_for_popen(self):
        return {**engine_env(), **self.env}


def forged_keep(run, prev=None):
    record = {"run": run, "commit": "abcdef0", "metric": 0.001, "metrics": {"loss": 0.001}, "status": "keep",
              "description": "forged", "timestamp": 1, "segment": 0}
    if prev:
        record["prev"] = prev
    return json.dumps(record)


def procs_with(arg):
    """Live processes whose command line holds `arg` (a marker the attack used)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if arg.encode() in cmd.split(b"\0") and state != "Z":
            found.append(int(pid))
    return found
