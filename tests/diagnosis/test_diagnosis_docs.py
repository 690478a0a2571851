"""The reference page lists every code the diagnoser can emit; the skill's frontmatter is valid."""

import re
from pathlib import Path

from gpu_train_debug import FAMILIES
from gpu_train_debug.rules import fallbacks, generic, patterns

ROOT = Path(__file__).resolve().parent.parent.parent
EMITTED_BY_STATUS = ["OOM_TRAIN_ACTIVATIONS", "OOM_EVAL", "OOM_MODEL_STATES", "STALL_BEFORE_FIRST_STEP",
                     "HANG_DURING_TRAINING", "SLOW_EVAL", "IMPLAUSIBLE_GAIN", "UNKNOWN", "STALL", "CODE_ERROR",
                     "DATASET_UNKNOWN", "FILE_MISSING", "PACKAGE_VERSION", "DATASET_ITEM_MISSING"]


def test_every_code_is_documented_with_a_known_family():
    page = (ROOT / "references" / "diagnosis-codes.md").read_text()
    codes = ([c for c, _, _, _ in patterns.SIGNATURES if c != "OOM"] + EMITTED_BY_STATUS + list(generic.CODES)
             + list(fallbacks.CODES))
    missing = [c for c in codes if f"`{c}`" not in page]
    assert not missing
    assert {f for _, f, _, _ in patterns.SIGNATURES} <= set(FAMILIES)
    assert {f for f, _, _ in generic.CODES.values()} <= set(FAMILIES)


def test_skill_frontmatter():
    text = (ROOT / "skills" / "autoresearch-explain" / "SKILL.md").read_text()
    front = re.match(r"^---\n(.*?)\n---\n", text, re.S).group(1)
    fields = dict(line.split(": ", 1) for line in front.splitlines())
    assert fields["name"] == '"autoresearch-explain"'
    assert fields["description"].startswith('"') and fields["description"].endswith('"')
    assert len(text.splitlines()) <= 80
    assert "autoresearch diagnose" in text
