"""Results that were measured but could not be appended (a full disk, a read-only log).

Such a record is never lost and never turned into a crash: it is saved in the engine's state in
the git directory (`.git/autoresearch/pending/N.json`, where tools in the scope cannot reach it
under the sandbox, and which the PreToolUse hook protects) and appended by the next engine call
that holds the lock (`run`, `status`, `init`), in run order, once the log can be written.
"""

import json
import os

from autoresearch.store import chain, log


def folder(repo):
    state = chain.state_dir(repo.log)
    return os.path.join(state, "pending") if state else os.path.join(repo.state, "pending")


def save(repo, record):
    """Keep `record` for a later append; return where it went (None if nothing could be written)."""
    path = os.path.join(folder(repo), f"{int(record['run'])}.json")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        chain.write_atomic(path, json.dumps(record, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n")
        return path
    except (OSError, ValueError):
        return None


def _files(repo):
    try:
        names = os.listdir(folder(repo))
    except OSError:
        return []
    numbered = sorted((int(n[:-5]), n) for n in names if n.endswith(".json") and n[:-5].isdigit())
    return [os.path.join(folder(repo), n) for _, n in numbered]


def waiting(repo):
    return bool(_files(repo))


def flush(repo, warn):
    """Append every waiting record not in the log yet; return how many were appended.
    An append that still fails raises its OSError (the caller refuses in one line)."""
    files = _files(repo)
    if not files:
        return 0
    recorded = {r.get("run") for r in log.read(repo.log, warn=lambda m: None) if log.is_run(r)}
    done = 0
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError) as exc:
            warn(f"{path}: unreadable waiting result ({exc}); left it there")
            continue
        if isinstance(record, dict) and record.get("run") not in recorded:
            log.append(repo.log, record, warn=warn)
            done += 1
            warn(f"run {record.get('run')}: appended its result, which was waiting in {os.path.relpath(path, repo.root)}")
        os.unlink(path)
    return done
