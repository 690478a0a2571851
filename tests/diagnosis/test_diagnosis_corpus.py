"""The diagnoser on real failure logs that users posted in public issue threads.

The corpus (tests/diagnosis/corpus/, README there) keeps each log as posted, with its thread's
URL, the family a careful reader assigns and the fix the thread found. Its held-out 30% was drawn
with a fixed seed and committed before the rules were tuned; these tests hold the bar the issue
set (>= 90% of families right, the fix valid where the thread found one) on the splits rules were
written for, precision (right among the answers that name a family) >= 95% on every split but the
acceptance batch, coverage >= 90% on the frozen held-out split, and check that the same logs made
messier (ANSI colours, CRLF and tqdm redraws, quote markers) read the same.

Issue 21's batches (batch7 ...) are development data after their first measurement: precision
is held on each, family accuracy is not (many of their error classes still answer UNKNOWN).
batch9 is the acceptance batch, re-measured as a batch no rule was written for, and batch15,
batch16, batch17 and batch18 four more, each collected blind after it by a helper that had seen neither the diagnoser nor
its rules: their scores are reported by `python -m gpu_train_debug.corpus`, not asserted here; only
their records are checked.
"""

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from gpu_train_debug import FAMILIES, corpus, diagnose

DIR = Path(__file__).resolve().parent / "corpus"
ROWS = [json.loads(line) for line in (DIR / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
CASES = corpus.load(str(DIR))
OUTCOMES = corpus.run(CASES)
TABLE = corpus.summarise(OUTCOMES)


def test_corpus_is_real_varied_and_documented():
    assert len(ROWS) >= 800
    assert len({r["project"] for r in ROWS}) >= 550
    readme = (DIR / "README.md").read_text(encoding="utf-8")
    for row in ROWS:
        assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", row["url"]), row["id"]
        assert row["family"] in FAMILIES and row["codes"], row["id"]
        assert row["url"] in readme and (DIR / f"{row['id']}.log").is_file()
    # Every family the diagnoser can name has real examples.
    assert set(FAMILIES) <= {r["family"] for r in ROWS}


def test_heldout_split_is_the_frozen_seeded_sample():
    first = [r for r in ROWS if r["split"] in ("train", "heldout")]
    ids = sorted(r["id"] for r in first)
    held = set(random.Random("i13-heldout-2026-12-01").sample(ids, 41))
    assert {r["id"] for r in first if r["split"] == "heldout"} == held
    assert Counter(r["split"] for r in ROWS) == {"train": 95, "heldout": 41, "blind2": 22, "blind3": 21, "blind4": 14,
                                                 "blind5": 12, "blind6": 3, "dev7": 48, "dev8": 22, "dev9": 20, "dev10": 13, "dev11": 11,
                                                 "dev12": 47, "dev13": 31, "dev21": 31, "dev22": 21, "dev14": 41, "dev15": 31, "dev18": 19,
                                                 "dev16": 45, "dev17": 29, "dev19": 40, "dev20": 30, "dev23": 43, "dev24": 30,
                                                 "dev25": 25, "dev26": 28, "dev27": 24, "dev28": 29, "dev29": 28, "dev30": 30, "dev31": 30,
                                                 "dev32": 29, "dev33": 30,
                                                 "batch7": 64, "batch8": 64, "batch9": 67, "batch10": 64, "batch11": 63,
                                                 "batch12": 59, "batch13": 61, "batch14": 62,
                                                 "batch15": 68, "batch16": 66, "batch17": 86, "batch18": 73}


SPLITS = ["train", "heldout", "blind2", "blind3", "blind4", "blind5", "blind6", "dev7", "dev8", "dev9", "dev10", "dev11",
          "dev14", "dev15", "dev16", "dev19", "dev20"]
# Splits held to precision only (dev18 is measured, not tuned on: its two misses are left UNKNOWN).
BATCHES = ["batch7", "batch8", "batch10", "batch11", "batch12", "batch13", "batch14", "dev18"]
ACCEPTANCE = "batch9"
# Development sets gathered for issue 21's structure-level rules after their first measurement.
DEV_LATER = ["dev12", "dev13", "dev21", "dev22"]
# Development sets whose family accuracy is not yet held to 90% (README: dev17 is mostly version mismatches
# outside the rules written from it); their precision is held like every split's.
FIRST_MEASURED = ["dev17", "dev23", "dev24", "dev25", "dev26", "dev27", "dev28", "dev29", "dev30", "dev31", "dev32",
                  "dev33"]
# batch15 to batch18: acceptance batches collected blind (by helpers that saw neither the diagnoser
# nor its rules) after batch9 stayed below the bar. Scored and reported like batch9, never asserted on.
ACCEPTANCE_SPLITS = {ACCEPTANCE: (67, 50), "batch15": (68, 55), "batch16": (66, 50), "batch17": (86, 65), "batch18": (73, 65)}


@pytest.mark.parametrize("split", sorted(ACCEPTANCE_SPLITS))
def test_acceptance_batch_records_are_complete_and_scored(split):
    # Its score is the lead's to measure; here only that it is in the corpus and gets scored.
    logs, projects = ACCEPTANCE_SPLITS[split]
    rows = [r for r in ROWS if r["split"] == split]
    assert len(rows) == logs and len({r["project"] for r in rows}) >= projects
    for row in rows:
        assert {"id", "url", "project", "family", "codes", "thread_fix", "expect", "split"} <= set(row), row["id"]
        assert row["family"] in FAMILIES and row["codes"], row["id"]
    assert TABLE[split]["logs"] == logs
    assert {"precision", "coverage", "family_accuracy"} <= set(TABLE[split])


@pytest.mark.parametrize("split", SPLITS + BATCHES + DEV_LATER + FIRST_MEASURED)
def test_precision_first_a_named_family_is_right(split):
    # A wrong family is worse than UNKNOWN: the agent acts on it.
    row = TABLE[split]
    wrong = [f"{o.case.id}: {o.family} != {o.case.family}" for o in OUTCOMES
             if o.case.split == split and o.family != "UNKNOWN" and not o.family_ok]
    assert row["precision"] >= 0.95, wrong


def test_frozen_heldout_coverage():
    assert TABLE["heldout"]["coverage"] >= 0.9


def test_precision_counts_a_family_named_for_an_unknown_log_as_wrong():
    unknown = corpus.Case("u", "UNKNOWN", "s", "")
    known = corpus.Case("k", "OOM", "s", "")
    outcomes = [corpus.Outcome(unknown, "OOM", [], {}, "", False), corpus.Outcome(known, "OOM", [], {}, "", True),
                corpus.Outcome(known, "UNKNOWN", [], {}, "", False)]
    row = corpus.summarise(outcomes)["s"]
    assert (row["named"], row["named_right"], row["precision"]) == (2, 1, 0.5)
    assert (row["known"], row["covered"], row["coverage"]) == (2, 1, 0.5)


@pytest.mark.parametrize("split", SPLITS)
def test_family_accuracy_and_fix_validity(split):
    row = TABLE[split]
    misses = [f"{o.case.id}: {o.family} != {o.case.family}" for o in OUTCOMES
              if o.case.split == split and not o.family_ok]
    assert row["family_accuracy"] >= 0.9, misses
    if row["fixes_checked"]:  # blind5's threads found no fix to check
        assert row["fix_validity"] >= 0.9, [o.case.id for o in OUTCOMES if o.case.split == split and o.fix_ok is False]


def _messy(text, rng):
    lines = text.splitlines()
    out = []
    for line in lines:
        kind = rng.random()
        if kind < 0.3 and line.strip():
            line = "\x1b[31m" + line + "\x1b[0m"  # a coloured terminal
        elif kind < 0.5:
            line = "> " + line  # quoted in a reply
        out.append(line)
    return "progress 1/3\rprogress 2/3\r" + "\r\n".join(out) + "\r\n"


def test_messier_copies_of_the_same_logs_read_the_same():
    rng = random.Random(7)
    config = corpus.template_config()
    changed = []
    for case, outcome in zip(CASES, OUTCOMES):
        profile = dict({"status": "crash"}, **case.profile)
        again = diagnose(_messy(case.text, rng), dict(config), profile)
        if again["family"] != outcome.family:
            changed.append((case.id, outcome.family, again["family"]))
    assert len(changed) <= len(CASES) // 20, changed


def test_corpus_command_prints_both_splits(capsys):
    assert corpus.main(["--dir", str(DIR), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert set(table) == set(SPLITS + BATCHES + DEV_LATER + FIRST_MEASURED) | set(ACCEPTANCE_SPLITS) and table["heldout"]["logs"] == 41
    assert table["heldout"]["precision"] >= 0.95 and table["heldout"]["coverage"] >= 0.9
    assert corpus.main(["--dir", str(DIR / "missing")]) == 2
