"""Step 2 of an experiment, the measurement: run the benchmark, read its METRIC lines, run the
checks. No decision and no record here: the result is a `Measurement` for the decide step.

`measure()` runs a given command in a given directory with a given run folder, so the same
step serves a plain run (the research repo itself), a run in its own snapshot of a commit,
or one run of a parallel wave.
"""

import os
import time
from dataclasses import dataclass, field

from autoresearch import errors
from autoresearch.isolation import runner
from autoresearch.errors import Interrupted

DEFAULT_CHECKS_TIMEOUT_S = 300.0


@dataclass
class Checks:
    exit_code: object          # None when it timed out
    timed_out: bool
    duration_s: float
    timeout_s: float

    @property
    def passed(self):
        return not self.timed_out and self.exit_code == 0


@dataclass
class Measurement:
    run: int
    run_dir: str               # absolute path of .autoresearch/runs/N
    exit_code: object          # None when killed by the timeout or interrupted
    timed_out: bool
    duration_s: float
    timeout_s: object          # the benchmark's limit (None: none)
    found: dict = field(default_factory=dict)      # METRIC name -> value
    warnings: list = field(default_factory=list)   # METRIC lines that were ignored, and why
    checks: object = None      # Checks, or None (no checks command, or the benchmark failed)
    interrupted: object = None  # the Interrupted signal, or None
    interrupted_in: str = None  # "benchmark" or "checks"
    output_cut: int = 0        # bytes of output left out of output.log (its cap)
    stopped: object = None     # watch.Stop when the watcher ended the run (stalled, early abort)


def run_env(run, run_dir, base=None):
    """The environment a run's commands see: ours plus the run's number and files."""
    env = dict(os.environ if base is None else base)
    env.update({"AUTORESEARCH_RUN": str(run), "AUTORESEARCH_RUN_DIR": os.path.abspath(run_dir),
                "AUTORESEARCH_STEPS_FILE": os.path.abspath(os.path.join(run_dir, "steps.jsonl"))})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def measure(config, run, run_dir, workdir, echo=None, on_start=None, on_phase=None, env=None, preexec=None,
            watch=None, wrap=None):
    """Run `config.command` in `workdir` for run `run`; then, when it printed the metric, the
    checks. `on_start(pid)` gets the benchmark's pid, `on_phase(name)` each new phase,
    `preexec` and `wrap` confine the commands (the sandbox: Landlock, bubblewrap), `watch` (a watch.Watch) may stop the benchmark
    while it goes (stalled, early abort). METRIC lines are parsed as they stream by, and
    output.log is capped (`config.output_cap_mb`)."""
    env = env if env is not None else run_env(run, run_dir)
    timeout = float(config.timeout_s or 0) or None
    out_path = os.path.join(run_dir, "output.log")
    m = Measurement(run, run_dir, None, False, 0.0, timeout)
    started = time.monotonic()
    lines = runner.MetricLines()

    def begin(pid):
        if watch is not None:   # first: on_start records the pid, then the command starts at once
            watch.begin(pid)
        if on_start:
            on_start(pid)
    try:
        with errors.STOP.interruptible():
            result = runner.run(config.command, workdir, env, out_path, timeout, echo=echo, on_start=begin,
                                cap_bytes=output_cap(config), on_line=lines, preexec=preexec, wrap=wrap)
        m.exit_code, m.timed_out, m.duration_s = result.exit_code, result.timed_out, result.duration_s
        m.output_cut = result.output_cut
    except Interrupted as exc:
        m.interrupted, m.interrupted_in = exc, "benchmark"
        m.duration_s = time.monotonic() - started
    finally:
        if watch is not None:
            watch.end()
            m.stopped = watch.stopped
    m.found, m.warnings = lines.found, lines.all_warnings()
    if m.stopped is not None:
        return m
    if m.interrupted is None and succeeded(m) and config.metric_name in m.found and config.checks:
        if on_phase:
            on_phase("checks")
        _run_checks(config, m, workdir, env, preexec, wrap)
    return m


def output_cap(config):
    """Bytes output.log may hold (`output_cap_mb`, default runner.DEFAULT_CAP_MB; 0: no cap)."""
    mb = config.output_cap_mb if config.output_cap_mb is not None else runner.DEFAULT_CAP_MB
    try:
        mb = float(mb)
    except (TypeError, ValueError):
        mb = runner.DEFAULT_CAP_MB
    return int(mb * (1 << 20)) if mb > 0 else None


def succeeded(m):
    return not m.timed_out and m.exit_code == 0


def _run_checks(config, m, workdir, env, preexec=None, wrap=None):
    timeout = float(config.checks_timeout_s or DEFAULT_CHECKS_TIMEOUT_S)
    try:
        with errors.STOP.interruptible():
            result = runner.run(config.checks, workdir, env, os.path.join(m.run_dir, "checks.log"), timeout,
                                echo=None, cap_bytes=output_cap(config), preexec=preexec, wrap=wrap)
    except Interrupted as exc:
        m.interrupted, m.interrupted_in = exc, "checks"
        return
    m.checks = Checks(result.exit_code, result.timed_out, result.duration_s, timeout)
    m.duration_s += result.duration_s
