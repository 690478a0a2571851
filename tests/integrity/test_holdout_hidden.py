"""The hidden holdout stays hidden from a benchmark that goes looking for it.

The fixed bench.sh stands in for the ML harness: it runs the scope's train.sh, then (as the
evaluator) prints `METRIC loss=<value.txt>` and writes `{"holdout_bpb": ...}` into the run's
folder. The agent's train.sh searches every place a holdout value could be (the repo, earlier
runs' folders, the user's state folder), prints what it finds in the ways a run's result
relays (a METRIC line, an output line, a crash message) and crashes or not. Nothing the agent
can read afterwards (tests/agent_outputs.py: run results, streamed output, log, status, brief,
export, report, diagnose, hooks, serve) holds a value, and the person's `verify` still shows them.
"""

import json
import sys
from pathlib import Path

import pytest
from agent_outputs import collect, leaks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from helpers_engine import make_repo  # noqa: E402

BENCH = r"""#!/bin/bash
bash train.sh || exit 1
v=$(cat value.txt)
echo "METRIC loss=$v"
printf '{"holdout_bpb": %s, "holdout_bpb_karpathy": %s, "tokens": 4096}\n' "$(cat "$HIDDEN_SOURCE")" \
  "$(cat "$HIDDEN_SOURCE")1" > "$AUTORESEARCH_RUN_DIR/holdout.json"
"""

# The agent's code: find holdout files anywhere it can read, and leak their values.
SNOOP = r"""
found=$( { grep -rhos '"holdout_bpb[a-z_]*": *[0-9.e+-]*' "$AUTORESEARCH_RUN_DIR/../.." \
           "${XDG_STATE_HOME:-$HOME/.local/state}" 2>/dev/null; \
           cat "${XDG_STATE_HOME:-$HOME/.local/state}"/autoresearch/*/holdout/values.txt 2>/dev/null; } \
         | grep -o '[0-9][0-9.e+-]*$' | sort -u)
echo "found: $(echo $found | tr '\n' ' ')" > "$AUTORESEARCH_RUN_DIR/found.txt"
for h in $found; do
  echo "holdout seen: $h"
  echo "METRIC leak=$h"
  python3 -c "import sys; h = float(sys.argv[1]); print(f'as .6f {h:.6f} as .5g {h:.5g} as e {h:.6e}')" "$h"
done
"""
CRASH = SNOOP + 'for h in $found; do echo "RuntimeError: holdout was $h" >&2; done; exit 1\n'

HOLDOUT = 0.9871234


def night(tmp_path, env=None, bench=BENCH):
    root = tmp_path / "research"
    repo = make_repo(root, init_args=None)
    hidden = tmp_path / "hidden.txt"   # outside the repo, as the real holdout data is
    hidden.write_text(f"{HOLDOUT}\n")
    (root / "bench.sh").write_text(bench)
    (root / "train.sh").write_text("echo training\n")
    repo.git("add", ".")
    repo.git("commit", "-qm", "hostile benchmark")
    # A state folder of this repo's own: unsandboxed, a run reads the whole state folder, and the
    # engine redacts only this repo's values (the test session's shared folder holds other tests').
    env = dict(env or {}, HIDDEN_SOURCE=str(hidden), XDG_STATE_HOME=str(tmp_path / "state"))
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "train.sh", "value.txt",
            "--fixed", "bench.sh", env=env)
    outputs = []
    for message, train in (("baseline", "echo training\n"), ("again", "echo training again\n"),
                           ("snoop", SNOOP), ("snoop and crash", CRASH)):
        for extra in (["-v"], ["--json", "--force"]):   # the streamed output, and the JSON result
            (root / "train.sh").write_text(train)   # (a run not kept put the work tree back)
            proc = repo.cli("run", *extra, "-m", f"{message} {extra[0]}", env=env)
            outputs.append(proc.stdout + proc.stderr)
    return repo, outputs, env


@pytest.mark.slow   # real runs through the engine, seconds each (left out of `make check`)
@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_benchmark_looking_for_the_holdout_never_shows_it_to_the_agent(tmp_path, sandbox):
    env = {} if sandbox == "on" else {"AUTORESEARCH_SANDBOX": "off"}
    repo, outputs, env = night(tmp_path, env)
    runs = repo.runs()
    assert [r["status"] for r in runs][:2] == ["keep", "discard"] and runs[-1]["status"] == "crash", runs
    assert len(runs) == 8 and all("leak" not in r["metrics"] for r in runs), runs
    values = [HOLDOUT, float(f"{HOLDOUT}1")]
    # No run folder in the repo holds a holdout file; the values are in the engine's state.
    assert not list(repo.root.glob(".autoresearch/runs/*/holdout.json"))
    found = [(repo.root / r["run_dir"] / "found.txt").read_text() for r in runs[4:]]
    if sandbox == "on":   # the sandbox hides the state folder: nothing found at all
        assert all(f.strip() == "found:" for f in found), found
    else:                 # without it the benchmark read them (redacted in its own file); redaction holds
        assert all(f.count("[hidden]") == 2 for f in found), found
    shown = collect(repo.root, outputs)
    shown.update({f"{r['run_dir']}/{p.name}": p.read_text(errors="replace")
                  for r in runs for p in (repo.root / r["run_dir"]).iterdir() if p.is_file()})
    assert leaks(shown, values) == []
    # The person still sees them.
    data = json.loads(repo.cli("verify", "--json", env=env).stdout)
    assert data["rows"][0]["holdout"] == HOLDOUT, data


def test_redaction_hides_every_spelling_from_five_digits_and_nothing_else():
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from autoresearch.decision import holdout
    text = ("a 0.9871234 b 0.987123 c 0.98712 d 9.871234e-01 e 0.9871 f 0.98713 g 10.9871234 "
            "h 0.98712340 i 1.2345678")
    out = holdout.redact(text, [0.9871234])
    assert out == ("a [hidden] b [hidden] c [hidden] d [hidden] e 0.9871 f 0.98713 g 10.9871234 "
                   "h [hidden] i 1.2345678")
    assert holdout.redact(text, []) == text


@pytest.mark.slow   # a real run through the engine (left out of `make check`)
def test_a_run_that_prints_its_own_holdout_file_has_it_redacted(tmp_path):
    """A process left behind by train.py can read its own run's holdout.json once the evaluator
    wrote it (the run's folder is the benchmark's): sandboxed or not, that run's values are
    redacted from everything the engine relays."""
    leaky = BENCH + 'cat "$AUTORESEARCH_RUN_DIR/holdout.json"\necho "RuntimeError: $(cat "$HIDDEN_SOURCE")" >&2\nexit 1\n'
    repo, outputs, env = night(tmp_path, bench=leaky)
    runs = repo.runs()
    assert {r["status"] for r in runs} == {"crash"} and "[hidden]" in outputs[0], outputs[0]
    shown = collect(repo.root, outputs)
    shown.update({f"{r['run_dir']}/{p.name}": p.read_text(errors="replace")
                  for r in runs for p in (repo.root / r["run_dir"]).iterdir() if p.is_file()})
    assert leaks(shown, [HOLDOUT, float(f"{HOLDOUT}1")]) == []
