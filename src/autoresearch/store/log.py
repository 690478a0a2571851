"""The append-only experiment log `autoresearch.jsonl`, and its typed records.

`Config` (a segment's header) and `Run` (one experiment) are the one place that lists the
log's fields: every writer builds records through them and every reader reads through them
(`load()`). The field names are pi-autoresearch's, so its dashboard reads the log; fields we do
not know (written by other tools) are kept in `extra` and survive a round trip.

One JSON object per line. A line is written whole or not at all: each record is one
os.write() of the full line on an O_APPEND descriptor, followed by fsync. If a crash left
a torn last line, the next append starts on a fresh line so the torn one stays isolated
and every reader skips it with a warning.
"""

import errno
import json
import math
import os
import sys
from dataclasses import dataclass, field, fields

from autoresearch.store import anchor, chain

LOG_NAME = "autoresearch.jsonl"


def append(path, record, warn=None):
    """Append one record (a `Run`, a `Config` or a dict) as a JSON line, durably.

    A record the strict log cannot hold (a non-finite number, text that is not Unicode) is
    written sanitised, with a warning, rather than lost: a record that cannot be written
    would leave the run unrecorded and the engine retrying it forever.

    The record is linked into the log's hash chain first (chain.py): it gets `prev`, and a
    typed record gets it too, so the caller holds the record as it was written.
    """
    typed_record = record if isinstance(record, (Run, Config)) else None
    if typed_record is not None:
        record = record.to_json()
    record, folder = chain.link(path, record, warn)
    if typed_record is not None and folder:
        typed_record.prev = record[chain.FIELD]
    try:
        data = _encode(record)
    except (ValueError, TypeError, RecursionError) as exc:
        (warn or _warn_stderr)(f"run {record.get('run', '?')}: record sanitised for the log "
                               f"({type(exc).__name__}: {exc})")
        data = _encode(sanitise(record))
    fresh = folder is not None and not os.path.exists(path)
    # O_RDWR, not O_WRONLY: the torn-line check reads the last byte with pread.
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        line = data
        if _ends_without_newline(fd):
            data = b"\n" + data
        size = os.fstat(fd).st_size
        if folder:
            # The anchor outside the repo first (it refuses a chain that is not its own), then the tip.
            anchor.advance(path, line, record[chain.FIELD], size + len(data), fresh=fresh)
            chain.begin(folder, line, record[chain.FIELD], size + len(data))
        written = os.write(fd, data)
        if written != len(data):
            # A short write (a file size limit, a disk that filled up): no torn line is left.
            os.ftruncate(fd, size)
            raise OSError(errno.EFBIG, "the log could not take the whole record (short write)", path)
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
    return verified(raw, path, warn)


def verified(raw, path, warn):
    """The records of `raw` (the whole log at `path`) that count: valid, and on the log's hash
    chain (chain.py); lines off it are reported with their line number. A log that lost the
    engine's last record is read from the engine's copy."""
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
            return _on_chain(kept, verdict)
        warn(f"{os.path.basename(path)} and the engine's copy both lost the last record the engine "
             "wrote; reading the log as it is")
        return [record for _, _, record in entries]
    for number, why in verdict.foreign:
        warn(f"{os.path.basename(path)}:{number}: skipped a line {why}")
    return _on_chain(entries, verdict)


def _on_chain(entries, verdict):
    return [record for number, _, record in entries if number in verdict.accepted]


def parse(raw, name, warn, first_line=1):
    """The valid records of `raw` (whole lines of the log, numbered from `first_line` for the
    warnings); what read() does before the chain check, also used by the log cache on a log's
    new tail."""
    return [record for _, _, record in _entries(raw, name, warn, first_line)]


def _entries(raw, name, warn, first_line=1):
    """[(line number, raw line, record)] of the valid records in `raw`; a warning per bad line."""
    entries = []
    for number, line in enumerate(raw.split(b"\n"), start=first_line):
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


STATUSES = ("keep", "discard", "crash", "timeout", "checks_failed", "tampered")
DIRECTIONS = ("lower", "higher")


def _reject_constant(name):
    raise ValueError(f"{name} is not strict JSON")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


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
    if record.get("metric") is not None and not is_finite(record["metric"]):
        return f"run {run}: metric {record['metric']!r} is not a finite number"
    found = record.get("metrics")
    if found is not None and not (isinstance(found, dict) and all(is_finite(v) for v in found.values())):
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


# --- the typed records ---

def is_finite(value):
    """The one finite-number check: an int or float (not a bool) that is neither NaN nor ±inf."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value):
    t = type(value)
    if t is float:
        return value if value - value == 0 else None   # NaN and ±inf are not
    return value if t is int else None


def _whole(value):
    return value if type(value) is int else None


def _text(value):
    if type(value) is str:
        return value
    return json.dumps(sanitise(value), ensure_ascii=False)


def _object(value):
    return value if type(value) is dict else {}


def _maybe_object(value):
    return value if type(value) is dict else None


def _texts(value):
    return [str(v) for v in value] if type(value) is list else []


# How each field is read from JSON (a value of the wrong type reads as the field's empty value).
_READ = {int: _whole, float: _number, str: _text, dict: _object, "dict?": _maybe_object, list: _texts,
         "list?": lambda v: _texts(v) if isinstance(v, list) else None}


class _Record:
    """from_json / to_json for a dataclass whose fields mirror the JSON keys (JSON_NAMES renames)."""

    JSON_NAMES = {}

    @classmethod
    def _plan(cls):
        """(attribute, JSON key, reader, empty value factory) per field, computed once per class."""
        plan = cls.__dict__.get("_PLAN")
        if plan is None:
            plan = []
            for f in fields(cls):
                if f.name == "extra":
                    continue
                kind = f.metadata.get("json", f.type)
                empty = f.default_factory if kind in (dict, list) else None
                plan.append((f.name, cls.JSON_NAMES.get(f.name, f.name), _READ[kind], empty))
            cls._PLAN = plan
            cls._KNOWN = frozenset(key for _, key, _, _ in plan)
            cls._FACTORIES = {f.name: f.default_factory for f in fields(cls)
                              if f.name != "extra" and f.default_factory in (dict, list)}
            cls._DEFAULTS = {f.name: f.default for f in fields(cls)
                             if f.name != "extra" and f.name not in cls._FACTORIES}
            cls._BY_KEY = {key: (name, reader, empty) for name, key, reader, empty in plan}
        return plan

    @classmethod
    def from_json(cls, data):
        # Built without the dataclass __init__, in one pass over the record's keys: the engine
        # reads every record of the log through here (50,000 runs in a long night).
        cls._plan()
        by_key, state, extra = cls._BY_KEY, dict(cls._DEFAULTS), {}
        for key, value in data.items():
            spec = by_key.get(key)
            if spec is None:
                extra[key] = value
                continue
            name, reader, empty = spec
            if value is not None:
                value = reader(value)
            state[name] = empty() if value is None and empty is not None else value
        for name, factory in cls._FACTORIES.items():
            if name not in state:
                state[name] = factory()
        state["extra"] = extra
        record = cls.__new__(cls)
        record.__dict__ = state
        return record

    def to_json(self):
        """The JSON object: the known fields in their order, then the fields of other tools."""
        out = {key: getattr(self, name) for name, key, _, _ in self._plan()}
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


def _optional(kind):
    return field(default=None, metadata={"json": kind})


@dataclass
class Config(_Record):
    """A segment's header: what is measured, how, and by which rule."""

    JSON_NAMES = {"kind": "type", "metric_name": "metricName", "metric_unit": "metricUnit",
                  "direction": "bestDirection"}

    kind: str = "config"
    name: str = ""
    metric_name: str = "metric"
    metric_unit: str = ""
    direction: str = "lower"
    segment: int = None
    timestamp: float = None
    command: str = None
    scope: list = field(default_factory=list)
    fixed: dict = field(default_factory=dict)
    timeout_s: float = None
    checks: str = None
    checks_timeout_s: float = None
    output_cap_mb: float = None   # output.log keeps its head and tail up to this (None: the default)
    max_iterations: int = None
    max_hours: float = None        # budgets that stop the loop (ledger.py): wall hours since init,
    max_gpu_hours: float = None    # hours the runs held the GPU(s),
    max_cost: float = None         # dollars of the agent's tokens
    prices: object = _optional("dict?")   # the ledger's price table from `init --prices`, else None
    noise_runs: int = None
    rule: dict = field(default_factory=dict)
    policies: dict = field(default_factory=dict)
    owner_session: str = None
    hardware: object = _optional("dict?")
    template: str = None
    start_commit: str = None
    engine: str = None
    early_abort: object = _optional("dict?")   # {"at": progress} when `init --early-abort` turned it on
    caches: object = _optional("list?")   # folders the benchmark may write beyond its own (caches.py); None: the template's
    prev: str = None         # the log's hash chain: the hash of the line before (chain.py)
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data):
        config = super().from_json(data)
        config.name = config.name or ""
        config.metric_unit = config.metric_unit or ""
        config.direction = "higher" if config.direction == "higher" else "lower"
        return config


@dataclass
class Run(_Record):
    """One experiment: pi-autoresearch's ten fields first, then the engine's own."""

    run: int = 0
    commit: str = None
    metric: float = None
    metrics: dict = field(default_factory=dict)
    status: str = None
    description: str = ""
    timestamp: float = None
    segment: int = None
    confidence: float = None
    asi: dict = field(default_factory=dict)
    duration_s: float = None
    reason: str = None
    best_before: float = None
    threshold: float = None
    rule: object = _optional("dict?")   # the rule's parameters at this decision (decide.rule_record)
    diagnosis: object = _optional("dict?")
    run_dir: str = None
    ref: str = None
    scope_hash: str = None
    scope_lines: int = None
    repeat_of: int = None
    exit_code: int = None
    policy: str = None
    value: float = None      # the decided value (median of the code's measurements) at decision time
    sandbox: str = None      # what confined the benchmark: "bwrap+landlock-N", "bwrap", "landlock-N" or "none"
    output_cut_bytes: int = None   # bytes of output left out of output.log (its cap)
    tampered: object = _optional("list?")   # status tampered: what the run changed (the engine restored it)
    early_abort: object = _optional("dict?")   # where the engine stopped a run behind the best (earlyabort.py)
    prev: str = None         # the log's hash chain: the hash of the line before (chain.py)
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data):
        run = super().from_json(data)
        run.description = run.description or ""
        if not all(map(is_finite, run.metrics.values())):   # the log's reader already refused these
            run.metrics = {k: v for k, v in run.metrics.items() if is_finite(v)}
        return run

    @property
    def measured(self):
        """A measurement: a kept or discarded run with a finite metric."""
        status = self.status
        return (status == "discard" or status == "keep") and _number(self.metric) is not None


def typed(record):
    """A raw, valid record as a `Config` or a `Run` (None for lines of other tools)."""
    if is_config(record):
        return Config.from_json(record)
    if is_run(record):
        return Run.from_json(record)
    return None


@dataclass
class Segment:
    index: int
    config: object          # Config, or None for runs before any header (a hand-made log)
    runs: list


@dataclass
class Log:
    """The whole log, typed: records in order (Config and Run) and their segments."""

    records: list
    segments: list

    @property
    def runs(self):
        return [r for r in self.records if isinstance(r, Run)]

    @property
    def current(self):
        return self.segments[-1] if self.segments else None


def load(path, warn=None):
    """Read the log into typed records (malformed and invalid lines skipped with a warning)."""
    return from_records(read(path, warn=warn))


def from_records(raw):
    records = [t for t in map(typed, raw) if t is not None]
    segs = []
    for record in records:
        if isinstance(record, Config):
            segs.append(Segment(len(segs), record, []))
        else:
            if not segs:
                segs.append(Segment(0, None, []))
            segs[-1].runs.append(record)
    return Log(records, segs)
