"""A real night for the export tests, made by the real engine on a real git repo.

Segment 0 (loss, lower is better): the baseline measured three times (1.02, 1.00, 0.99: its
value is their median, 1.00, not its first measurement), a keep, a discard, a crash, a timeout,
a failed check (with a value better than the best), another discard, ASI on several runs. Segment 1 (after `init` again): a new baseline, a keep, a discard.
`tear()` then appends a torn line, as a killed writer leaves it.
"""

from helpers_engine import make_repo

BENCH = r"""#!/bin/bash
v=$(cat value.txt)
o=$(grep "^$AUTORESEARCH_RUN " MEASURED | cut -d' ' -f2)
if [ -n "$o" ]; then v=$o; fi
case "$v" in
  crash) echo "Traceback (most recent call last):" >&2; echo "RuntimeError: boom" >&2; exit 1 ;;
  hang) sleep 1000 ;;
  *) echo "METRIC loss=$v"; echo "METRIC peak_vram_mb=3072"; echo "METRIC tok_per_s=1000" ;;
esac
"""
INIT = ("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
        "--fixed", "bench.sh", "--timeout", "2")


def make_night(root):
    repo = make_repo(root, init_args=None)
    # What given runs measure ("RUN VALUE" lines), whatever value.txt says: the baseline's three
    # measurements. Outside the repo (a run executes in a snapshot of its commit, in a sandbox
    # that lets it read, not write, outside its run folder), in a folder its environment names.
    repo.outside_data(repo.root.parent)
    measured = repo.root.parent / "measured"
    measured.write_text("1 1.02\n2 1.00\n3 0.99\n")
    (repo.root / "bench.sh").write_text(BENCH.replace("MEASURED", str(measured)))
    repo.git("commit", "-qam", "the night's benchmark")
    flag = repo.root.parent / "checks-fail"
    checks = ("--checks", f"test ! -e {flag} || (echo 'unit test failed'; exit 1)")
    repo.ok(*INIT, *checks)
    rc, data = repo.json("run", "-q", "--baseline", "--repeat", "3", "-m", "baseline",
                         "--asi", '{"hypothesis": "the template as it is"}')
    assert rc == 0, data
    repo.experiment("0.90", "halve the batch", "--asi",
                    '{"hypothesis": "more optimizer steps in the budget", "next_action_hint": "try 4x"}')
    repo.experiment("0.95", "wider MLP")
    repo.experiment("crash", "bad shape", "--asi", '{"hypothesis": "a 3x MLP"}')
    repo.experiment("hang", "a loop that never ends")
    flag.write_text("x")
    repo.experiment("0.50", "better but breaks the tests", "--asi", '{"hypothesis": "skip the mask"}')
    flag.unlink()
    repo.experiment("0.93", "longer warmdown")
    repo.ok(*INIT)                                   # segment 1
    repo.experiment("0.93", "baseline after the new header")
    repo.experiment("0.80", "deeper model")
    repo.experiment("0.85", "more heads")
    return repo


def tear(repo):
    with open(repo.root / "autoresearch.jsonl", "ab") as f:
        f.write(b'{"run": 99, "status": "keep", "metr')

