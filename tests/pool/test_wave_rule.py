"""The wave rule under simulated noise: per-wave false keeps at or below the single-run rate
for K = 2..16, and a real gain kept in most waves. Standard library only, seeded, seconds.

The figures (printed with -s, and in references/decision-rule.md) are what this test measures.
"""

import math

import pytest

from autoresearch.decision import decide
from autoresearch.pool import wave

WAVES = 6000        # per K under pure noise: the rate's standard error is ~0.002 at 2.3 %
POWER_WAVES = 1500
KS = (2, 4, 8, 16)


def test_thresholds_grow_with_k_and_match_the_formula():
    rules = decide.Rules()
    alpha = wave.alpha(rules.z)
    assert alpha == pytest.approx(0.02275, abs=1e-5)
    previous = rules.z
    for k in (1,) + KS:
        zk = wave.z_keep(k, rules.z)
        # Phi(z_K) = 1 - alpha / 2K, by the normal CDF written with erfc
        assert 0.5 * math.erfc(zk / math.sqrt(2)) == pytest.approx(alpha / (2 * k), rel=1e-6)
        assert zk > previous
        previous = zk
    assert [round(wave.z_keep(k), 2) for k in KS] == [2.53, 2.77, 2.98, 3.19]
    assert [round(wave.z_confirm(k), 2) for k in KS] == [0.67, 1.15, 1.53, 1.86]
    th = wave.thresholds(4, 0.01, rules)
    assert th.sigma_d == pytest.approx(0.01 * math.sqrt(2))
    assert th.screen < th.keep and th.keep == pytest.approx(2.765 * th.sigma_d, rel=1e-3)


def test_pure_noise_keeps_no_more_often_per_wave_than_a_single_run():
    single = wave.single_run_rate(4 * WAVES, seed=1)
    assert single == pytest.approx(wave.alpha(2.0), abs=0.005)
    rates = {k: wave.simulate(k, WAVES, seed=100 + k)["keep_rate"] for k in KS}
    print(f"\nsingle-run false-keep rate {single:.4f}; per-wave, pure noise: "
          + ", ".join(f"K={k}: {r:.4f}" for k, r in rates.items()))
    for k, rate in rates.items():
        assert rate <= single, (k, rate, single)
    # What the rule prevents: a flat single-run threshold on the best of K candidates.
    flat = _flat_rule_rate(8, WAVES, seed=7)
    assert flat > 3 * single


def test_a_true_three_sigma_gain_is_kept_in_most_waves():
    kept = {k: wave.simulate(k, POWER_WAVES, seed=200 + k, gain_sd=3.0)["true_keep_rate"] for k in KS}
    print("\ntrue 3 sigma_d gain in one candidate, kept: " + ", ".join(f"K={k}: {r:.3f}" for k, r in kept.items()))
    for k, rate in kept.items():
        assert rate > 0.5, (k, rate)
    # The same gain in sigmas of one run (3 / sqrt 2 = 2.12 sigma_d): reported, not a bar.
    g = 3 / math.sqrt(2)
    single = wave.single_run_rate(4 * POWER_WAVES, seed=3, gain_sd=g)
    smaller = {k: wave.simulate(k, POWER_WAVES, seed=300 + k, gain_sd=g)["true_keep_rate"] for k in KS}
    print(f"true 3 sigma (one run's sigma) gain, kept: single run {single:.3f}, "
          + ", ".join(f"K={k}: {r:.3f}" for k, r in smaller.items()))
    assert all(r > 0.3 for r in smaller.values())


def test_at_most_one_keep_and_ties_go_to_the_lower_run():
    rules = decide.Rules()
    th = wave.thresholds(3, 0.01, rules)
    verdicts, winner = wave.decide_wave([(5, 0.5), (4, 0.5), (6, 0.9)], 1.0, th, rules)
    assert winner == 4 and verdicts[4].status == "keep" and verdicts[5].runner_up
    assert sum(v.status == "keep" for v in verdicts.values()) == 1
    # A tie with the control never keeps; worse is discarded.
    verdicts, winner = wave.decide_wave([(7, 1.0), (8, 1.2)], 1.0, th, rules)
    assert winner is None and "tie" in verdicts[7].reason and "worse" in verdicts[8].reason
    # A borderline winner waits for its re-run.
    small = th.screen * 1.1
    verdicts, winner = wave.decide_wave([(9, 1.0 - small)], 1.0, th, rules)
    assert verdicts[9].needs_confirmation
    wave.settle_confirmation(verdicts[9], th.confirm / 2, th, 10)
    assert verdicts[9].status == "discard" and "not confirmed" in verdicts[9].reason


def _flat_rule_rate(k, waves, seed):
    import random
    rng = random.Random(seed)
    sd = math.sqrt(2.0)
    kept = 0
    for _ in range(waves):
        control = rng.gauss(0, 1)
        best = min(rng.gauss(0, 1) for _ in range(k))
        kept += control - best > 2.0 * sd
    return kept / waves


def test_the_iteration_budget_counts_candidates_not_the_pools_own_runs():
    from autoresearch.decision import summary
    from autoresearch.store import log
    config = log.Config(metric_name="loss", max_iterations=5)
    roles = ["baseline", "control", "candidate", "candidate", "confirm", "control"]
    runs = [log.Run(run=i + 1, metric=1.0, status="keep" if i == 0 else "discard", scope_hash=f"h{i}",
                    extra={"wave": 1 if i == 0 else 2, "role": role}) for i, role in enumerate(roles)]
    assert decide.iterations_used(runs) == 3
    assert summary.summarise(config, runs).iterations_left == 2
    # The log cache's tally, saved and read back, counts the same.
    tally = summary.Tally(config)
    for r in runs:
        tally.add(r)
    assert summary.Tally.from_json(tally.to_json()).summary().iterations_left == 2


def test_the_contention_check_compares_the_controls_throughput_with_the_calibrations_median():
    calibration = [{"num_steps": 355}, {"num_steps": 350}, {"num_steps": 360}, {"loss": 1.0}]
    fine = wave.contention({"num_steps": 330, "loss": 1.0}, calibration)
    assert fine.metric == "num_steps" and fine.calibration == 355 and not fine.contended
    # PR #71's three runs on one A100: 355 steps fell to ~140.
    slowed = wave.contention({"num_steps": 140}, calibration)
    assert slowed.contended and round(slowed.ratio, 3) == 0.394 and "39%" in slowed.describe()
    assert wave.contention({"num_steps": 319}, calibration).contended          # 0.899 < 0.9
    assert not wave.contention({"num_steps": 320}, calibration).contended      # 0.901
    # tok_per_s comes first; nothing to compare with, or no throughput at all: no check.
    assert wave.contention({"tok_per_s": 5e5, "num_steps": 1}, [{"tok_per_s": 5e5}]).ratio == 1.0
    assert wave.contention({"tok_per_s": 5e5}, calibration) is None
    assert wave.contention({"loss": 1.0}, calibration) is None
    assert wave.contention({"num_steps": 0}, calibration) is None
