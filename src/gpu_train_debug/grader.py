"""Deterministic grader: no model judge, milliseconds per task.

Weights (the seed's): with intermediates, format 0.10, diagnosis 0.30, intermediates 0.25,
fix 0.25, minimality 0.10; without, format 0.10, diagnosis 0.35, fix 0.45, minimality 0.10.

- format: the completion holds one JSON object with `diagnosis`, `fix` (and `intermediates`
  when the task asks for them) of the right types.
- diagnosis: F1 between the predicted and gold code sets, so extra codes cost precision.
- intermediates: per required value, 1 within 1% relative error, 0.5 within 5%, else 0.
- fix: per gold field, 1 when the value matches (numbers within 1%, strings case-insensitive).
- minimality: share of predicted fix fields that are gold fields; an empty fix earns none.
  Dumping every plausible field change therefore loses minimality and fix precision.
"""

import json
import math
import re

WEIGHTS_WITH = {"format": 0.10, "diagnosis": 0.30, "intermediates": 0.25, "fix": 0.25, "minimality": 0.10}
WEIGHTS_WITHOUT = {"format": 0.10, "diagnosis": 0.35, "fix": 0.45, "minimality": 0.10}
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def parse_answer(completion):
    """The answer object from a completion (plain JSON, a fenced block, or the outer braces)."""
    if isinstance(completion, dict):
        return completion
    if isinstance(completion, list):  # chat format: take the last message's content
        completion = completion[-1].get("content", "") if completion and isinstance(completion[-1], dict) else ""
    text = str(completion or "")
    candidates = [text]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"):text.rindex("}") + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _codes(value):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return set()
    return {str(v).strip().upper() for v in value if isinstance(v, (str, int))}


def _close(pred, gold, full=0.01, half=0.05):
    if isinstance(pred, bool) or not isinstance(pred, (int, float)) or not math.isfinite(pred):
        return 0.0
    if gold == 0:
        return 1.0 if abs(pred) < 1e-9 else 0.0
    err = abs(pred - gold) / abs(gold)
    return 1.0 if err <= full else 0.5 if err <= half else 0.0


def _same(pred, gold):
    if isinstance(gold, bool) or isinstance(pred, bool):
        return isinstance(pred, bool) and isinstance(gold, bool) and pred == gold
    if isinstance(gold, (int, float)):
        return _close(pred, gold, full=0.01, half=0.01) == 1.0
    return isinstance(pred, str) and pred.strip().lower() == str(gold).lower()


def grade(answer, gold):
    """(score, parts) for one parsed answer against the gold dict."""
    needs_inter = bool(gold.get("intermediates"))
    weights = WEIGHTS_WITH if needs_inter else WEIGHTS_WITHOUT
    parts = {name: 0.0 for name in weights}
    if not isinstance(answer, dict):
        return 0.0, parts
    fix = answer.get("fix")
    inter = answer.get("intermediates")
    ok = isinstance(fix, dict) and bool(_codes(answer.get("diagnosis"))) and (
        not needs_inter or isinstance(inter, dict))
    parts["format"] = 1.0 if ok else 0.0
    pred, truth = _codes(answer.get("diagnosis")), set(gold["diagnosis"])
    hit = len(pred & truth)
    parts["diagnosis"] = 2 * hit / (len(pred) + len(truth)) if hit else 0.0
    if needs_inter:
        inter = inter if isinstance(inter, dict) else {}
        parts["intermediates"] = sum(_close(inter.get(k), v) for k, v in gold["intermediates"].items()) / len(
            gold["intermediates"])
    fix = fix if isinstance(fix, dict) else {}
    gold_fix = gold["fix"]
    if gold_fix:
        parts["fix"] = sum(1.0 for k, v in gold_fix.items() if k in fix and _same(fix[k], v)) / len(gold_fix)
        parts["minimality"] = (len(set(fix) & set(gold_fix)) / len(fix)) if fix else 0.0
    else:
        parts["fix"] = 1.0 if not fix else 0.0
        parts["minimality"] = 1.0 if not fix else 0.0
    score = sum(weights[k] * parts[k] for k in weights)
    return round(score, 6), parts


def score_completion(completion, gold):
    return grade(parse_answer(completion), gold)[0]
