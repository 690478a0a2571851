"""The append-only experiment log `autoresearch.jsonl` (DESIGN 4.2).

One JSON object per line. A line is written whole or not at all: each record is one
os.write() of the full line on an O_APPEND descriptor, followed by fsync. If a crash left
a torn last line, the next append starts on a fresh line so the torn one stays isolated
and every reader skips it with a warning.
"""

import json
import math
import os
import sys

from autoresearch import chain

LOG_NAME = "autoresearch.jsonl"


def append(path, record, warn=None):
    """Append one record (a dict) as a JSON line, durably.

    A record the strict log cannot hold (a non-finite number, text that is not Unicode) is
    written sanitised, with a warning, rather than lost: a record that cannot be written
    would leave the run unrecorded and the engine retrying it forever.

    The record is linked into the log's hash chain first (chain.py): `prev` is set in it.
    """
    record, folder = chain.link(path, record, warn)
    try:
        data = _encode(record)
    except (ValueError, TypeError, RecursionError) as exc:
        (warn or _warn_stderr)(f"run {record.get('run', '?')}: record sanitised for the log "
                               f"({type(exc).__name__}: {exc})")
        data = _encode(sanitise(record))
    # O_RDWR, not O_WRONLY: the torn-line check reads the last byte with pread.
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        line = data
        if _ends_without_newline(fd):
            data = b"\n" + data
        if folder:
            chain.begin(folder, line, record[chain.FIELD], os.fstat(fd).st_size + len(data))
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if folder:
        chain.copy_append(folder, line)


def _encode(record):
    line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
    return line.encode("utf-8")


def sanitise(value, depth=0):
    """A copy of `value` that strict UTF-8 JSON can hold: non-finite numbers become null,
    text that is not Unicode gets U+FFFD, anything else becomes its text, deep nesting is cut."""
    if depth > 50:
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bool, int)) or value is None:
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {sanitise(str(k), depth + 1): sanitise(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitise(v, depth + 1) for v in value]
    return sanitise(str(value), depth + 1)


def _ends_without_newline(fd):
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"


def read(path, warn=None):
    """Return the list of records in the log, skipping malformed lines.

    `warn` is called with one message per skipped line (default: print to stderr).
    A missing log reads as empty.
    """
    if warn is None:
        warn = _warn_stderr
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    entries = _entries(raw, os.path.basename(path), warn)
    folder = chain.state_dir(path)
    verdict = chain.verify(entries, chain.Tip.read(folder) if folder else None)
    if not verdict.intact:
        copy = chain.read_copy(path)
        kept = _entries(copy, "engine copy", lambda m: None) if copy is not None else []
        verdict = chain.verify(kept, chain.Tip.read(folder))
        if verdict.intact:
            warn(f"{os.path.basename(path)} does not hold the last record the engine wrote (cut, "
                 "truncated or edited); reading the engine's copy in .git/autoresearch/ instead "
                 "(the next `autoresearch run` puts the log back)")
            return _unlinked(kept, verdict)
        warn(f"{os.path.basename(path)} and the engine's copy both lost the last record the engine "
             "wrote; reading the log as it is")
        return [record for _, _, record in entries]
    for number, why in verdict.foreign:
        warn(f"{os.path.basename(path)}:{number}: skipped a line {why}")
    return _unlinked(entries, verdict)


def _unlinked(entries, verdict):
    return [record for number, _, record in entries if number in verdict.accepted]


def _entries(raw, name, warn):
    """[(line number, raw line, record)] of the valid records in `raw`; a warning per bad line."""
    entries = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            record = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            warn(f"{where}: skipped malformed line ({exc.__class__.__name__}: {exc})")
            continue
        if not isinstance(record, dict):
            warn(f"{where}: skipped line that is not a JSON object")
            continue
        problem = invalid(record)
        if problem:
            warn(f"{where}: skipped invalid record ({problem})")
            continue
        entries.append((number, line, record))
    return entries


STATUSES = ("keep", "discard", "crash", "timeout", "checks_failed")
DIRECTIONS = ("lower", "higher")


def _reject_constant(name):
    raise ValueError(f"{name} is not strict JSON")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def invalid(record):
    """Why `record` is not a valid config header or run record (None when it is, or when it is
    neither: other lines are kept for the tools that wrote them). Every reader gets the same
    records, so status, brief, export and the report agree on what the log holds."""
    if is_config(record):
        if not isinstance(record.get("metricName"), str) or not record["metricName"]:
            return "config without a metricName"
        if record.get("bestDirection") not in DIRECTIONS:
            return f"config bestDirection {record.get('bestDirection')!r} is not lower or higher"
        return None
    if not is_run(record):
        return None
    run = record.get("run")
    if not _is_int(run) or run < 1:
        return f"run {run!r} is not a whole number >= 1"
    if record.get("status") not in STATUSES:
        return f"run {run}: status {record.get('status')!r} is not one of {', '.join(STATUSES)}"
    if record.get("metric") is not None and not _is_finite(record["metric"]):
        return f"run {run}: metric {record['metric']!r} is not a finite number"
    found = record.get("metrics")
    if found is not None and not (isinstance(found, dict) and all(_is_finite(v) for v in found.values())):
        return f"run {run}: metrics is not an object of finite numbers"
    if "segment" in record and record["segment"] is not None and not _is_int(record["segment"]):
        return f"run {run}: segment {record['segment']!r} is not a whole number"
    return None


def _warn_stderr(message):
    print(f"autoresearch: warning: {message}", file=sys.stderr)


def is_config(record):
    return record.get("type") == "config"


def is_run(record):
    return "run" in record and record.get("type") in (None, "run")


def segments(records):
    """Split records into segments: a list of (config, runs), one per config header.

    Runs before any header (a hand-made log) form a segment with config None.
    """
    result = []
    for record in records:
        if is_config(record):
            result.append((record, []))
        elif is_run(record):
            if not result:
                result.append((None, []))
            result[-1][1].append(record)
    return result
