"""gpu-train-debug: diagnose broken LLM training runs and compute the minimal fix.

Standard library only. DESIGN section 6.
"""
