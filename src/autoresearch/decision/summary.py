"""The one summary of the log: what every view (status, brief, the hooks, the report, serve,
export) reads, computed by one function.

`summarise()` is the one summary of a segment (baseline, best, change, counts, streaks, noise,
confidence, iterations left, the running best at every run); `status_object()` is what
`status --json` prints and `report --json` carries as "status"; views/status.py prints it as
`status` and condenses it as `brief` for a fresh context (the hooks inject it); the report and
serve read the same summary. Only `active`, `owner_session`, `running` and `pool` look beyond
the log (session.json, the lock, the pool's files). The meaning of each number is written in
references/decision-rule.md.
"""

import bisect
import os
from dataclasses import dataclass, field

from autoresearch import agent_sandbox
from autoresearch.decision import decide
from autoresearch.store import anchor, ledger, log, night_log, poolfiles, state


STATUSES = log.STATUSES
LAST_RUNS = 5


@dataclass
class Change:
    """The best against the baseline, in one sign convention: `value` and `percent` are the
    improvement (positive = better), `word` says which way, `text` is what every view prints."""

    value: float
    percent: object        # None when the baseline is 0
    word: object           # "better", "worse", or None while the incumbent is the baseline's code
    text: str

    def to_json(self):
        return {"value": self.value, "percent": self.percent, "word": self.word, "text": self.text}


@dataclass
class Summary:
    """One segment, summarised: what every view shows (status, brief, hooks, report, serve, export)."""

    segment: int
    runs: int
    counts: dict
    remeasured: set          # run numbers of the discards that re-measured kept code (noise samples)
    baseline: object         # log.Run of the baseline, or None
    baseline_value: object   # the median of the baseline code's measurements
    best: object             # log.Run of the incumbent, or None
    best_value: object       # the median of the incumbent code's measurements
    change: object           # Change, or None before a baseline
    noise: dict              # decide.noise()
    confidence: object       # best against baseline in noise sigmas; None unless noise was measured
    consecutive_non_keeps: int
    longest_non_keeps: int
    max_iterations: object
    iterations_left: object
    running_best: list       # after each run, the value of the code that was the incumbent then (None before the baseline)
    # Each run's code and each code's sorted measurements, for the value of any run's code
    # (the exports' rows); None in the log cache's summary, which keeps only the numbers above.
    codes: object = field(default=None, repr=False)    # run number -> code
    groups: object = field(default=None, repr=False)   # code -> its measurements, sorted

    @property
    def noise_measured(self):
        return self.noise["source"] == "repeats"

    def measurements(self, record):
        """The sorted measurements of a run's code (empty when it has none)."""
        if self.groups is None:
            raise ValueError("this summary keeps no per-code values (the log cache's); use summarise()")
        return self.groups.get(self.codes.get(record.run), [])

    def value_of(self, record):
        """The value of a run's code, as the baseline and the best have it: the median of the
        code's measurements (the run's own metric when its code has none)."""
        values = self.measurements(record)
        return decide.sorted_median(values) if values else record.metric


def summarise(config, runs, segment=0):
    """The one summary of a segment: its `log.Config` (or None) and its `log.Run`s, in order.

    - baseline: the first kept run; its value is the median of its code's measurements;
    - best: the incumbent (the run that introduced the code HEAD holds); its value likewise;
    - change: exactly 0 and "no improvement yet" while the incumbent is the baseline's code;
    - streaks count ideas: re-measurements of kept code neither count nor end one;
    - confidence only when noise was measured (some code measured at least twice).
    Built one run at a time by `Tally`, which the log cache (logcache.py) keeps between
    commands, so a long log is summarised once and then only its new runs are added.
    """
    tally = Tally(config, segment)
    for r in runs:
        tally.add(r)
    if tally.retro:   # a later keep made earlier discards noise samples: count the streaks again
        tally.current, tally.longest = streaks(runs, tally.remeasured())
        tally.retro = False
    return tally.summary()


class Tally:
    """A segment's summary, one run at a time: what `summarise` needs to know of the runs so far
    (counts, each code's sorted measurements, the first keep of each code, the streaks, the
    running best, the last runs), and nothing of the runs themselves beyond that.

    `retro` turns True when a keep gives a code that earlier discards re-measured (`repeat_of`):
    they become noise samples after the fact, so the streaks must be counted again from the
    runs (summarise does; the cache reads the log again)."""

    def __init__(self, config, segment=0, history=True):
        self.config, self.segment, self.history = config, segment, history
        self.runs = 0
        self.pool_runs = 0          # a pool's controls and confirmation re-runs: not in the budget
        self.counts = {s: 0 for s in STATUSES}
        self.keys = {}              # run number -> code
        self.kept_codes = set()
        self.repeats = {}           # run number -> code, for the discards that name a run they re-measure
        self.baseline = None        # log.Run
        self.first_keep = {}        # code -> the first log.Run that kept it
        self.last_keep = None       # the code of the last keep
        self.groups = {}            # code -> its measurements, sorted
        self.current = self.longest = 0
        self.running_best = []      # after each run (only with history: the cache keeps none)
        self.rb_incumbent, self.rb_fallback = None, None
        self.last = []              # the last LAST_RUNS log.Run
        self.totals = ledger.RunTotals()   # what the ledger reads of the runs (count, wall time, last time)
        self.retro = False

    def add(self, r):
        if r.scope_hash:
            key = r.scope_hash
        elif r.repeat_of in self.keys:
            key = self.keys[r.repeat_of]
        else:
            key = decide.code_key(r)
        self.keys[r.run] = key
        self.runs += 1
        if r.extra.get("role") in ("control", "confirm"):
            self.pool_runs += 1
        if r.status in self.counts:
            self.counts[r.status] += 1
        if r.measured:
            bisect.insort(self.groups.setdefault(key, []), r.metric)
        if r.status == "keep":
            if key not in self.kept_codes and key in self.repeats.values():
                self.retro = True
            self.kept_codes.add(key)
            self.first_keep.setdefault(key, r)
            if not isinstance(self.first_keep[key], log.Run):
                self.retro = True   # a code kept again whose first keep the saved tally holds as a number
            self.last_keep = key
            if self.baseline is None:
                self.baseline = r
            self.current = 0
        else:
            if r.status == "discard" and r.repeat_of is not None:
                self.repeats[r.run] = key
            if not (r.status == "discard" and r.repeat_of is not None and key in self.kept_codes):
                self.current += 1
                self.longest = max(self.longest, self.current)
        if r.status == "keep" and key != self.rb_incumbent:
            self.rb_incumbent, self.rb_fallback = key, r.metric
        if self.history:   # the incumbent's code now; its value is read at the end (one value per code)
            self.running_best.append([self.rb_incumbent, self.rb_fallback])
        self.last = (self.last + [r])[-LAST_RUNS:]
        self.totals.add(r)

    def remeasured(self):
        return {run for run, key in self.repeats.items() if key in self.kept_codes}

    def value_of(self, record):
        values = self.groups.get(self.keys.get(record.run, decide.code_key(record)))
        return decide.sorted_median(values) if values else record.metric

    def noise(self, rules):
        """decide.noise() from the sorted measurements of each code."""
        return decide.noise_of(self.groups.values(), rules)

    def summary(self):
        config = self.config
        rules = decide.Rules.from_config(config)
        base = self.baseline
        best = self.first_keep[self.last_keep] if self.last_keep is not None else None
        base_value = self.value_of(base) if base else None
        best_value = self.value_of(best) if best else None
        stats = self.noise(rules)
        same = base is not None and self.keys[base.run] == self.keys[best.run]
        change = _change(rules.direction, base_value, best_value, same) if base else None
        confidence = None
        if change is not None and not same and stats["source"] == "repeats":
            confidence = decide.confidence(change.value, stats["sigma"])
        budget = config.max_iterations if config else None
        return Summary(
            segment=self.segment, runs=self.runs, counts=dict(self.counts), remeasured=self.remeasured(),
            baseline=base, baseline_value=base_value, best=best, best_value=best_value, change=change,
            noise=stats, confidence=confidence, consecutive_non_keeps=self.current,
            longest_non_keeps=self.longest, max_iterations=budget,
            iterations_left=max(0, budget - (self.runs - self.pool_runs)) if budget else None,
            running_best=self._running_values(), codes=self.keys, groups=self.groups)

    def _running_values(self):
        """The running best: each run's incumbent code at its value over the whole segment, so a
        code has one value everywhere (the chart's line starts at the baseline the header shows)."""
        values = {}
        out = []
        for key, fallback in self.running_best:
            if key not in values:
                measured = self.groups.get(key) if key is not None else None
                values[key] = decide.sorted_median(measured) if measured else None
            out.append(values[key] if values[key] is not None else fallback)
        return out

    # -- kept between commands by logcache.py (JSON: the cache is a file anyone could write)

    def to_json(self):
        return {"config": self.config.to_json() if self.config else None, "segment": self.segment,
                "runs": self.runs, "pool_runs": self.pool_runs, "counts": self.counts, "keys": [list(self.keys), list(self.keys.values())],
                "kept_codes": sorted(self.kept_codes), "repeats": [[k, v] for k, v in self.repeats.items()],
                "baseline": self.baseline.to_json() if self.baseline else None,
                # the first keep of each code by run number; only the incumbent's record in full
                "first_keep": {k: (r.run if isinstance(r, log.Run) else int(r)) for k, r in self.first_keep.items()},
                "incumbent": self.first_keep[self.last_keep].to_json() if self.last_keep is not None else None,
                "last_keep": self.last_keep,
                "groups": self.groups, "current": self.current, "longest": self.longest,
                "history": self.history, "running_best": self.running_best,
                "rb": [self.rb_incumbent, self.rb_fallback],
                "last": [r.to_json() for r in self.last], "totals": self.totals.to_json()}

    @classmethod
    def from_json(cls, data):
        """The tally back from to_json(); raises (KeyError, TypeError, ValueError) on anything else."""
        config = log.Config.from_json(data["config"]) if data["config"] is not None else None
        t = cls(config, int(data["segment"]), history=bool(data["history"]))
        t.runs = int(data["runs"])
        t.pool_runs = int(data["pool_runs"])
        t.counts = {s: int(data["counts"][s]) for s in STATUSES}
        t.keys = dict(zip(map(int, data["keys"][0]), map(str, data["keys"][1])))
        t.kept_codes = {str(k) for k in data["kept_codes"]}
        t.repeats = {int(k): str(v) for k, v in data["repeats"]}
        t.baseline = log.Run.from_json(data["baseline"]) if data["baseline"] is not None else None
        t.first_keep = {str(k): int(v) for k, v in data["first_keep"].items()}
        t.last_keep = data["last_keep"]
        if t.last_keep is not None:
            best = log.Run.from_json(data["incumbent"])
            if t.first_keep.get(t.last_keep) != best.run:
                raise ValueError("inconsistent tally")
            t.first_keep[t.last_keep] = best
        t.groups = data["groups"]   # {code: sorted numbers}; the file is signed, its shape checked here
        if not isinstance(t.groups, dict) or not all(type(v) is list for v in t.groups.values()):
            raise ValueError("inconsistent tally")
        t.current, t.longest = int(data["current"]), int(data["longest"])
        t.running_best = [[None if k is None else str(k), None if v is None else float(v)]
                          for k, v in data["running_best"]]
        t.rb_incumbent, t.rb_fallback = data["rb"]
        t.last = [log.Run.from_json(v) for v in data["last"]]
        t.totals = ledger.RunTotals.from_json(data["totals"])
        if t.totals.runs != t.runs:
            raise ValueError("inconsistent tally")
        if t.last_keep is not None and t.last_keep not in t.first_keep \
                or len(t.running_best) != (t.runs if t.history else 0) \
                or (t.baseline is not None) != bool(t.first_keep) or len(t.keys) > t.runs:
            raise ValueError("inconsistent tally")
        return t


def waves(runs):
    """The night's waves (runs recorded by a pool carry `wave`), in order: what each ran, kept and
    reported, the control's value (drift across the night) and the GPU time spent idle
    (GPUs x the wave's wall time - the benchmarks' own time)."""
    out = {}
    for r in runs:
        w = r.extra.get("wave")
        if not isinstance(w, int) or isinstance(w, bool):
            continue
        g = out.setdefault(w, {"wave": w, "runs": [], "candidates": [], "controls": [], "kept": None,
                               "runners_up": [], "control_metric": None, "started": None, "ended": None,
                               "gpus": None, "busy_s": 0.0})
        role = r.extra.get("role")
        g["runs"].append(r.run)
        if role == "candidate":
            g["candidates"].append(r.run)
        if role == "control":
            g["controls"].append(r.run)
            if g["control_metric"] is None and r.measured:
                g["control_metric"] = r.metric
        if r.status == "keep":
            g["kept"] = r.run
        if r.extra.get("runner_up"):
            g["runners_up"].append(r.run)
        busy = r.extra.get("gpu_s")
        if log.is_finite(busy):
            g["busy_s"] += busy
        for key, field_name, pick in (("started", "wave_started", min), ("ended", "wave_ended", max)):
            value = r.extra.get(field_name)
            if log.is_finite(value):
                g[key] = value if g[key] is None else pick(g[key], value)
        if isinstance(r.extra.get("wave_gpus"), int):
            g["gpus"] = r.extra["wave_gpus"]
    for g in out.values():
        wall = (g["ended"] - g["started"]) / 1000 if g["started"] is not None and g["ended"] is not None else None
        total = g["gpus"] * wall if wall is not None and g["gpus"] else None
        g["wall_s"] = round(wall, 3) if wall is not None else None
        g["busy_s"] = round(g["busy_s"], 3)
        g["idle_s"] = round(max(0.0, total - g["busy_s"]), 3) if total is not None else None
        g["idle_fraction"] = round(g["idle_s"] / total, 4) if total else None
    return [out[w] for w in sorted(out)]


def _change(direction, base_value, best_value, same_code):
    if same_code or base_value is None or best_value is None:
        return Change(0.0, 0.0, None, "no improvement yet")
    value = decide.gain(direction, base_value, best_value)
    percent = decide.percent(value, base_value)
    if value == 0:
        return Change(0.0, 0.0 if percent is not None else None, None, "no change")
    word = "better" if value > 0 else "worse"
    amount = f"{abs(percent):.2f}%" if percent is not None else f"{abs(value):.6g}"
    return Change(value, percent, word, f"{amount} {word} than the baseline")


def streaks(runs, remeasured):
    """(current, longest) runs of ideas without a keep."""
    current = longest = 0
    for r in runs:
        if r.status == "keep":
            current = 0
        elif r.run not in remeasured:
            current += 1
            longest = max(longest, current)
    return current, longest


def status_object(repo, night, warn=None, summarised=None):
    """What `status --json` prints (and `report --json` carries as "status"): the current
    segment's summary, its config's essentials, and the session (session.json and the lock).
    `summarised`: the current segment's summary when the caller made it already (the report)."""
    seg = night.current
    config = seg.config if seg else None
    runs = seg.runs if seg else []
    s = summarised or summarise(config, runs, seg.index if seg else 0)
    return status_from(repo, config, s, runs[-LAST_RUNS:], len(night.runs), runs)


def status_from(repo, config, s, last_runs, total_runs, runs):
    """The status object from a segment's summary (status_object, or the log cache's view).
    `runs` are what the ledger reads of the segment's runs: the runs themselves, or the
    tally's ledger.RunTotals of them."""
    session = state.read_session(repo) or {}
    c = config or log.Config()
    pool_state = _pool(repo)
    left = s.iterations_left
    if left is not None and pool_state:
        left = max(0, left - pool_state["queued"])   # queued candidates will use the budget too
    costs, budgets, spent = ledger.figures(repo, config, runs, session,
                                           improvements=max(0, s.counts.get("keep", 0) - 1))
    return {
        "segment": s.segment,
        "name": c.name or None,
        "metric_name": c.metric_name,
        "metric_unit": c.metric_unit,
        "direction": c.direction,
        "runs": s.runs,
        "total_runs": total_runs,
        "counts": s.counts,
        # Discards that re-measured kept code (noise samples), included in counts["discard"].
        "remeasurements": len(s.remeasured),
        "keep_rate": keep_rate(s.counts),
        "experiments": experiments(s.counts, len(s.remeasured)),
        "baseline": point(s.baseline, s.baseline_value),
        "best": point(s.best, s.best_value),
        "change": s.change.to_json() if s.change else None,
        "noise": ({"threshold": s.noise["threshold"], "mad": s.noise["mad"], "samples": s.noise["samples"]}
                  if s.noise_measured else None),
        "noise_measured": s.noise_measured,
        "threshold": s.noise["threshold"],
        "confidence": s.confidence,
        "last_runs": [_compact(r) for r in last_runs[-LAST_RUNS:]],
        "consecutive_non_keeps": s.consecutive_non_keeps,
        "longest_non_keeps": s.longest_non_keeps,
        "max_iterations": s.max_iterations,
        "iterations_left": left,
        "active": state.is_active(session),
        "owner_session": session.get("owner_session", c.owner_session),
        "running": _running(repo, pool_state),
        "pool": pool_state,
        "scope": c.scope,
        "fixed": sorted(c.fixed),
        "command": c.command,
        "policies": c.policies,
        "ledger": costs.to_dict(),
        "budgets": budgets.to_dict(),
        "budget_spent": spent,
        "night": night_log.summary(repo),
        "anchor": anchor.check(repo.root, repo.log).to_json(),   # the log against the anchor outside the repo
        "agent_sandbox": agent_sandbox.state(repo.root, sorted(c.fixed)),
    }


FAILED = ("crash", "timeout", "checks_failed", "tampered")


def experiments(counts, remeasurements):
    """What the runs tried, as every view counts it: the runs less the re-measurements of kept
    code (noise samples: the same code measured again, never an idea), how many of them were
    kept, discarded or failed (crash, timeout, failed checks, tampered), and the keep rate over
    the decided ones (kept and discarded). `keep_rate` below stays karpathy's notebook's rate
    (the export's contract)."""
    discard = max(0, counts.get("discard", 0) - remeasurements)
    keep = counts.get("keep", 0)
    failed = sum(counts.get(k, 0) for k in FAILED)
    other = sum(v for k, v in counts.items() if k not in ("keep", "discard") and k not in FAILED)
    return {"runs": keep + discard + failed + other, "keep": keep, "discard": discard, "failed": failed,
            "remeasurements": remeasurements, "keep_rate": keep / (keep + discard) if keep + discard else None}


def experiments_text(e):
    """The experiments in one line, as status, brief and the report say them."""
    text = f"{e['keep']} kept, {e['discard']} discarded, {e['failed']} failed"
    if e["remeasurements"]:
        n = e["remeasurements"]
        text += f"; {n} re-measurement{'s' if n != 1 else ''} of kept code (noise samples, not counted)"
    return text


def keep_rate(counts):
    """Kept runs over decided ones, as karpathy's notebook counts them: a timeout is a discard
    (his program.md), a crash or a failed check is not decided. None before any decision."""
    decided = counts.get("keep", 0) + counts.get("discard", 0) + counts.get("timeout", 0)
    return counts.get("keep", 0) / decided if decided else None


def point(record, value):
    """A run as status and `run --json` name the baseline and the best: its value is its code's."""
    if record is None:
        return None
    return {"run": record.run, "commit": record.commit, "metric": value, "description": record.description}


def _compact(r):
    out = {"run": r.run, "commit": r.commit, "status": r.status, "metric": r.metric,
           "description": r.description}
    if r.reason:
        out["reason"] = r.reason
    if r.repeat_of:
        out["repeat_of"] = r.repeat_of
    return out


def _running(repo, pool_state=None):
    if pool_state and pool_state.get("wave_running"):
        return {"run": None, "wave": pool_state["wave_running"], "pid": None, "started": None}
    if not state.is_locked(repo.lock):
        return None
    current = state.read_current(repo) or {}
    return {"run": current.get("run"), "pid": current.get("pid"), "started": current.get("started")}


def _pool(repo):
    """The pool block (GPUs, busy, queued, the wave in flight) while a pool was ever started here;
    None otherwise, without importing anything more."""
    if not os.path.isdir(os.path.join(repo.state, "pool")):
        return None
    data = poolfiles.status_data(repo)
    return {k: data[k] for k in ("up", "gpus", "classes", "busy", "queued", "wave_running")}


NOISE_COMMAND = 'autoresearch run --baseline --repeat 3 -m "measure noise"'
