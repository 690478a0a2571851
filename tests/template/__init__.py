"""Tests of the ML template (a package, so its conftest never shadows tests/conftest.py)."""
