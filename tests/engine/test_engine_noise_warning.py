"""While noise is not measured any gain keeps: `init` and `status` say so in one line, with the
command that measures it, and no view shows a confidence; once measured, the warning goes."""

from helpers_engine import make  # noqa: F401 (fixture)

WARNING = ('warning: noise not measured, so any gain will keep; measure it with '
           '`autoresearch run --baseline --repeat 3 -m "measure noise"`')


def test_init_and_status_warn_until_noise_is_measured(make):
    repo = make()
    assert WARNING in repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
                              "--fixed", "bench.sh").stdout
    repo.experiment("1.0", "baseline")
    repo.experiment("0.9", "better")
    text = repo.ok("status").stdout
    assert WARNING in text and "noise: not measured" in text and "sigma" not in text
    status = repo.status()
    assert status["noise_measured"] is False and status["confidence"] is None
    assert all(r.get("confidence") is None for r in repo.runs())
    assert "Noise not measured: any gain keeps." in repo.ok("brief").stdout
    repo.ok("run", "-q", "--baseline", "--repeat", "2", "-m", "measure noise")
    text = repo.ok("status").stdout
    assert "warning: noise not measured" not in text and "noise: threshold" in text


def test_init_that_measures_noise_does_not_warn(make):
    repo = make("--noise-runs", "3")
    proc = repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
                   "--fixed", "bench.sh", "--noise-runs", "3")
    assert "warning: noise not measured" not in proc.stdout
    assert "the baseline will run 3 times to measure noise" in proc.stdout
