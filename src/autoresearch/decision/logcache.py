"""The log read once: its summary kept between commands, so `status`, `brief` and the hooks
take the same few milliseconds at 50,000 runs as at 5.

`view(repo)` is what those commands read: the current segment's config, its `summary.Summary`,
its last runs and the number of runs in the log. Reading and summarising a long log every
time is what made them slow (1.5 s of parsing for 50,000 runs), so the state after the last
complete line is kept in `.autoresearch/cache/log-state.json`: the current segment's
`summary.Tally`, the line count, the warnings the lines gave, and what identifies that much of
the log (its byte length, the hash of its last line, the log file's identity, the chain tip).
Next time only the lines after it are parsed and added to the tally (log.parse, the same
function log.read uses, so the warnings are the same too).

The cache is a file in the repo, so it is never trusted: it is JSON (never unpickled), it
carries an HMAC made with a key kept in the git directory (`<git dir>/autoresearch/cache.key`),
and it counts only when its version, its MAC, its types and its key all check and the log
still holds the very line it ended at. Anything else (a foreign, corrupted, truncated or
stale cache, a log cut or rewritten, a later keep that changes the meaning of earlier runs)
falls back to reading the whole log, which then writes a fresh cache. What is shown is the
same either way; tests/engine/test_log_cache.py checks that.
"""

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field

from autoresearch.decision import summary
from autoresearch.store import ledger, log
from autoresearch.store.chain import git_dir
from autoresearch.store.files import write_atomic

VERSION = 2
CACHE = os.path.join(".autoresearch", "cache", "log-state.json")   # the tally, to add new lines to
VIEW = os.path.join(".autoresearch", "cache", "log-view.json")     # what view() returned, for an unchanged log
KEY_NAME = "cache.key"
LAST_LINE_MAX = 1 << 22     # the longest last line worth looking back for
# The tally is saved again once this much log has been added since it was saved; in between,
# the view (small) is saved and the next growth re-reads the few lines since the tally's save.
SAVE_EVERY_BYTES = 1 << 20


@dataclass
class View:
    config: object            # log.Config of the current segment, or None
    summary: object           # summary.Summary of the current segment
    last_runs: list           # its last runs (log.Run)
    total_runs: int           # runs in the whole log
    segment: int
    totals: object = None     # ledger.RunTotals of the segment's runs (what the ledger reads)
    warnings: list = field(default_factory=list)
    cached: bool = False      # True when the cache was used (for the benchmark and the tests)


@dataclass
class _State:
    offset: int               # bytes covered: the log up to and including a newline
    lines: int                # lines covered
    last_hash: str            # sha256 of the covered log's last line (its newline included)
    segments: int
    total_runs: int
    tally: object             # summary.Tally of the current segment, or None before any record
    warnings: list
    chain_end: object = None  # hash (chain.py's line hash) of the last line on the log's hash chain


def view(repo, warn=None):
    """The current segment's summary, from the cache when it is valid, else from the whole log."""
    warn = warn or (lambda message: None)
    key = _secret(repo)
    identity = _identity(repo)
    shown = _load_view(repo, key, identity) if key is not None and identity is not None else None
    if shown is not None:
        for message in shown.warnings:
            warn(message)
        return shown
    state = _load(repo, key, identity) if key is not None and identity is not None else None
    cached = state is not None
    if state is not None:
        saved = state.offset
        try:
            _, uncovered = _extend(repo, state)
            fresh = state.offset - saved >= SAVE_EVERY_BYTES
        except _Rebuild:
            state, cached = None, False
    if state is None:
        state, uncovered = _full(repo)
        fresh = True
    if key is not None and identity is not None and fresh:
        _save(repo, key, identity, state)
    if uncovered:   # a last line without a newline counts in what is shown, not in what is kept
        state = _with_uncovered(repo, state, uncovered)
    for message in state.warnings:
        warn(message)
    tally = state.tally or summary.Tally(None, 0, history=False)
    shown = View(config=tally.config, summary=tally.summary(), last_runs=list(tally.last),
                 total_runs=state.total_runs, segment=tally.segment, warnings=list(state.warnings),
                 cached=cached, totals=tally.totals)
    if key is not None and identity is not None and not uncovered:
        _save_view(repo, key, identity, state, shown)
    return shown


def refresh(repo):
    """Bring the cache up to date with the log (after `run` appended to it); never fails the caller."""
    try:
        view(repo)
    except Exception:  # noqa: BLE001 - a cache is an optimisation: the next reader reads the log
        pass


class _Rebuild(Exception):
    """The cache cannot be continued: read the whole log."""


# --- the log's hash chain (chain.py): a tail counts only as the engine's own continuation

def _line_hash(line):
    """chain.py's hash of one log line (without its newline)."""
    from autoresearch.store import chain
    return chain.line_hash(line)


def _tip(repo):
    """The chain's tip ({hash, before, size}) from the git directory, or None (an unchained log)."""
    gd = git_dir(repo.root)
    if gd is None:
        return None
    try:
        with open(os.path.join(gd, "autoresearch", "tip.json"), encoding="utf-8") as f:
            data = json.load(f)
        return {"hash": str(data["hash"]), "before": str(data["before"]), "size": int(data["size"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _chained_tail(tail, end, tip):
    """The new chain end after `tail` when every record in it links to the one before (from
    `end`) and the tip names where it stops; raise _Rebuild otherwise: the whole read reports
    and ignores what is off the chain."""
    if end is None:
        raise _Rebuild()
    for line in tail.split(b"\n")[:-1]:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue   # malformed: the parse warns about it, the chain never held it
        if not isinstance(record, dict) or log.invalid(record):
            continue
        if record.get("prev") != end:
            raise _Rebuild()
        end = _line_hash(line)
    if end != tip["hash"] and end != tip["before"]:
        raise _Rebuild()
    return end


# --- reading the log

def _full(repo):
    """The state of the whole log (a later keep that re-reads earlier runs is counted exactly)."""
    state = _State(offset=0, lines=0, last_hash="", segments=0, total_runs=0, tally=None, warnings=[])
    try:
        with open(repo.log, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raw = b""
    runs = []
    uncovered = _consume(state, raw, runs, whole_log=repo.log)
    _settle(state, runs)
    tip = _tip(repo)
    if tip is not None and state.offset:
        last = raw[:state.offset].rstrip(b"\n").rsplit(b"\n", 1)[-1]
        state.chain_end = tip["hash"] if _line_hash(last) == tip["hash"] else None
    return state, uncovered


def _settle(state, runs):
    if state.tally is not None and state.tally.retro:
        state.tally.current, state.tally.longest = summary.streaks(runs, state.tally.remeasured())
        state.tally.retro = False


def _with_uncovered(repo, state, raw):
    """The state with the log's last line that has no newline (not kept in the cache)."""
    extra = []
    records = [r for r in map(log.typed, log.parse(raw, log.LOG_NAME, extra.append,
                                                   first_line=state.lines + 1)) if r is not None]
    state.warnings = state.warnings + extra
    try:
        for record in records:
            _add_record(state, record, None)
    except _Rebuild:   # rare: count the whole log, that line included, exactly
        state, uncovered = _full(repo)
        runs = []
        state.tally = None
        state.segments = state.total_runs = state.offset = state.lines = 0
        state.warnings = []
        with open(repo.log, "rb") as f:
            whole = f.read()
        _consume(state, whole + (b"" if whole.endswith(b"\n") else b"\n"), runs)
        _settle(state, runs)
    return state


def _extend(repo, state):
    """(whether lines were added, the bytes after the last newline) past the cached offset;
    raise _Rebuild when the cache does not fit the log."""
    if not _ends_at(repo, state.offset, state.last_hash, exact=False):
        raise _Rebuild()
    try:
        with open(repo.log, "rb") as f:
            f.seek(state.offset)
            tail = f.read()
    except OSError:
        raise _Rebuild() from None
    tip = _tip(repo)
    if tip is not None:
        state.chain_end = _chained_tail(tail, state.chain_end, tip)
    before = state.offset
    uncovered = _consume(state, tail, None)
    return state.offset != before, uncovered


def _consume(state, raw, runs, whole_log=None):
    """Parse `raw` (the log from state.offset on) into the state, up to its last newline;
    return what follows it (a torn line, or the last line of a hand-made log). `whole_log`: raw
    is the whole log at that path, read as log.read does (the hash chain checked there)."""
    end = raw.rfind(b"\n") + 1
    whole = raw[:end]
    if whole or whole_log is not None:   # an empty log too: the chain may say it lost its records
        warnings = []
        if whole_log is not None:
            records = log.verified(whole, whole_log, warnings.append)
        else:
            records = log.parse(whole, log.LOG_NAME, warnings.append, first_line=state.lines + 1)
        state.warnings.extend(warnings)
        for record in map(log.typed, records):
            if record is not None:
                _add_record(state, record, runs)
        state.offset += len(whole)
        state.lines += whole.count(b"\n")
        cut = whole.rfind(b"\n", 0, len(whole) - 1)
        state.last_hash = hashlib.sha256(whole[cut + 1:]).hexdigest()
    return raw[end:]


def _add_record(state, record, runs):
    """Add one typed record. `runs` collects the segment's runs on a whole read; None on a tail,
    where a keep that changes the meaning of earlier runs means reading the whole log."""
    if isinstance(record, log.Config):
        state.tally = summary.Tally(record, state.segments, history=False)
        state.segments += 1
        if runs is not None:
            runs.clear()
    elif isinstance(record, log.Run):
        if state.tally is None:
            state.tally = summary.Tally(None, 0, history=False)
            state.segments = 1
        state.tally.add(record)
        state.total_runs += 1
        if runs is not None:
            runs.append(record)
        elif state.tally.retro:
            raise _Rebuild()


# --- the cache file

def _secret(repo):
    """The cache's HMAC key, made on first use; None when there is no git directory to keep it."""
    gd = git_dir(repo.root)
    if gd is None:
        return None
    folder = os.path.join(gd, "autoresearch")
    path = os.path.join(folder, KEY_NAME)
    try:
        with open(path, "rb") as f:
            key = f.read()
        if len(key) == 32:
            return key
    except OSError:
        pass
    try:
        os.makedirs(folder, exist_ok=True)
        key = os.urandom(32)
        write_atomic(path, key, mode=0o600)
        return key
    except OSError:
        return None


def _identity(repo):
    """What the cache must have been made for: this log file and the chain's tip as it is now."""
    try:
        st = os.stat(repo.log)
    except OSError:
        return None
    tip = _tip(repo)
    return ({"version": VERSION, "dev": st.st_dev, "ino": st.st_ino, "log": os.path.realpath(repo.log)},
            None if tip is None else "chained")


def _path(repo):
    return os.path.join(repo.root, CACHE)


def _load(repo, key, identity):
    data = _read(_path(repo), key)
    if data is None:
        return None
    ident, tip = identity
    try:
        if data["identity"] != ident or data["tip"] != tip:
            return None
        tally = summary.Tally.from_json(data["tally"]) if data["tally"] is not None else None
        state = _State(offset=int(data["offset"]), lines=int(data["lines"]), last_hash=str(data["last_hash"]),
                       segments=int(data["segments"]), total_runs=int(data["total_runs"]), tally=tally,
                       warnings=[str(w) for w in data["warnings"]],
                       chain_end=None if data["chain_end"] is None else str(data["chain_end"]))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if state.offset < 0 or state.lines < 0 or not 0 <= state.lines <= state.offset:
        return None
    if tally is None and (state.segments or state.total_runs):
        return None
    if tally is not None and (tally.history or tally.segment != state.segments - 1 or tally.runs > state.total_runs
                              or state.total_runs > state.lines):
        return None
    return state


def _save(repo, key, identity, state):
    ident, tip = identity
    _write(_path(repo), key, {
        "identity": ident, "tip": tip, "offset": state.offset, "lines": state.lines,
        "last_hash": state.last_hash, "segments": state.segments, "total_runs": state.total_runs,
        "tally": state.tally.to_json() if state.tally is not None else None, "warnings": state.warnings,
        "chain_end": state.chain_end})


# --- the view of an unchanged log

def _summary_json(s):
    run = lambda r: r.to_json() if r is not None else None   # noqa: E731
    return {"segment": s.segment, "runs": s.runs, "counts": s.counts, "remeasured": sorted(s.remeasured),
            "baseline": run(s.baseline), "baseline_value": s.baseline_value, "best": run(s.best),
            "best_value": s.best_value, "change": s.change.to_json() if s.change else None, "noise": s.noise,
            "confidence": s.confidence, "consecutive_non_keeps": s.consecutive_non_keeps,
            "longest_non_keeps": s.longest_non_keeps, "max_iterations": s.max_iterations,
            "iterations_left": s.iterations_left}


def _number(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("not a number")
    return value


def _summary_from(d):
    run = lambda v: log.Run.from_json(v) if v is not None else None   # noqa: E731
    change = d["change"]
    noise = {k: (str(v) if k == "source" else _number(v)) for k, v in d["noise"].items()}
    if set(noise) != {"threshold", "mad", "sigma", "samples", "source"}:
        raise ValueError("noise")
    return summary.Summary(
        segment=int(d["segment"]), runs=int(d["runs"]), counts={k: int(d["counts"][k]) for k in summary.STATUSES},
        remeasured={int(n) for n in d["remeasured"]}, baseline=run(d["baseline"]),
        baseline_value=_number(d["baseline_value"]), best=run(d["best"]), best_value=_number(d["best_value"]),
        change=summary.Change(float(change["value"]), _number(change["percent"]),
                              None if change["word"] is None else str(change["word"]), str(change["text"]))
        if change is not None else None,
        noise=noise, confidence=_number(d["confidence"]), consecutive_non_keeps=int(d["consecutive_non_keeps"]),
        longest_non_keeps=int(d["longest_non_keeps"]), max_iterations=_number(d["max_iterations"]),
        iterations_left=_number(d["iterations_left"]), running_best=[])


def _save_view(repo, key, identity, state, shown):
    ident, tip = identity
    data = {"identity": ident, "tip": tip, "offset": state.offset, "last_hash": state.last_hash,
            "chain_end": state.chain_end,
            "config": shown.config.to_json() if shown.config else None, "summary": _summary_json(shown.summary),
            "last_runs": [r.to_json() for r in shown.last_runs], "total_runs": shown.total_runs,
            "segment": shown.segment, "warnings": shown.warnings,
            "totals": shown.totals.to_json()}
    _write(os.path.join(repo.root, VIEW), key, data)


def _load_view(repo, key, identity):
    data = _read(os.path.join(repo.root, VIEW), key)
    if data is None:
        return None
    ident, tip = identity
    try:
        if data["identity"] != ident or data["tip"] != tip or not _ends_at(repo, int(data["offset"]),
                                                                             str(data["last_hash"]), exact=True):
            return None
        if tip is not None:   # chained: the view counts only while the tip still names its last line
            now = _tip(repo)
            if now is None or data["chain_end"] is None or data["chain_end"] not in (now["hash"], now["before"]):
                return None
        s = _summary_from(data["summary"])
        last = [log.Run.from_json(r) for r in data["last_runs"]]
        if s.segment != int(data["segment"]) or len(last) > min(s.runs, summary.LAST_RUNS) \
                or s.runs > int(data["total_runs"]) or sum(s.counts.values()) > s.runs:
            return None
        return View(config=log.Config.from_json(data["config"]) if data["config"] is not None else None,
                    summary=s,
                    last_runs=[log.Run.from_json(r) for r in data["last_runs"]],
                    total_runs=int(data["total_runs"]), segment=int(data["segment"]),
                    warnings=[str(w) for w in data["warnings"]], cached=True,
                    totals=ledger.RunTotals.from_json(data["totals"]))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _ends_at(repo, offset, last_hash, exact):
    """True when the log's line ending at `offset` hashes to `last_hash` (and, `exact`, the
    log ends there)."""
    try:
        with open(repo.log, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < offset or (exact and size != offset):
                return False
            if offset == 0:
                return last_hash == ""
            start = max(0, offset - LAST_LINE_MAX)
            f.seek(start)
            head = f.read(offset - start)
    except OSError:
        return False
    if not head.endswith(b"\n"):
        return False
    cut = head.rfind(b"\n", 0, len(head) - 1)
    if cut < 0 and start > 0:
        return False
    return hmac.compare_digest(hashlib.sha256(head[cut + 1:]).hexdigest(), last_hash)


def _write(path, key, data):
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    mac = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, mac + b"\n" + payload, durable=False)
    except (OSError, ValueError):
        pass


def _read(path, key):
    """The JSON object of a cache file whose MAC checks, else None."""
    try:
        with open(path, "rb") as f:
            mac, _, payload = f.read().partition(b"\n")
    except OSError:
        return None
    expected = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
