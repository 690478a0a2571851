"""How fast `autoresearch serve` answers for a long night (goal: a 50,000-run night under 10 s,
bounded memory), against references measured in the same run on the same machine.

Builds the report fixture (tests/report/report_fixture.py: runs with folders, steps, diffs),
appends `--log-runs` engine-shaped records (chained as the engine appends them), starts
`autoresearch serve --port 0` and times, as the page asks for them:

- api/model, first request (the model is built from the log): the time to the first byte and
  to the whole answer, and its size; then after a new run, polled as the page polls: how long
  each answer takes while the model is rebuilt, and how long until the new run is shown;
- api/model unchanged (`since=` the version: what an open page polls every 2 s);
- api/runs (a page of 500 full rows from the middle) and api/run/N (one run's row and details).

References: `python -c pass`, and reading the log alone (log.read) in this process; and what
serve sent before paging: the whole model as one object (its size and the time to encode it,
measured here on the same model). The serve process's peak memory (VmHWM) is printed too.

    python benchmarks/serve_speed.py [--runs 200] [--log-runs 49800] [--repeat 3]
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "report"), str(ROOT / "benchmarks")]

import hook_latency  # noqa: E402
import report_fixture  # noqa: E402

from autoresearch.store import log as arlog  # noqa: E402
from autoresearch.views import report  # noqa: E402


def fetch(port, path):
    """(seconds to the first byte of the body, seconds to the whole answer, bytes, status)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    conn.request("GET", path)
    res = conn.getresponse()
    first = res.read(1)
    ttfb = time.perf_counter() - start
    body = first + res.read()
    total = time.perf_counter() - start
    conn.close()
    return ttfb, total, body, res.status


def peak_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs with folders (steps, diff, output)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--log-runs", type=int, default=49_800, metavar="N", help="run records appended to the log")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        report_fixture.make_repo(repo, n_runs=args.runs, steps=args.steps)
        last = hook_latency.append_runs(repo, args.log_runs, args.runs) if args.log_runs else args.runs
        total_runs = args.runs + args.log_runs
        err = repo / "serve.err"
        with open(err, "w") as f:
            proc = subprocess.Popen([sys.executable, "-m", "autoresearch", "serve", "--port", "0"], cwd=repo,
                                    env=env, stdout=subprocess.DEVNULL, stderr=f)
        try:
            deadline, port = time.monotonic() + 60, None
            while port is None:
                found = re.search(r"http://127\.0\.0\.1:(\d+)/", err.read_text())
                port = int(found.group(1)) if found else None
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start: {err.read_text()}")
                time.sleep(0.05)
            built, rebuilt, fresh, polls, pages, ones = [], [], [], [], [], []
            ttfb, whole, body, status = fetch(port, "/api/model")   # the first page open: built now
            assert status == 200, body[:200]
            built.append((ttfb, whole))
            version = json.loads(body)["version"]
            for _ in range(args.repeat):
                last = hook_latency.append_runs(repo, 1, last)   # a new run: the model is rebuilt
                t0 = time.perf_counter()
                while True:   # poll as the page does (its every-2-s poll, here back to back)
                    ttfb, whole, body, status = fetch(port, f"/api/model?since={version}")
                    rebuilt.append((ttfb, whole))
                    got = json.loads(body)
                    if not got.get("unchanged") and got["version"] != version:
                        break
                    time.sleep(0.2)
                fresh.append(time.perf_counter() - t0)   # until the page has the new run
                version = got["version"]
                polls.append(fetch(port, f"/api/model?since={version}")[1])
                pages.append(fetch(port, f"/api/runs?offset={total_runs // 2}&limit=500")[1])
                ones.append(fetch(port, f"/api/run/{args.runs // 2}")[1])
            model_bytes = len(body)
            model = json.loads(body)["model"]
            peak = peak_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        full, _ = report.build_model(repo, Path("autoresearch.jsonl"), warn=lambda m: None, with_log=True)
        t0 = time.perf_counter()
        unpaged = json.dumps({"version": "x", "model": full}, ensure_ascii=False, allow_nan=False,
                             separators=(",", ":")).encode()
        encode_unpaged = time.perf_counter() - t0
        reads = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            arlog.read(str(repo / "autoresearch.jsonl"), warn=lambda m: None)
            reads.append(time.perf_counter() - t0)
        starts = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            starts.append(time.perf_counter() - t0)
    med = statistics.median
    rebuilt = rebuilt or built
    result = {
        "runs": model["runTotal"], "runs_with_folders": args.runs, "full_rows_in_model": len(model["runs"]),
        "model_first_ttfb_s": round(built[0][0], 3), "model_first_s": round(built[0][1], 3),
        "answer_while_rebuilding_ttfb_max_s": round(max(t for t, _ in rebuilt), 3),
        "answer_while_rebuilding_max_s": round(max(w for _, w in rebuilt), 3),
        "new_run_shown_after_median_s": round(med(fresh), 3),
        "model_mib": round(model_bytes / 2**20, 2), "unpaged_model_mib": round(len(unpaged) / 2**20, 2),
        "unpaged_encode_s": round(encode_unpaged, 3),
        "poll_unchanged_median_ms": round(med(polls) * 1000, 1), "runs_page_median_ms": round(med(pages) * 1000, 1),
        "run_details_median_ms": round(med(ones) * 1000, 1), "serve_peak_mib": round(peak, 1) if peak else None,
        "read_log_median_s": round(med(reads), 3), "python_startup_median_s": round(med(starts), 4),
        "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
    }
    result["new_run_over_read_log"] = round(result["new_run_shown_after_median_s"] / result["read_log_median_s"], 1)
    result["goal_met"] = result["model_first_s"] < 10 and result["new_run_shown_after_median_s"] < 10
    print(f"serve, {result['runs']} runs ({args.runs} with folders), load average {result['load_avg_1m']} "
          f"on {os.cpu_count()} CPUs")
    print(f"  api/model first: first byte {built[0][0]:.2f} s, whole {built[0][1]:.2f} s, {result['model_mib']} MiB "
          f"({result['full_rows_in_model']} full rows; the unpaged model was {result['unpaged_model_mib']} MiB, "
          f"{encode_unpaged:.2f} s to encode alone)")
    print(f"  after a new run: every api/model answered within {result['answer_while_rebuilding_max_s']:.2f} s "
          f"(first byte {result['answer_while_rebuilding_ttfb_max_s']:.2f} s) while the model was rebuilt; the new run "
          f"was shown after {result['new_run_shown_after_median_s']:.2f} s (median of {len(fresh)}; goal < 10 s: "
          f"{'met' if result['goal_met'] else 'NOT met'})")
    print(f"  unchanged poll {result['poll_unchanged_median_ms']} ms, a page of 500 rows "
          f"{result['runs_page_median_ms']} ms, one run's details {result['run_details_median_ms']} ms")
    print(f"  serve's peak memory {result['serve_peak_mib']} MiB")
    print(f"  reference reading the log: {result['read_log_median_s']:.2f} s -> showing a new run took "
          f"{result['new_run_over_read_log']}x; python -c pass {result['python_startup_median_s'] * 1000:.0f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
