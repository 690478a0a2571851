"""A long night: the page carries every run's row but the details of a bounded set (the kept
runs, the baselines, the latest), and says how many it left out."""

import json
import random

from autoresearch.views import report


def test_the_details_of_a_long_night_are_bounded_and_keep_what_matters(tmp_path):
    rng = random.Random(3)
    lines = [json.dumps({"type": "config", "metricName": "loss", "bestDirection": "lower"})]
    kept = []
    for n in range(1, 3001):
        status = "keep" if n == 1 or rng.random() < 0.02 else rng.choice(["discard", "crash"])
        kept += [n] if status == "keep" else []
        lines.append(json.dumps({"run": n, "status": status, "metric": None if status == "crash" else 2 - n / 1e4,
                                 "scope_hash": f"c{n}", "description": f"idea {n}"}))
    (tmp_path / "autoresearch.jsonl").write_text("\n".join(lines) + "\n")
    model = report.build_model(tmp_path, tmp_path / "autoresearch.jsonl", warn=lambda m: None)
    details = report.all_details(tmp_path, model, 50, limit=500)
    assert len(model["runs"]) == 3000 and len(details) == 500
    assert model["detailsOmitted"] == 2500
    assert {str(n) for n in kept} <= set(details)          # every kept run
    assert "1" in details and "3000" in details             # the baseline and the latest
    page = report.render_html(model, details)
    assert page.count('"run":') >= 3000                     # every run is in the table and the chart
