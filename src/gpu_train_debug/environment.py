"""load_environment(): the gpu-train-debug tasks and their grader, API-compatible with the seed.

    import gpu_train_debug as m, json
    env = m.load_environment()
    t = env.tasks[0]
    print(len(env.tasks), env.evaluate([t["prompt"]], [json.dumps(t["gold"])]))   # 1200 [1.0]
"""

from gpu_train_debug import grader, tasks as task_gen

SPLITS = ("train", "hard", "test")


class Environment:
    def __init__(self, split="train", seed=0, tasks=None):
        self.split, self.seed = split, seed
        self.tasks = tasks if tasks is not None else task_gen.generate_split(split, seed)
        self._gold = {t["prompt"]: t["gold"] for t in self.tasks}

    def __len__(self):
        return len(self.tasks)

    def evaluate(self, prompts, completions):
        """Scores in [0, 1], one per (prompt, completion); a prompt not in the split raises KeyError."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        return [grader.score_completion(c, self._gold[self._key(p)]) for p, c in zip(prompts, completions)]

    def grade_detail(self, prompt, completion):
        return grader.grade(grader.parse_answer(completion), self._gold[self._key(prompt)])

    @staticmethod
    def _key(prompt):
        if isinstance(prompt, list):  # chat format: the user message holds the task
            return next(m["content"] for m in prompt if isinstance(m, dict) and m.get("role") == "user")
        return prompt

    def fresh(self, n, seed=None, tier=None):
        """A new Environment of n freshly generated variants (outside every split)."""
        return Environment("fresh", seed if seed is not None else self.seed,
                           task_gen.fresh_variants(n, seed if seed is not None else self.seed, tier))


def load_environment(split="train", seed=0, **kwargs):
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return Environment(split, seed)
