"""The engine's seam to the diagnoser (the `autoresearch diagnose` command is views/rundiagnosis.py).

Standard library only. The engine calls `for_run` for every crash, timeout and implausible
result and stores the dict in the log record and in the run's `diagnosis.json`; `short`
gives the one or two lines it prints in the run's result.
"""

import json
import os
import shutil
import subprocess

from gpu_train_debug import config as config_reader
from gpu_train_debug import diagnose as _diagnose

# A log can be huge (a runaway print loop); the failure is at the end, the setup at the start.
MAX_LOG_BYTES = 8 * 2 ** 20
HEAD_BYTES = 256 * 2 ** 10


def read_log(path):
    """The log's text (head and tail when it is larger than MAX_LOG_BYTES); '' when missing."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            if size <= MAX_LOG_BYTES:
                data = handle.read()
            else:
                head = handle.read(HEAD_BYTES)
                handle.seek(size - (MAX_LOG_BYTES - HEAD_BYTES))
                data = head + b"\n[... log truncated by autoresearch diagnose ...]\n" + handle.read()
    except OSError:
        return ""
    # train.py prints progress with \r; treat each update as its own line.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def read_config(repo):
    """The constants a run of `repo` used: prepare.py's (MAX_SEQ_LEN, VOCAB_SIZE, ...), with the
    active profile's overrides, then train.py's on top."""
    constants = harness_constants(os.path.join(repo, "prepare.py"))
    constants.update(config_reader.read_constants(os.path.join(repo, "train.py")))
    return constants


def harness_constants(prepare_path):
    """prepare.py's constants, with the overrides of the profile its prepared data was made for.

    The template's prepare.py applies `PROFILES[manifest["profile"]]` at import (e.g. the CPU
    smoke profile trains at MAX_SEQ_LEN 256, not 2048); the manifest lives in
    $AUTORESEARCH_CACHE (default ~/.cache/autoresearch)/prepared/manifest.json.
    """
    constants = config_reader.read_constants(prepare_path)
    profiles = constants.pop("PROFILES", None)
    cache = os.environ.get("AUTORESEARCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "autoresearch")
    manifest = _read_json(os.path.join(cache, "prepared", "manifest.json"))
    overrides = profiles.get(manifest.get("profile", "default")) if isinstance(profiles, dict) else None
    if isinstance(overrides, dict):
        constants.update({k: v for k, v in overrides.items() if isinstance(k, str)})
    return constants


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _read_steps(path, limit=5000):
    steps = []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a torn or malformed line: skip it, keep the rest
                if isinstance(record, dict):
                    steps.append(record)
    except OSError:
        return []
    return steps[-limit:]


def gpu_info():
    """Total memory of GPU 0 from nvidia-smi, or None when there is none (or it misbehaves)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.total,name,compute_cap",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=5).stdout
        first = out.strip().splitlines()[0].split(",")
        return {"gpu_memory_mb": float(first[0]), "gpu_name": first[1].strip(),
                "compute_capability": first[2].strip() if len(first) > 2 else None}
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def build_profile(run_dir, status=None, reason=None, metrics=None, best_metric=None, direction=None):
    summary = _read_json(os.path.join(run_dir, "summary.json"))
    profile = {"status": status, "reason": reason or "", "metrics": metrics or {},
               "best_metric": best_metric, "direction": direction, "summary": summary,
               "steps": _read_steps(os.path.join(run_dir, "steps.jsonl"))}
    settings = summary.get("settings") if isinstance(summary.get("settings"), dict) else {}
    for key in ("gpu_memory_mb", "gpu_name", "compute_capability"):
        if key in summary:
            profile[key] = summary[key]
        elif key in settings:
            profile[key] = settings[key]
    if "gpu_memory_mb" not in profile:
        profile.update(gpu_info() or {})
    return profile


def benchmark_command(repo, limit=256 * 2 ** 10):
    """The benchmark command of the session's latest config record in autoresearch.jsonl, or None.

    Config records open each segment, so the head of the log holds them; a torn or odd line is
    skipped. Only used to word the explanation of a non-template benchmark.
    """
    command = None
    try:
        with open(os.path.join(repo, "autoresearch.jsonl"), "rb") as handle:
            head = handle.read(limit)
    except OSError:
        return None
    for line in head.decode("utf-8", errors="replace").splitlines():
        if '"config"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "config" and isinstance(record.get("command"), str):
            command = record["command"]
    return command


def for_run(repo, run_dir, status, metrics=None, best_metric=None, direction=None, reason=None, command=None):
    """Diagnose one finished run of the engine; never raises on missing or odd files.

    `command` is the benchmark command (read from `repo`'s autoresearch.jsonl when not given);
    it only words the explanation of a benchmark that is not the ML template."""
    log_text = read_log(os.path.join(run_dir, "output.log"))
    config = read_config(repo)
    profile = build_profile(run_dir, status, reason, metrics, best_metric, direction)
    command = command if isinstance(command, str) and command else benchmark_command(repo)
    if command:
        profile["command"] = command
    try:
        result = _diagnose(log_text, config, profile)
    except Exception as exc:  # a diagnoser bug must never cost the engine its record
        result = {"family": "UNKNOWN", "codes": ["DIAGNOSER_ERROR"], "intermediates": {},
                  "fix": {}, "explanation": f"diagnoser failed: {type(exc).__name__}: {exc}"}
    result["status"] = status
    if reason:
        result["reason"] = reason
    return result


def short(diagnosis):
    """One or two lines for the engine's result, e.g.
    `diagnosis: OOM (OOM_TRAIN_ACTIVATIONS) - fix: DEVICE_BATCH_SIZE=16`; without a constant to
    change, the step the diagnosis names (`intermediates.fix_step`, the harness's refusals)."""
    if not diagnosis:
        return "diagnosis: none"
    codes = ", ".join(diagnosis.get("codes") or [])
    fix = diagnosis.get("fix") or {}
    step = (diagnosis.get("intermediates") or {}).get("fix_step")
    fix_text = (" ".join(f"{k}={_fmt(v)}" for k, v in fix.items()) if fix else
                step if isinstance(step, str) and step else "none (see explanation)")
    line = f"diagnosis: {diagnosis.get('family', 'UNKNOWN')} ({codes}) - fix: {fix_text}"
    explanation = (diagnosis.get("explanation") or "").strip()
    if explanation:
        first = explanation.split(". ")[0].rstrip(".")
        line += "\n  " + (first[:200] + ".")
    return line


def _fmt(value):
    return json.dumps(value) if isinstance(value, str) else str(value)
