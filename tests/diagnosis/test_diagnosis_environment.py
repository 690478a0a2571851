"""The task environment: seed API, splits, determinism, grader behaviour, cheat audit."""

import json

import pytest

import gpu_train_debug as m
from gpu_train_debug import audit, grader, tasks as task_gen
from gpu_train_debug.environment import load_environment


@pytest.fixture(scope="module")
def train():
    return load_environment()


def test_seed_readme_example(train):
    t = train.tasks[0]
    assert len(train.tasks) == 1200
    assert train.evaluate([t["prompt"]], [json.dumps(t["gold"])]) == [1.0]
    assert len(m.load_environment("hard").tasks) == 200
    assert len(m.load_environment("test").tasks) == 244


def test_tasks_carry_difficulty_metadata_and_the_v04_mix(train):
    tiers = {}
    for t in train.tasks:
        assert {"prompt", "gold", "tier", "interaction", "reasoning_depth", "required_computations"} <= set(t)
        tiers[t["tier"]] = tiers.get(t["tier"], 0) + 1
    assert tiers == {"interacting": 420, "computed": 420, "two_fault": 240, "diagnosis": 120}
    archetypes = {t["interaction"] for t in train.tasks if t["tier"] == "interacting"}
    assert archetypes == set(task_gen.INTERACTING)
    hard = load_environment("hard").tasks
    assert not [t for t in hard if t["tier"] == "diagnosis"]


def test_splits_are_deterministic_and_test_is_held_out(train):
    again = load_environment()
    assert [t["prompt"] for t in again.tasks] == [t["prompt"] for t in train.tasks]
    test_prompts = {t["prompt"] for t in load_environment("test").tasks}
    assert not test_prompts & {t["prompt"] for t in train.tasks}
    other_seed = load_environment(seed=1)
    assert other_seed.tasks[0]["prompt"] != train.tasks[0]["prompt"]


def test_fresh_variants_are_new_and_gradeable(train):
    fresh = train.fresh(20, seed=7)
    assert len(fresh.tasks) == 20
    assert not {t["prompt"] for t in fresh.tasks} & {t["prompt"] for t in train.tasks}
    assert fresh.evaluate([t["prompt"] for t in fresh.tasks], [json.dumps(t["gold"]) for t in fresh.tasks]) == [1.0] * 20


def test_gold_fixes_really_repair_memory_faults(train):
    from gpu_train_debug import scenario as sc
    for t in train.tasks:
        if "fit_search" not in t["required_computations"]:
            continue
        config, _, _ = task_gen.parse_prompt(t["prompt"])
        assert not sc.fits(config)
        fixed = dict(config, **t["gold"]["fix"])
        assert sc.fits(fixed), t["id"]
        assert sc.global_batch(fixed) == sc.global_batch(config), t["id"]


def _task(env, tier):
    return next(t for t in env.tasks if t["tier"] == tier)


def test_grader_partial_credit_and_penalties(train):
    t = _task(train, "interacting")
    gold = t["gold"]
    full, _ = grader.grade(gold, gold)
    assert full == 1.0
    no_inter = dict(gold, intermediates={})
    assert grader.grade(no_inter, gold)[0] == pytest.approx(0.75)
    # Dumping every plausible field change costs minimality.
    config, _, _ = task_gen.parse_prompt(t["prompt"])
    dump = dict(gold, fix=dict({k: v for k, v in config.items()}, **gold["fix"]))
    assert grader.grade(dump, gold)[1]["minimality"] < 0.5
    # Extra codes cost diagnosis precision.
    many = dict(gold, diagnosis=gold["diagnosis"] + ["NCCL_TIMEOUT", "DATA_SHARDS_MISSING"])
    assert grader.grade(many, gold)[1]["diagnosis"] < 1.0
    # Garbage and prose score zero; fenced JSON is accepted.
    assert train.evaluate([t["prompt"]], ["I think it is OOM"]) == [0.0]
    assert train.evaluate([t["prompt"]], ["Answer:\n```json\n" + json.dumps(gold) + "\n```"]) == [1.0]


def test_diagnosis_tier_weights(train):
    t = _task(train, "diagnosis")
    assert t["gold"]["intermediates"] == {}
    right_code_no_fix = {"diagnosis": t["gold"]["diagnosis"], "intermediates": {}, "fix": {}}
    assert grader.grade(right_code_no_fix, t["gold"])[0] == pytest.approx(0.45)


def test_evaluate_rejects_mismatched_lengths(train):
    with pytest.raises(ValueError):
        train.evaluate(["a", "b"], ["c"])


def test_cheat_audit_thresholds():
    table = audit.audit(seed=0)
    for split, row in table.items():
        assert row["gold"] == 1.0, split
        assert row["keyword"] <= 0.2, split
        assert row["random"] <= 0.15, split
        assert row["ours"] >= 0.95, split
