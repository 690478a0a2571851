"""Everything the agent can read of a night, collected for a grep (the hidden holdout must be in
none of it): the results `run` printed, the log, status / brief / export / diagnose / report as
the agent's Bash tool runs them (a pipe), the hooks' answers and serve's data for the page."""

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli

SESSION = "6f1d3c1e-0000-4000-8000-00000000abcd"


def _hook(name, payload):
    proc = subprocess.run([sys.executable, str(ROOT / "hooks" / f"{name}.py")], input=json.dumps(payload).encode(),
                          capture_output=True, timeout=60)
    return proc.stdout.decode() + proc.stderr.decode()


def collect(root, run_outputs=()):
    """{what: text} for every agent-facing output of the research repo at `root`."""
    root = Path(root)
    out = {f"run result {i}": text for i, text in enumerate(run_outputs)}
    out["log"] = (root / "autoresearch.jsonl").read_text()
    for args in (["status"], ["status", "--json"], ["brief"], ["brief", "--json"], ["export", "--tsv", "-"],
                 ["export", "--pi", "-"], ["report", "-o", str(root / ".autoresearch" / "agent-report.html")],
                 ["report", "--json", "-o", str(root / ".autoresearch" / "agent-report2.html")]):
        proc = run_cli(args, cwd=root)
        out[" ".join(args)] = proc.stdout + proc.stderr
    out["report page"] = (root / ".autoresearch" / "agent-report.html").read_text()
    runs = [json.loads(line) for line in out["log"].splitlines() if '"run"' in line]
    for r in runs:
        if r.get("status") in ("crash", "timeout"):
            proc = run_cli(["diagnose", str(r["run"])], cwd=root)
            out[f"diagnose {r['run']}"] = proc.stdout + proc.stderr
    base = {"session_id": SESSION, "transcript_path": "/nonexistent/t.jsonl", "cwd": str(root)}
    out["session_start hook"] = _hook("session_start", dict(base, hook_event_name="SessionStart", source="startup"))
    out["stop hook"] = _hook("stop", dict(base, hook_event_name="Stop", stop_hook_active=False,
                                         last_assistant_message="Done."))
    sys.path.insert(0, str(ROOT / "src"))
    from autoresearch.views import serve
    state = serve.LiveState(root, "autoresearch.jsonl", 0.15)
    out["serve model"] = state.model_bytes()[0].decode("utf-8", "replace")
    out["serve runs"] = json.dumps(state.runs_payload(0, 10_000), default=str)
    for r in runs:
        out[f"serve run {r['run']}"] = json.dumps(state.run_payload(r["run"]), default=str)
    return out


def spellings(value):
    """How a float is written with the digits that make it this value (five significant and up:
    validation and holdout values of one run agree to about three)."""
    return {repr(value), f"{value:.6g}", f"{value:.5g}", f"{value:.6f}", f"{value:.5f}", json.dumps(value)}


def leaks(outputs, values):
    """[(what, spelling)] for each place a value appears."""
    return [(what, s) for what, text in outputs.items() for v in values for s in spellings(v) if shown(s, text)]


def shown(spelling, text):
    """`spelling` appears as a number of its own: not merely as the first digits of a longer figure
    (another value that happens to share them)."""
    return re.search(rf"(?<![\d.]){re.escape(spelling)}(?![\d])", text) is not None
