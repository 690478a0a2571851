"""The ledger: what the research cost, in agent tokens and dollars, GPU time and budgets.

The agent's usage is read from Claude Code's own transcripts (one JSONL file per session,
`~/.claude/projects/<project>/<session>.jsonl`; hooks are told its path as `transcript_path`).
Every API answer is one `assistant` entry whose `message.usage` holds the billed tokens;
Claude Code writes one line per content block, all with the same message id and usage, so the
ledger counts each message id once. Error answers (`isApiErrorMessage`, model `<synthetic>`)
cost nothing and are skipped. Prices are list prices per million tokens (DEFAULT_PRICES, or a
JSON file given to `init --prices`, kept in the config header).

Which sessions count: every Claude Code session that owned the research session (the config's
and session.json's owner, and each session `night` started or the Stop hook saw as owner,
listed in .autoresearch/agents.json), from the segment's start on. Transcripts are read
incrementally: .autoresearch/ledger-cache.json keeps, per file, the offset read so far and the
usage per message, so a status call reads only what was appended since the last one.

GPU seconds of a run are its wall time times the GPUs `init` saw (at least one: on a machine
without a GPU it is the machine's time). Standard library only (the hooks call this).
"""

import glob
import json
import os
from dataclasses import asdict, dataclass, field

from autoresearch.store.files import read_json, write_json_atomic
from autoresearch.store.research import now_ms

AGENTS_NAME = "agents.json"
CACHE_NAME = "ledger-cache.json"
CACHE_VERSION = 1

# USD per million tokens: input, output, 5-minute and 1-hour cache writes, cache reads.
# Anthropic's list prices (https://platform.claude.com/docs/en/about-claude/pricing, "Model
# pricing"), as of 2026-12-01; the 5.5 generation's rows as that page lists them after the
# 2026-10-07 cache-read cut (cache reads 0.05x of input, writes 1.25x and 2x). Matched by the
# longest model-id prefix; `init --prices FILE` replaces the table.
PRICES_SOURCE = ("Anthropic list prices per million tokens, "
                 "https://platform.claude.com/docs/en/about-claude/pricing (as of 2026-12-01)")
DEFAULT_PRICES = {
    "claude-fable-5-1": (10.0, 50.0, 12.5, 20.0, 0.25),
    "claude-mythos-5-1": (10.0, 50.0, 12.5, 20.0, 0.25),
    "claude-fable-5": (10.0, 50.0, 12.5, 20.0, 1.0),
    "claude-mythos-5": (10.0, 50.0, 12.5, 20.0, 1.0),
    "claude-opus-5-5": (4.0, 20.0, 5.0, 8.0, 0.2),
    "claude-opus-5": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-opus-4-8": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-opus-4-7": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-opus-4-6": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-opus-4-5": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-opus-4-1": (15.0, 75.0, 18.75, 30.0, 1.5),
    "claude-opus-4": (15.0, 75.0, 18.75, 30.0, 1.5),
    "claude-sonnet-5-5": (2.0, 10.0, 2.5, 4.0, 0.1),
    "claude-sonnet-5": (2.0, 10.0, 2.5, 4.0, 0.2),
    "claude-sonnet-4": (3.0, 15.0, 3.75, 6.0, 0.3),
    "claude-haiku-5-5": (0.1, 0.5, 0.125, 0.2, 0.01),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 2.0, 0.1),
    "claude-haiku-3-5": (0.8, 4.0, 1.0, 1.6, 0.08),
}
PRICE_KEYS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")


# --------------------------------------------------------------------------- usage

@dataclass
class Usage:
    """Tokens and dollars of some API answers."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    messages: int = 0
    unpriced: int = 0        # answers of a model the price table does not know (cost counted as 0)

    @property
    def tokens(self):
        return self.input_tokens + self.output_tokens + self.cache_write_tokens + self.cache_read_tokens

    def add(self, message, prices):
        _ts, model, inp, out, cw5, cw1h, cr = message
        self.input_tokens += inp
        self.output_tokens += out
        self.cache_write_tokens += cw5 + cw1h
        self.cache_read_tokens += cr
        self.messages += 1
        price = price_for(model, prices)
        if price is None:
            self.unpriced += 1
        else:
            self.cost_usd += (inp * price[0] + out * price[1] + cw5 * price[2] + cw1h * price[3]
                              + cr * price[4]) / 1e6

    def to_dict(self):
        # the fields by hand, not dataclasses.asdict (a deep copy): the report makes one per run
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_write_tokens": self.cache_write_tokens, "cache_read_tokens": self.cache_read_tokens,
                "cost_usd": round(self.cost_usd, 6), "messages": self.messages, "unpriced": self.unpriced,
                "tokens": self.tokens}


def price_for(model, prices=None):
    """(input, output, write 5m, write 1h, read) per million tokens for `model`, or None."""
    table = prices or DEFAULT_PRICES
    best = None
    for prefix, row in table.items():
        if isinstance(model, str) and model.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return tuple(table[best]) if best else None


def load_prices(path):
    """A price table from a JSON file: {"model-prefix": {"input": 4, "output": 20, ...}, ...}.

    Raises ValueError with what is wrong. Missing cache prices follow the list-price rule
    (writes 1.25x and 2x of input, reads 0.1x).
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or not data:
        raise ValueError("the price file must be a JSON object of model-id prefixes")
    table = {}
    for prefix, row in data.items():
        if not isinstance(row, dict) or not all(_price(row.get(k)) for k in ("input", "output")):
            raise ValueError(f"{prefix!r}: give at least \"input\" and \"output\" in USD per million tokens")
        inp = float(row["input"])
        defaults = {"cache_write_5m": inp * 1.25, "cache_write_1h": inp * 2, "cache_read": inp * 0.1}
        values = []
        for key in PRICE_KEYS:
            value = row.get(key, defaults.get(key))
            if not _price(value):
                raise ValueError(f"{prefix!r}: {key} must be a number >= 0")
            values.append(float(value))
        table[prefix] = tuple(values)
    return table


def _price(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e6


def _field(record, name):
    """A field of a typed log record (log.Config, log.Run), None when there is no record."""
    return getattr(record, name, None) if record is not None else None


def config_prices(config):
    """The config header's price table (as written by `init --prices`), else the defaults."""
    raw = _field(config, "prices")
    if isinstance(raw, dict) and raw:
        try:
            return {k: tuple(float(x) for x in v) for k, v in raw.items() if len(v) == len(PRICE_KEYS)}
        except (TypeError, ValueError):
            pass
    return DEFAULT_PRICES


def prices_source(config):
    raw = _field(config, "prices")
    return "the price file given to `init --prices`" if isinstance(raw, dict) and raw else PRICES_SOURCE


# --------------------------------------------------------------------------- transcripts

def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def message_of(entry):
    """(id, (timestamp_ms, model, input, output, write 5m, write 1h, read)) of a billed answer, or None."""
    if entry.get("type") != "assistant" or entry.get("isApiErrorMessage"):
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("model") == "<synthetic>":
        return None
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    key = message.get("id") or entry.get("requestId") or entry.get("uuid")
    if not isinstance(key, str):
        return None
    written = _int(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
    hour = min(_int(split.get("ephemeral_1h_input_tokens")), written)
    return key, (timestamp_ms(entry.get("timestamp")), str(message.get("model") or ""),
                 _int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                 written - hour, hour, _int(usage.get("cache_read_input_tokens")))


def timestamp_ms(text):
    """ISO 8601 (as Claude Code writes it, UTC with Z) to epoch milliseconds; 0 when unreadable."""
    from datetime import datetime  # noqa: PLC0415 - only when a transcript is read
    if not isinstance(text, str):
        return 0
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def read_messages(path, cached=None):
    """Billed answers in one transcript: (state for the cache, {id: message}).

    `cached` is what an earlier call returned for the same file: only bytes appended since are
    read (a file that shrank or was replaced is read again). A line not yet ended by a newline
    is left for the next call.
    """
    try:
        st = os.stat(path)
    except OSError:
        return cached, (cached or {}).get("messages", {})
    if not cached or cached.get("ino") != st.st_ino or cached.get("offset", 0) > st.st_size:
        cached = {"ino": st.st_ino, "offset": 0, "messages": {}}
    messages = dict(cached.get("messages", {}))
    offset = cached.get("offset", 0)
    if st.st_size > offset:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(st.st_size - offset)
        end = data.rfind(b"\n") + 1
        for line in data[:end].split(b"\n"):
            if b'"assistant"' not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            found = message_of(entry) if isinstance(entry, dict) else None
            if found:
                key, message = found
                first = messages.get(key)
                # The same answer is written once per content block: keep its first time, last usage.
                messages[key] = (first[0] if first else message[0],) + tuple(message[1:])
        offset += end
    return {"ino": st.st_ino, "offset": offset, "messages": messages}, messages


def config_dirs():
    dirs = [os.environ.get("CLAUDE_CONFIG_DIR"), os.path.join(os.path.expanduser("~"), ".claude")]
    return [d for d in dirs if d]


def transcript_files(session_id, known=None):
    """The transcript of a session and its subagents' transcripts."""
    main = known if known and os.path.isfile(known) else None
    if main is None:
        for folder in config_dirs():
            found = glob.glob(os.path.join(glob.escape(folder), "projects", "*", f"{glob.escape(session_id)}.jsonl"))
            if found:
                main = max(found, key=os.path.getmtime)
                break
    if main is None:
        return []
    subagents = glob.glob(os.path.join(glob.escape(main[: -len(".jsonl")]), "subagents", "*.jsonl"))
    return [main, *sorted(subagents)]


# --------------------------------------------------------------------------- the sessions that count

def agents_path(repo):
    return os.path.join(repo.state, AGENTS_NAME)


def register(repo, session_id, transcript=None):
    """Count `session_id` (an owner of the research session) in the ledger from now on."""
    if not isinstance(session_id, str) or not session_id:
        return
    data = read_json(agents_path(repo)) or {}
    sessions = data.get("sessions") if isinstance(data.get("sessions"), dict) else {}
    entry = sessions.get(session_id) if isinstance(sessions.get(session_id), dict) else {}
    if entry and (transcript is None or entry.get("transcript") == transcript):
        return
    entry = dict(entry, transcript=transcript or entry.get("transcript"), since=entry.get("since", now_ms()))
    sessions[session_id] = entry
    os.makedirs(repo.state, exist_ok=True)
    write_json_atomic(agents_path(repo), {"sessions": sessions})


def sessions_of(repo, config, session):
    """{session id: known transcript path or None} of every owner of the research session."""
    data = read_json(agents_path(repo)) or {}
    known = data.get("sessions") if isinstance(data.get("sessions"), dict) else {}
    found = {sid: (e.get("transcript") if isinstance(e, dict) else None) for sid, e in known.items()}
    for sid in (_field(config, "owner_session"), (session or {}).get("owner_session")):
        if isinstance(sid, str) and sid:
            found.setdefault(sid, None)
    return found


def agent_messages(repo, config, session):
    """Every billed answer of the owner sessions since the segment started, sorted by time."""
    cache_path = os.path.join(repo.state, CACHE_NAME)
    cache = read_json(cache_path) or {}
    files = cache.get("files") if cache.get("version") == CACHE_VERSION and isinstance(cache.get("files"), dict) \
        else {}
    changed = False
    messages = {}
    for sid, known in sorted(sessions_of(repo, config, session).items()):
        for path in transcript_files(sid, known):
            before = files.get(path)
            state, found = read_messages(path, before)
            if state is not before:
                files[path] = state
                changed = True
            messages.update(found)
    if changed:
        try:
            os.makedirs(repo.state, exist_ok=True)
            write_json_atomic(cache_path, {"version": CACHE_VERSION, "files": files})
        except OSError:
            pass  # a read-only repo: the next call reads the transcripts again
    start = _field(config, "timestamp") or 0
    return sorted((tuple(m) for m in messages.values() if m[0] >= start), key=lambda m: m[0])


# --------------------------------------------------------------------------- the ledger of a segment

class RunTotals:
    """What the ledger's totals read of a segment's runs: how many, their summed wall time and
    the last timestamp. Built from the runs (`of`) or kept run by run (`add`, the log cache's
    tally), the same sums in the same order, so both give the very same ledger."""
    __slots__ = ("runs", "wall_seconds", "last_timestamp")

    def __init__(self, runs=0, wall_seconds=0, last_timestamp=None):
        self.runs, self.wall_seconds, self.last_timestamp = runs, wall_seconds, last_timestamp

    @classmethod
    def of(cls, runs):
        totals = cls()
        for r in runs:
            totals.add(r)
        return totals

    def add(self, run):
        self.runs += 1
        self.wall_seconds += run.duration_s if isinstance(run.duration_s, (int, float)) else 0.0
        stamp = run.timestamp
        if isinstance(stamp, (int, float)) and (self.last_timestamp is None or stamp > self.last_timestamp):
            self.last_timestamp = stamp

    def to_json(self):
        return [self.runs, self.wall_seconds, self.last_timestamp]

    @classmethod
    def from_json(cls, data):
        """Back from to_json(); raises ValueError on anything else (the cache is a file)."""
        runs, wall, last = data
        if type(runs) is not int or runs < 0 or type(wall) not in (int, float) \
                or not (last is None or type(last) in (int, float)):
            raise ValueError("run totals")
        return cls(runs, wall, last)


@dataclass
class Ledger:
    agent: Usage = field(default_factory=Usage)
    per_run: list = field(default_factory=list)   # [{run, tokens..., cost_usd, gpu_s, wall_s}], on request
    runs: int = 0
    since_last_run: Usage = field(default_factory=Usage)
    wall_seconds: float = 0.0
    gpu_seconds: float = 0.0
    gpus: int = 0
    improvements: int = 0
    sessions: int = 0
    prices_source: str = PRICES_SOURCE

    def to_dict(self):
        cost = self.agent.cost_usd
        gpu_h = self.gpu_seconds / 3600
        return {
            "agent": self.agent.to_dict(),
            "since_last_run": self.since_last_run.to_dict(),
            "wall_seconds": round(self.wall_seconds, 3),
            "gpu_seconds": round(self.gpu_seconds, 3),
            "gpu_hours": round(gpu_h, 6),
            "gpus": self.gpus,
            "improvements": self.improvements,
            "cost_per_improvement_usd": round(cost / self.improvements, 6) if self.improvements else None,
            "runs_per_gpu_hour": round(self.runs / gpu_h, 3) if gpu_h > 0 else None,
            "sessions": self.sessions,
            "prices_source": self.prices_source,
        }


def gpu_count(config):
    hardware = _field(config, "hardware")
    gpus = hardware.get("gpus") if isinstance(hardware, dict) else None
    return len(gpus) if isinstance(gpus, list) else 0


def build(repo, config, runs, session, improvements=0, per_run=False):
    """The segment's ledger: the totals (agent usage, GPU and wall time) and, with `per_run`,
    each run's share: the answers between the previous run's record and this one's.
    `runs`: the segment's runs, or their RunTotals (the log cache's; not with `per_run`).
    `improvements`: the kept runs after the baseline (from the one summary, summary.summarise)."""
    prices = config_prices(config)
    messages = agent_messages(repo, config, session)
    gpus = gpu_count(config)
    totals = runs if isinstance(runs, RunTotals) else RunTotals.of(runs)
    ledger = Ledger(gpus=gpus, improvements=improvements, prices_source=prices_source(config),
                    sessions=len(sessions_of(repo, config, session)), runs=totals.runs)
    ledger.wall_seconds = totals.wall_seconds
    ledger.gpu_seconds = ledger.wall_seconds * max(1, gpus)
    walls = [r.duration_s if isinstance(r.duration_s, (int, float)) else 0.0 for r in runs] if per_run else ()
    for message in messages:
        ledger.agent.add(message, prices)
    i = 0
    for run, wall in zip(runs, walls) if per_run else ():
        stamp = run.timestamp if isinstance(run.timestamp, (int, float)) else None
        usage = Usage()
        while i < len(messages) and stamp is not None and messages[i][0] <= stamp:
            usage.add(messages[i], prices)
            i += 1
        ledger.per_run.append(dict(usage.to_dict(), run=run.run, wall_s=wall, gpu_s=round(wall * max(1, gpus), 3)))
    if not per_run:
        last = totals.last_timestamp
        i = 0
        while last is not None and i < len(messages) and messages[i][0] <= last:
            i += 1
    for message in messages[i:]:
        ledger.since_last_run.add(message, prices)
    return ledger


# --------------------------------------------------------------------------- budgets

@dataclass
class Budgets:
    """The limits of the segment: from the config header, tightened by the night's own."""
    max_hours: object = None
    deadline_ms: object = None
    max_gpu_hours: object = None
    max_cost: object = None

    def to_dict(self):
        return asdict(self)


def budgets_of(config, session):
    night = (session or {}).get("night") if isinstance((session or {}).get("night"), dict) else {}
    if not _alive(night.get("pid")):
        night = {}   # a night killed without a word: its own limits went with it
    hours, started = _field(config, "max_hours"), _field(config, "timestamp")
    deadlines = []
    if _number(hours) and _number(started):
        deadlines.append(started + hours * 3.6e6)
    if _number(night.get("deadline_ms")):
        deadlines.append(night["deadline_ms"])
    return Budgets(max_hours=hours if _number(hours) else None,
                   deadline_ms=int(min(deadlines)) if deadlines else None,
                   max_gpu_hours=_tightest(_field(config, "max_gpu_hours"), night.get("max_gpu_hours")),
                   max_cost=_tightest(_field(config, "max_cost"), night.get("max_cost")))


def _alive(pid):
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _tightest(*values):
    given = [v for v in values if _number(v)]
    return min(given) if given else None


def spent(budgets, ledger, now=None):
    """The message saying which budget is spent, with the figure, or None while all have room."""
    now = now_ms() if now is None else now
    if budgets.deadline_ms is not None and now >= budgets.deadline_ms:
        return f"the time budget is spent (deadline {_clock(budgets.deadline_ms)} passed)"
    if budgets.max_gpu_hours is not None and ledger.gpu_seconds / 3600 >= budgets.max_gpu_hours:
        return (f"the GPU-hour budget is spent ({ledger.gpu_seconds / 3600:.3g} of "
                f"{budgets.max_gpu_hours:g} GPU-hours)")
    if budgets.max_cost is not None and ledger.agent.cost_usd >= budgets.max_cost:
        return (f"the cost budget is spent (${ledger.agent.cost_usd:.2f} of ${budgets.max_cost:.2f} "
                "on the agent's tokens)")
    return None


def _clock(ms):
    import time  # noqa: PLC0415
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def figures(repo, config, runs, session, improvements=0):
    """(ledger, budgets, spent message or None): what status, the hooks and `run` all read."""
    ledger = build(repo, config, runs, session, improvements)
    budgets = budgets_of(config, session)
    return ledger, budgets, spent(budgets, ledger)


def text(ledger_dict):
    """Status lines of the ledger."""
    a = ledger_dict["agent"]
    per = ledger_dict["cost_per_improvement_usd"]
    rate = ledger_dict["runs_per_gpu_hour"]
    return [f"agent: {a['tokens']:,} tokens ({a['input_tokens']:,} in, {a['output_tokens']:,} out, "
            f"{a['cache_write_tokens']:,} cache writes, {a['cache_read_tokens']:,} cache reads) in "
            f"{a['messages']} answers, ${a['cost_usd']:.2f}"
            + (f" ({a['unpriced']} answers of an unpriced model)" if a["unpriced"] else ""),
            f"cost per kept improvement: {'-' if per is None else f'${per:.2f}'} "
            f"({ledger_dict['improvements']} improvement(s)); GPU time {ledger_dict['gpu_hours']:.3g} h; "
            f"runs per GPU-hour: {'-' if rate is None else f'{rate:.3g}'}"]
