"""gpu-train-debug: diagnose broken LLM training runs and compute the minimal fix.

Standard library only.

    diagnose(log_text, config, profile) -> {"family", "codes", "intermediates", "fix", "explanation"}
    load_environment(split="train", seed=0) -> Environment with .tasks and .evaluate(prompts, completions)
"""

from gpu_train_debug.diagnose import FAMILIES, diagnose


def load_environment(*args, **kwargs):
    """The task environment (generator + grader); see gpu_train_debug.environment."""
    from gpu_train_debug.environment import load_environment as _load
    return _load(*args, **kwargs)


__all__ = ["FAMILIES", "diagnose", "load_environment"]
