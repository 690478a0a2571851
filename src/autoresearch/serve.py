"""`autoresearch serve`: the report page, live, on 127.0.0.1 only.

The page is the report's own (same script, same rendering) in live mode: it polls
`api/model?since=VERSION` (the model again only when the log or current.json changed) and
`api/current` (the running run's steps so far), and fetches `api/run/N` when a run is
opened. The server binds the loopback address only and answers only requests whose Host
header names it, so another machine or a rebinding web page cannot read the log.
Standard library only.
"""

import errno
import http.server
import json
import os
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from autoresearch import cli, report

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# A connection that sends no complete request (or reads no reply) for this long is closed, so
# idle or stalled clients cannot pile up threads and sockets.
CONNECTION_TIMEOUT_S = 10
# Sent with every answer: the page's script policy plus what only a header can say (no framing:
# another page cannot overlay or click the report), and no guessing of content types.
API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


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
        raise cli.UsageError(f"--port must be 0..65535, not {args.port}")
    root = report.repo_root(args.log)
    report.check_price(args.kwh_price)
    live = LiveState(root, Path(args.log).name, args.kwh_price)
    try:
        server = make_server(live, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise cli.UsageError(f"port {args.port} on {HOST} is in use; pick another with --port P "
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
    return cli.EXIT_OK


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
        self.version, self.model = None, None
        self.warned = set()
        self.energies = {}
        self.page = report.render_html(None, live=True).encode("utf-8")
        self.page_policy = report.content_policy(report.page_script()) + "; frame-ancestors 'none'"

    def signature(self):
        parts = []
        for path in (self.root / self.log_name, self.root / report.CURRENT_FILE):
            try:
                st = os.stat(path)
                parts.append(f"{st.st_size}.{st.st_mtime_ns}")
            except OSError:
                parts.append("-")
        return "-".join(parts)

    def _warn_once(self, message):
        if message not in self.warned:
            self.warned.add(message)
            print(f"autoresearch: warning: {message}", file=sys.stderr, flush=True)

    def current_model(self):
        with self.lock:
            sig = self.signature()
            if sig != self.version or self.model is None:
                model, night = report.build_model(self.root, Path(self.log_name), self.kwh_price,
                                                  warn=self._warn_once, with_log=True)
                model["live"] = True
                energies = [{"energy": self._energy(r)} for r in report.detail_runs(model)]
                report.add_energy_totals(model, energies)
                report.add_ledger(model, self.root, night=night)
                self.model, self.version = model, sig
            return self.model, self.version

    def _energy(self, run):
        """A run's energy, read once (a recorded run's folder does not change; the running one is
        not in the log yet): the model is rebuilt at every new run, its runs' files are not."""
        key = (run["run"], run.get("run_dir"))
        if key not in self.energies:
            self.energies[key] = report.energy(report.read_steps(report.run_dir(self.root, run), 60),
                                               self.kwh_price)
        return self.energies[key]

    def model_payload(self, since):
        model, version = self.current_model()
        if since == version:
            return {"unchanged": True, "version": version}
        return {"version": version, "model": model}

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
        return report.run_details(self.root, run, report.LIVE_POINTS, model)


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "autoresearch"
    live = None   # set by make_server
    timeout = CONNECTION_TIMEOUT_S   # socket timeout of each connection (StreamRequestHandler)

    def do_GET(self):
        if not self._host_allowed():
            return self._send(403, "text/plain; charset=utf-8", b"forbidden: use http://127.0.0.1:PORT/\n")
        url = urlsplit(self.path)
        try:
            if url.path in ("/", "/index.html"):
                return self._send(200, "text/html; charset=utf-8", self.live.page, policy=self.live.page_policy)
            if url.path == "/api/model":
                since = parse_qs(url.query).get("since", [None])[0]
                return self._json(self.live.model_payload(since))
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

    def _host_allowed(self):
        host = (self.headers.get("Host") or "").lower()
        port = self.server.server_address[1]
        return host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", "localhost")

    def _json(self, payload, status=200):
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        return self._send(status, "application/json; charset=utf-8", body)

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
        self.wfile.write(body)

    def log_message(self, format, *args):   # quiet: the terminal is for warnings
        pass
