"""The decision for a wave: K candidates run at once beside a control re-run of their parent.

Pure functions of the measurements (standard library only); the pool runner calls them and
writes the records. references/decision-rule.md ("Waves") has the why and the numbers.

Each candidate i is compared with its own wave's control c (the incumbent's code, run at the
same time on a GPU of the same class): delta_i = gain of m_i over m_c (positive is better).
With sigma the noise of one measurement (decide.noise), a difference of two measurements has
sigma_d = sqrt(2) * sigma, and with z the segment's single-run z, alpha = 1 - Phi(z) is the
chance that one run of unchanged code passes z * sigma_d against one control.

- screen: a candidate passes when delta_i > t0 = max(min_delta, z * sigma_d);
- winner: the passing candidate with the largest delta (a tie goes to the lower run number);
- keep at once when delta_w > tK = max(min_delta, z_K * sigma_d), z_K = Phi^-1(1 - alpha / 2K);
- otherwise the winner is borderline: it is re-run beside a fresh control, and kept only if
  the re-run alone passes tC = max(min_delta, c_K * sigma_d), c_K = Phi^-1(1 - 1 / 2K);
- the other passing candidates are runners-up: reported, not kept (at most one keep a wave).

Under pure noise: P(keep) <= K * alpha / 2K + P(some candidate passes the screen) / 2K
<= alpha / 2 + K * alpha / 2K = alpha, the single-run rate, for every K.

Contention: under a fixed time budget a slowed GPU (a neighbour on the node, a throttled card)
reaches fewer steps, which moves the metric for reasons that are not the change. The control
runs the incumbent's code, so its throughput (a `tok_per_s` or `num_steps` METRIC) should match
the calibration's. When it falls below R_MIN of the calibration's median, the wave is contended:
its decisions are not trusted, it runs again, and if it is contended again nothing is kept.
"""

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from autoresearch.decision import decide

_NORMAL = NormalDist()


def alpha(z):
    """The single-run false-keep rate: one run of unchanged code against one control."""
    return 1.0 - _NORMAL.cdf(z)


def z_keep(k, z=decide.DEFAULT_Z):
    """z_K: the immediate-keep threshold, in sigma_d, for a wave of k candidates."""
    return _NORMAL.inv_cdf(1.0 - alpha(z) / (2 * max(1, k)))


def z_confirm(k):
    """c_K: what the borderline winner's re-run must pass on its own, in sigma_d."""
    return _NORMAL.inv_cdf(1.0 - 1.0 / (2 * max(1, k)))


@dataclass
class Thresholds:
    k: int
    sigma: object        # noise of one measurement, or None while nothing was measured twice
    sigma_d: object      # of a candidate-minus-control difference
    screen: float        # t0
    keep: float          # tK
    confirm: float       # tC
    z: float
    z_keep: float
    z_confirm: float

    def as_record(self):
        return {"k": self.k, "sigma": self.sigma, "sigma_d": self.sigma_d, "screen": self.screen,
                "keep": self.keep, "confirm": self.confirm, "z": self.z, "z_keep": round(self.z_keep, 4),
                "z_confirm": round(self.z_confirm, 4)}


def thresholds(k, sigma, rules):
    """The three thresholds of a wave of k candidates, in the metric's units."""
    zk, ck = z_keep(k, rules.z), z_confirm(k)
    if not sigma:
        md = rules.min_delta
        return Thresholds(k, sigma, None, md, md, md, rules.z, zk, ck)
    sd = math.sqrt(2.0) * sigma
    return Thresholds(k, sigma, sd, max(rules.min_delta, rules.z * sd), max(rules.min_delta, zk * sd),
                      max(rules.min_delta, ck * sd), rules.z, zk, ck)


THROUGHPUT_METRICS = ("tok_per_s", "num_steps")   # the first one a run reports is its throughput
R_MIN = 0.9           # the control below 90% of the calibration's throughput: a contended wave


def throughput(metrics):
    """(name, value) of the run's throughput metric, or None when it reports none."""
    for name in THROUGHPUT_METRICS:
        value = (metrics or {}).get(name)
        if isinstance(value, (int, float)) and value > 0:
            return name, float(value)
    return None


@dataclass
class Contention:
    metric: str
    control: float        # the control's throughput in this wave
    calibration: float    # the median over the calibration runs of the segment
    ratio: float
    r_min: float
    contended: bool

    def as_record(self):
        return {"metric": self.metric, "control": self.control, "calibration": self.calibration,
                "ratio": round(self.ratio, 4), "r_min": self.r_min, "contended": self.contended}

    def describe(self):
        return (f"the control's {self.metric} {_fmt(self.control)} is {self.ratio:.0%} of the calibration's "
                f"{_fmt(self.calibration)} (below {self.r_min:.0%} means contended)")


def contention(control_metrics, calibration_metrics, r_min=R_MIN):
    """Compare the control's throughput with the calibration runs' median; None when either
    side reports no throughput (nothing to check)."""
    mine = throughput(control_metrics)
    if mine is None:
        return None
    name, value = mine
    ref = sorted(t[1] for t in map(throughput, calibration_metrics) if t is not None and t[0] == name)
    if not ref:
        return None
    mid = len(ref) // 2
    median = ref[mid] if len(ref) % 2 else (ref[mid - 1] + ref[mid]) / 2
    ratio = value / median
    return Contention(name, value, median, ratio, r_min, ratio < r_min)


@dataclass
class Verdict:
    """What the wave decided for one candidate."""
    run: int
    status: str                  # keep | discard (crashes are decided before the rule)
    reason: str
    delta: object = None         # gain over the control (positive = better)
    rank: object = None          # 1 = best delta among the decidable candidates
    passed_screen: bool = False
    runner_up: bool = False
    implausible: bool = False
    needs_confirmation: bool = False
    extra: dict = field(default_factory=dict)


def decide_wave(candidates, control_metric, th, rules):
    """candidates: [(run, metric)] of the decidable candidates (finished, checks passed).

    Returns ({run: Verdict}, winner run or None). The winner may need a confirmation re-run
    (verdict.needs_confirmation); settle it with `settle_confirmation`.
    """
    verdicts = {}
    ranked = []
    for run, metric in candidates:
        delta = decide.gain(rules.direction, control_metric, metric)
        if rules.implausible_gain is not None and control_metric:
            relative = delta / abs(control_metric)
            if relative > float(rules.implausible_gain):
                verdicts[run] = Verdict(run, "discard", f"implausible: gain {relative:.0%} over the control "
                                        f"exceeds the {float(rules.implausible_gain):.0%} limit; never kept, "
                                        "check the result", delta=delta, implausible=True)
                continue
        ranked.append((run, metric, delta))
    # Best delta first; an exact tie goes to the lower run number.
    ranked.sort(key=lambda item: (-item[2], item[0]))
    winner = None
    for rank, (run, metric, delta) in enumerate(ranked, 1):
        passed = delta > th.screen
        v = Verdict(run, "discard", "", delta=delta, rank=rank, passed_screen=passed)
        if passed and winner is None:
            winner = run
            if th.sigma_d is not None and delta > th.keep:
                v.status = "keep"
                v.reason = (f"wave winner: gain {_fmt(delta)} over the control > keep threshold "
                            f"{_fmt(th.keep)} (z_K {th.z_keep:.2f} for {th.k} candidates)")
            else:
                v.needs_confirmation = True
                v.reason = (f"borderline wave winner: gain {_fmt(delta)} over the control passes the screen "
                            f"{_fmt(th.screen)} but not the keep threshold {_fmt(th.keep)}; confirming with a re-run")
        elif passed:
            v.runner_up = True
            v.reason = (f"runner-up: gain {_fmt(delta)} over the control passes the screen {_fmt(th.screen)}, "
                        f"but run {winner} won the wave (at most one keep a wave); rebase it on the new best "
                        "and submit it again")
        elif delta == 0:
            v.reason = f"tie with the control ({_fmt(metric)}); ties are never kept"
        elif delta > 0:
            v.reason = f"gain {_fmt(delta)} over the control within the screen threshold {_fmt(th.screen)}"
        else:
            v.reason = f"worse than the control by {_fmt(-delta)}"
        verdicts[run] = v
    return verdicts, winner


def settle_confirmation(verdict, confirm_delta, th, confirm_run):
    """Keep the borderline winner only if its re-run alone passes tC against its own control."""
    verdict.needs_confirmation = False
    verdict.extra["confirm_run"] = confirm_run
    verdict.extra["confirm_delta"] = confirm_delta
    if confirm_delta is not None and confirm_delta > th.confirm:
        verdict.status = "keep"
        verdict.reason = (f"confirmed wave winner: gain {_fmt(verdict.delta)} over the control, and re-run "
                          f"{confirm_run} gains {_fmt(confirm_delta)} over its own control > {_fmt(th.confirm)}")
    else:
        verdict.status = "discard"
        what = "did not finish" if confirm_delta is None else f"gains {_fmt(confirm_delta)}, not > {_fmt(th.confirm)}"
        verdict.reason = f"borderline wave winner not confirmed: re-run {confirm_run} {what}"
    return verdict


def simulate(k, waves, seed, gain_sd=0.0, rules=None):
    """Monte-Carlo of the rule under normal noise (sigma = 1, known): the fraction of waves that
    keep something, and the fraction that keep the candidate with a true gain of `gain_sd`
    sigma_d (candidate 0; 0 = pure noise). Returns {"keep_rate", "true_keep_rate"}."""
    import random
    rules = rules or decide.Rules()
    rng = random.Random(seed)
    th = thresholds(k, 1.0, rules)
    shift = gain_sd * th.sigma_d
    sign = -1.0 if rules.direction == "lower" else 1.0
    kept = kept_true = 0
    for _ in range(waves):
        control = rng.gauss(0.0, 1.0)
        cands = [(i, rng.gauss(0.0, 1.0) + (sign * shift if i == 0 else 0.0)) for i in range(k)]
        verdicts, winner = decide_wave(cands, control, th, rules)
        if winner is None:
            continue
        v = verdicts[winner]
        if v.needs_confirmation:
            again = rng.gauss(0.0, 1.0) + (sign * shift if winner == 0 else 0.0)
            settle_confirmation(v, decide.gain(rules.direction, rng.gauss(0.0, 1.0), again), th, -1)
        if v.status == "keep":
            kept += 1
            kept_true += winner == 0
    return {"keep_rate": kept / waves, "true_keep_rate": kept_true / waves}


def single_run_rate(waves, seed, gain_sd=0.0, rules=None):
    """The single-run rule in the same units: one candidate against one control, kept when it
    gains more than z * sigma_d (the rate `alpha` the wave rule must not exceed)."""
    import random
    rules = rules or decide.Rules()
    rng = random.Random(seed)
    sd = math.sqrt(2.0)
    kept = 0
    for _ in range(waves):
        delta = rng.gauss(0.0, 1.0) + gain_sd * sd - rng.gauss(0.0, 1.0)
        kept += delta > rules.z * sd
    return kept / waves


def _fmt(x):
    return "None" if x is None else f"{x:.6g}"
