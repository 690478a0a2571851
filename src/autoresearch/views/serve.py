"""`autoresearch serve`: the report page, live, on 127.0.0.1 only.

The page is the report's own (same script, same rendering) in live mode: it polls
`api/model?since=VERSION` (the model again only when the log or current.json changed) and
`api/current` (the running run's steps so far), and fetches `api/run/N` when a run is
opened. The per-run data is paged, so a night of 50,000 runs is a few MB, not one object of
tens: `api/model` carries the summary, the chart's columns for every run (number, status,
value, segment, running best, change; the kept runs' descriptions) and the full rows of the
first page plus the kept runs, the baselines and the latest (`runIndex` says where each sits);
`api/runs?offset=O&limit=L` gives more rows, `api/run/N` one run's row and details. The server binds the loopback address only and answers only requests whose Host
header names it, so another machine or a rebinding web page cannot read the log.
Standard library only.
"""

import errno
import http.server
import json
import os
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from autoresearch import errors
from autoresearch.views import report

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# A connection that sends no complete request (or reads no reply) for this long is closed, so
# idle or stalled clients cannot pile up threads and sockets.
CONNECTION_TIMEOUT_S = 10
# Sent with every answer: the page's script policy plus what only a header can say (no framing:
# another page cannot overlay or click the report), and no guessing of content types.
API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
PAGE_ROWS = 500          # full rows per page (api/runs), and the first page in api/model
PAGE_ROWS_MAX = 2000     # the most api/runs gives at once
BACKGROUND_BUILD_S = 2.0   # a model that took longer to build is rebuilt in the background
CHART_KEYS = ("run", "status", "metric", "segment", "running_best", "delta_pct")


def add_parsers(sub):
    p = sub.add_parser(
        "serve", help="show the report live on http://127.0.0.1:PORT/",
        description="Serve the report page on 127.0.0.1: new runs appear as they are logged and the "
                    "running experiment's curves grow as its steps arrive.",
        epilog="Example: autoresearch serve --port 0   (any free port; the address is printed)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)")
    report.add_common_arguments(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args):
    if not 0 <= args.port <= 65535:
        raise errors.UsageError(f"--port must be 0..65535, not {args.port}")
    root = report.repo_root(args.log)
    report.check_price(args.kwh_price)
    live = LiveState(root, Path(args.log).name, args.kwh_price)
    try:
        server = make_server(live, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise errors.UsageError(f"port {args.port} on {HOST} is in use; pick another with --port P "
                                 f"(--port 0 takes any free port)") from None
        raise
    port = server.server_address[1]
    print(f"autoresearch: serving {root} at http://{HOST}:{port}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        print("autoresearch: stopped serving", file=sys.stderr)
    finally:
        server.server_close()
    return errors.EXIT_OK


def make_server(live, port):
    handler = type("BoundHandler", (Handler,), {"live": live})
    server = http.server.ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server


class LiveState:
    """The model, rebuilt only when the log or current.json changes; warnings printed once each."""

    def __init__(self, root, log_name, kwh_price):
        self.root, self.log_name, self.kwh_price = root, log_name, kwh_price
        self.lock = threading.Lock()
        self.model, self.encoded, self.log_sig, self.cur_sig = None, None, None, None
        self.build_s, self.building = 0.0, False
        self.warned = set()
        self.energies = {}
        self.page = report.render_html(None, live=True).encode("utf-8")
        self.page_policy = report.content_policy(report.page_script()) + "; frame-ancestors 'none'"

    def signature(self, path):
        try:
            st = os.stat(path)
            return f"{st.st_size}.{st.st_mtime_ns}"
        except OSError:
            return "-"

    def _warn_once(self, message):
        if message not in self.warned:
            self.warned.add(message)
            print(f"autoresearch: warning: {message}", file=sys.stderr, flush=True)

    def current_model(self):
        """(model, version). The model is rebuilt when the log changes; while a rebuild takes
        longer than BACKGROUND_BUILD_S (a long night), it runs in the background and pages keep
        the model they have until the new one is ready. current.json (the running run's phase)
        only refreshes the model's `current`, never rebuilds it."""
        with self.lock:
            log_sig = self.signature(self.root / self.log_name)
            if self.model is None:
                self._install(*self._build(), log_sig)
            elif log_sig != self.log_sig and not self.building:
                if self.build_s < BACKGROUND_BUILD_S:
                    self._install(*self._build(), log_sig)
                else:
                    self.building = True
                    threading.Thread(target=self._build_in_background, args=(log_sig,), daemon=True).start()
            cur_sig = self.signature(self.root / report.CURRENT_FILE)
            if cur_sig != self.cur_sig:
                self.model = dict(self.model, current=report.read_current(self.root))
                self.cur_sig = cur_sig
            return self.model, f"{self.log_sig}-{self.cur_sig}"

    def _build(self):
        """(model, seconds it took, current.json's signature as the model read it)."""
        started = time.monotonic()
        cur_sig = self.signature(self.root / report.CURRENT_FILE)
        model, night = report.build_model(self.root, Path(self.log_name), self.kwh_price,
                                          warn=self._warn_once, with_log=True)
        model["live"] = True
        energies = [{"energy": self._energy(r)} for r in report.detail_runs(model)]
        report.add_energy_totals(model, energies)
        report.add_ledger(model, self.root, night=night)
        return model, time.monotonic() - started, cur_sig

    def _install(self, model, took, cur_sig, log_sig, encoded=None):
        self.model, self.build_s, self.log_sig, self.cur_sig = model, took, log_sig, cur_sig
        self.encoded = encoded

    def _build_in_background(self, log_sig):
        try:
            model, took, cur_sig = self._build()
            version = f"{log_sig}-{cur_sig}"   # encoded here too, so no poll waits for it
            built = (model, took, cur_sig, log_sig, (version, encode({"version": version, "model": paged_model(model)})))
        except Exception as exc:  # noqa: BLE001 - a failed rebuild keeps the model the pages have
            self._warn_once(f"could not rebuild the model: {exc!r}; still showing the one before")
            built = None
        with self.lock:
            if built is not None:
                self._install(*built)
            self.building = False

    def model_bytes(self):
        """The paged model as JSON, encoded once per version (every open page polls it)."""
        model, version = self.current_model()
        with self.lock:
            if self.encoded is None or self.encoded[0] != version:
                self.encoded = (version, encode({"version": version, "model": paged_model(model)}))
            return self.encoded[1], version

    def _energy(self, run):
        """A run's energy, read once (a recorded run's folder does not change; the running one is
        not in the log yet): the model is rebuilt at every new run, its runs' files are not."""
        key = (run["run"], run.get("run_dir"))
        if key not in self.energies:
            self.energies[key] = report.energy(report.read_steps(report.run_dir(self.root, run), 60),
                                               self.kwh_price)
        return self.energies[key]

    def runs_payload(self, offset, limit):
        """Full rows of the runs at [offset, offset + limit) in log order."""
        model, version = self.current_model()
        runs = model["runs"]
        return {"version": version, "offset": offset, "total": len(runs), "runs": runs[offset:offset + limit]}

    def current_payload(self):
        """The running run and its steps so far; nothing once the run is in the log."""
        model, _ = self.current_model()
        cur = model["current"]
        if not cur or any(r["run"] == cur["run"] for r in model["runs"]):
            return {"run": None}
        folder = report.run_dir(self.root, {"run": cur["run"], "run_dir": cur.get("run_dir")})
        return dict(cur, steps=report.read_steps(folder, report.LIVE_POINTS))

    def run_payload(self, number):
        model, _ = self.current_model()
        run = next((r for r in model["runs"] if r["run"] == number), None)
        if run is None:
            return None
        return dict(report.run_details(self.root, run, report.LIVE_POINTS, model), row=run)


def paged_model(model):
    """The model as api/model sends it: every run in the chart's columns, the full rows of the
    first page and of the runs that matter most (report.detail_runs: the kept, the baselines,
    the best, the latest), each with its place in the log (`runIndex`)."""
    runs = model["runs"]
    out = {k: v for k, v in model.items() if k != "runs"}
    chart = {k: [r[k] for r in runs] for k in CHART_KEYS}
    chart["description"] = [r["description"] if r["status"] == "keep" else None for r in runs]
    chosen = set(range(min(PAGE_ROWS, len(runs))))
    if len(runs) > PAGE_ROWS:
        position = {id(r): i for i, r in enumerate(runs)}
        chosen.update(position[id(r)] for r in report.detail_runs(model, PAGE_ROWS))
    index = sorted(chosen)
    out.update(runTotal=len(runs), pageRows=PAGE_ROWS, chart=chart, runIndex=index, runs=[runs[i] for i in index])
    return out


def encode(payload):
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _whole(text, default, low, high):
    """A query number: `default` when absent, else a whole number in [low, high] (None if not)."""
    if text is None:
        return default
    if not text.isdigit() or len(text) > 9:
        return None
    value = int(text)
    return value if low <= value <= high else None


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "autoresearch"
    live = None   # set by make_server
    timeout = CONNECTION_TIMEOUT_S   # socket timeout of each connection (StreamRequestHandler)

    def do_GET(self):
        """Every route; a HEAD request takes the same path and `_send` leaves out the body."""
        if not self._host_allowed():
            return self._send(403, "text/plain; charset=utf-8", b"forbidden: use http://127.0.0.1:PORT/\n")
        url = urlsplit(self.path)
        try:
            if url.path in ("/", "/index.html"):
                return self._send(200, "text/html; charset=utf-8", self.live.page, policy=self.live.page_policy)
            query = parse_qs(url.query)
            if url.path == "/api/model":
                since = query.get("since", [None])[0]
                body, version = self.live.model_bytes()
                if since == version:
                    return self._json({"unchanged": True, "version": version})
                return self._send(200, "application/json; charset=utf-8", body)
            if url.path == "/api/runs":
                offset = _whole(query.get("offset", [None])[0], 0, 0, 10**9)
                limit = _whole(query.get("limit", [None])[0], PAGE_ROWS, 1, PAGE_ROWS_MAX)
                if offset is None or limit is None:
                    return self._json({"error": f"offset must be a whole number >= 0 and limit 1..{PAGE_ROWS_MAX}"},
                                      status=400)
                return self._json(self.live.runs_payload(offset, limit))
            if url.path == "/api/current":
                return self._json(self.live.current_payload())
            if url.path.startswith("/api/run/"):
                tail = url.path[len("/api/run/"):]
                details = self.live.run_payload(int(tail)) if tail.lstrip("-").isdigit() else None
                if details is None:
                    return self._json({"error": f"no run {tail[:20]} in the log"}, status=404)
                return self._json(details)
        except (BrokenPipeError, ConnectionResetError):
            return None
        return self._json({"error": "not found"}, status=404)

    do_HEAD = do_GET   # the same answer, headers and Content-Length included, without the body

    def _host_allowed(self):
        host = (self.headers.get("Host") or "").lower()
        port = self.server.server_address[1]
        return host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", "localhost")

    def _json(self, payload, status=200):
        return self._send(status, "application/json; charset=utf-8", encode(payload))

    def _send(self, status, ctype, body, policy=API_POLICY):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", policy)
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format, *args):   # quiet: the terminal is for warnings
        pass
