"""Cheat audit: mean score of gold, our diagnoser, a keyword heuristic and random answers.

    python -m gpu_train_debug.audit [--seed N] [--json]

A grader that a keyword scan or random output can pass teaches nothing; the seed reports
gold 1.000, keyword heuristic 0.147 (0.112 on hard), random 0.126.
"""

import argparse
import json
import random
import re
import sys
import time

from gpu_train_debug import diagnose, tasks as task_gen
from gpu_train_debug.rules import generic
from gpu_train_debug.environment import SPLITS, load_environment

# What a log-reading heuristic knows: a few phrases per code, no arithmetic.
KEYWORDS = {
    "OOM_ACTIVATIONS": ["out of memory", "outofmemoryerror"],
    "LR_TOO_HIGH_DIVERGENCE": ["nan"],
    "FP16_LOSS_SCALE_OVERFLOW": ["overflow", "loss scale"],
    "BF16_UNSUPPORTED": ["bfloat16"],
    "FA_UNSUPPORTED_ARCH": ["flashattention"],
    "TRITON_GPU_TOO_OLD": ["too old"],
    "TORCH_COMPILE_FAILED": ["torch.compile", "triton installation"],
    "NCCL_TIMEOUT": ["nccl", "watchdog"],
    "PADDING_WASTE_NO_PACKING": ["padding"],
    "DATA_SHARDS_MISSING": ["parquet"],
}


def ours(prompt):
    config, profile, log = task_gen.parse_prompt(prompt)
    result = diagnose(log, config, profile)
    return {"diagnosis": result["codes"], "intermediates": result["intermediates"], "fix": result["fix"]}


def keyword(prompt):
    log = prompt.split("\nLog:\n", 1)[1].lower()
    scores = {code: sum(len(re.findall(re.escape(k), log)) for k in words) for code, words in KEYWORDS.items()}
    best = max(scores, key=scores.get)
    return {"diagnosis": [best] if scores[best] else ["OOM_ACTIVATIONS"], "intermediates": {}, "fix": {}}


def random_answer(prompt, rng):
    config, _, _ = task_gen.parse_prompt(prompt)
    field = rng.choice(sorted(config))
    value = rng.choice([True, False, 1, 2, 4, 8, "sdpa", "adamw_8bit", rng.random()])
    names = list(task_gen.sc.GLOSSARY)
    return {"diagnosis": [rng.choice(sorted(generic.CODES))],
            "intermediates": {n: rng.choice([0, 1, 16, 64, 1000, rng.random() * 1e3]) for n in rng.sample(names, 4)},
            "fix": {field: value}}


def audit(seed=0):
    table = {}
    for split in SPLITS:
        env = load_environment(split, seed)
        prompts = [t["prompt"] for t in env.tasks]
        rng = random.Random(f"audit-random:{seed}:{split}")
        answers = {
            "gold": [t["gold"] for t in env.tasks],
            "ours": [ours(p) for p in prompts],
            "keyword": [keyword(p) for p in prompts],
            "random": [random_answer(p, rng) for p in prompts],
        }
        row = {}
        for name, outs in answers.items():
            start = time.perf_counter()
            scores = env.evaluate(prompts, [json.dumps(o) for o in outs])
            row[name] = round(sum(scores) / len(scores), 3)
            if name == "gold":
                row["ms_per_task"] = round(1000 * (time.perf_counter() - start) / len(prompts), 3)
        row["tasks"] = len(prompts)
        table[split] = row
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpu_train_debug.audit", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    table = audit(args.seed)
    if args.json:
        print(json.dumps(table))
        return 0
    print(f"{'split':<7}{'tasks':>7}{'gold':>8}{'ours':>8}{'keyword':>9}{'random':>8}{'grade ms':>10}")
    for split, row in table.items():
        print(f"{split:<7}{row['tasks']:>7}{row['gold']:>8.3f}{row['ours']:>8.3f}{row['keyword']:>9.3f}"
              f"{row['random']:>8.3f}{row['ms_per_task']:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
