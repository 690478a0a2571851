"""Score the diagnoser on the corpus of real failure logs from public issue threads.

    python -m gpu_train_debug.corpus [--dir tests/diagnosis/corpus] [--split train] [--failures] [--json]

For each log it runs `diagnose` with the ML template's train.py/prepare.py constants as the
config (so fixes name the template's constants) and the record's `profile`, then reports per
split: family accuracy, precision and coverage (below), and fix validity over the logs whose
thread found a fix (`expect`).

A wrong family is worse than UNKNOWN (the agent acts on it), so the two are counted apart:
- precision: of the answers that name a family (anything but UNKNOWN), the share that is the
  log's family. Naming a family for a log whose true family is UNKNOWN counts as wrong.
- coverage: of the logs whose true family is known (not UNKNOWN), the share that got a named
  answer at all (right or wrong).
- family accuracy: right answers over all logs (UNKNOWN for an UNKNOWN log is right).
`--failures` lists the misses of the chosen split only, so rules are tuned on `train` while
`heldout` stays unseen.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

from gpu_train_debug import config as config_reader
from gpu_train_debug.diagnose import diagnose

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_DIR = os.path.join(_ROOT, "tests", "diagnosis", "corpus")


@dataclass
class Case:
    id: str
    family: str
    split: str
    text: str
    expect: dict = None
    profile: dict = field(default_factory=dict)
    url: str = ""


@dataclass
class Outcome:
    case: Case
    family: str
    codes: list
    fix: dict
    explanation: str
    family_ok: bool
    fix_ok: bool = None  # None: the thread found no fix to check


def template_config(root=_ROOT):
    """The ML template's constants (prepare.py's, then train.py's), or {} when absent."""
    constants = {}
    for name in ("prepare.py", "train.py"):
        path = os.path.join(root, "assets", name)
        if os.path.isfile(path):
            found = config_reader.read_constants(path)
            found.pop("PROFILES", None)
            constants.update(found)
    return constants


def load(directory=DEFAULT_DIR):
    cases = []
    with open(os.path.join(directory, "corpus.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            with open(os.path.join(directory, row["id"] + ".log"), encoding="utf-8") as log:
                text = log.read()
            cases.append(Case(row["id"], row["family"], row.get("split", "train"), text,
                              row.get("expect"), row.get("profile") or {}, row.get("url", "")))
    return cases


def fix_valid(expect, result):
    """True when the diagnosis carries the fix the thread found (see the corpus README)."""
    fix = result["fix"]
    for name, value in (expect.get("fix") or {}).items():
        if fix.get(name) != value:
            return False
    if any(name not in fix for name in expect.get("fix_keys") or []):
        return False
    text = (result["explanation"] + " " + json.dumps(fix)).lower()
    return all(word.lower() in text for word in expect.get("says") or [])


def run(cases, config=None):
    config = template_config() if config is None else config
    outcomes = []
    for case in cases:
        profile = dict({"status": "crash"}, **case.profile)
        result = diagnose(case.text, dict(config), profile)
        outcome = Outcome(case, result["family"], result["codes"], result["fix"], result["explanation"],
                          result["family"] == case.family)
        if case.expect:
            outcome.fix_ok = fix_valid(case.expect, result)
        outcomes.append(outcome)
    return outcomes


def summarise(outcomes):
    table = {}
    for split in sorted({o.case.split for o in outcomes}):
        rows = [o for o in outcomes if o.case.split == split]
        fixes = [o for o in rows if o.fix_ok is not None]
        named = [o for o in rows if o.family != "UNKNOWN"]
        known = [o for o in rows if o.case.family != "UNKNOWN"]
        covered = [o for o in known if o.family != "UNKNOWN"]
        table[split] = {
            "logs": len(rows), "family_right": sum(o.family_ok for o in rows),
            "family_accuracy": round(sum(o.family_ok for o in rows) / len(rows), 3),
            "named": len(named), "named_right": sum(o.family_ok for o in named),
            "precision": round(sum(o.family_ok for o in named) / len(named), 3) if named else None,
            "known": len(known), "covered": len(covered),
            "coverage": round(len(covered) / len(known), 3) if known else None,
            "fixes_checked": len(fixes), "fix_valid": sum(bool(o.fix_ok) for o in fixes),
            "fix_validity": round(sum(bool(o.fix_ok) for o in fixes) / len(fixes), 3) if fixes else None,
        }
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpu_train_debug.corpus", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=DEFAULT_DIR, help="corpus folder (corpus.jsonl + <id>.log)")
    parser.add_argument("--split", default="train", help="split whose misses --failures lists")
    parser.add_argument("--failures", action="store_true", help="list the misses of --split")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.dir, "corpus.jsonl")):
        print(f"corpus: no corpus.jsonl in {args.dir} (pass --dir)", file=sys.stderr)
        return 2
    outcomes = run(load(args.dir))
    table = summarise(outcomes)
    if args.json:
        print(json.dumps(table))
        return 0
    for split, row in table.items():
        fix = f"{row['fix_valid']}/{row['fixes_checked']}" if row["fixes_checked"] else "-"
        precision = f"{row['precision']:.1%}" if row["precision"] is not None else "-"
        coverage = f"{row['coverage']:.1%}" if row["coverage"] is not None else "-"
        print(f"{split:<8} logs {row['logs']:>3}  family right {row['family_right']:>3} "
              f"({row['family_accuracy']:.1%})  precision {row['named_right']}/{row['named']} ({precision})  "
              f"coverage {row['covered']}/{row['known']} ({coverage})  fix valid {fix}")
    if args.failures:
        for o in outcomes:
            if o.case.split == args.split and (not o.family_ok or o.fix_ok is False):
                print(f"- {o.case.id}: expected {o.case.family}, got {o.family} {o.codes} fix={o.fix}"
                      f" fix_ok={o.fix_ok}\n    {o.explanation[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
