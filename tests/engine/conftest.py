"""Fixtures for the engine tests (helpers in helpers_engine.py)."""

import pytest

from helpers_engine import make_repo


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "research")


@pytest.fixture
def make(tmp_path):
    """make(*init_args) -> a fresh research repo initialised with those arguments."""
    counter = iter(range(1000))

    def factory(*init_args, value="1.0"):
        base = ("--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
        return make_repo(tmp_path / f"research{next(counter)}", base + tuple(init_args), value=value)
    return factory
