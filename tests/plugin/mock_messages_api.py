"""A scripted stand-in for the Anthropic Messages API, served on loopback.

Point the real Claude Code CLI at it with ANTHROPIC_BASE_URL=http://127.0.0.1:PORT and any
dummy ANTHROPIC_API_KEY: the CLI then runs its whole agent loop (tools, permission checks,
plugin hooks) against a "model" that is a Python function of the request body.

`script(body) -> list of blocks`, each block {"type": "text", "text": ...} or
{"type": "tool_use", "name": ..., "input": {...}}. The reply's stop_reason is "tool_use" when
it holds a tool call, else "end_turn". The script may instead return an `APIError`, which is
answered as the real API answers an error (status, JSON error body, headers such as
retry-after). Every request body is kept in `.requests` (and, when `record_path` is given,
appended to that JSONL file) for the test to inspect.
"""

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = itertools.count(1)


class APIError:
    """An error answer: e.g. APIError(429, "rate_limit_error", "...", {"retry-after": "2"})."""

    def __init__(self, status, kind, message, headers=None):
        self.status, self.kind, self.message = status, kind, message
        self.headers = dict(headers or {})

    def body(self):
        return {"type": "error", "error": {"type": self.kind, "message": self.message}}


class MessagesAPI:
    def __init__(self, script, record_path=None, usage=None):
        self.script = script
        self.record_path = record_path
        self.usage = usage or (lambda body: {"input_tokens": 100, "output_tokens": 20})
        self.served = []    # (request body, usage) of every answer that was not an error
        self.requests = []
        self.errors = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self):
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def record(self, body):
        with self._lock:
            self.requests.append(body)
            if self.record_path:
                with open(self.record_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(body) + "\n")

    def reply_for(self, body):
        try:
            return self.script(body)
        except Exception as exc:  # a broken script shows up in the test, not as a hung CLI
            self.errors.append(repr(exc))
            return [{"type": "text", "text": f"mock script error: {exc!r}"}]

    def _handler_class(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one response per connection: no keep-alive bookkeeping

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server naming
                self._json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})

            def do_HEAD(self):  # noqa: N802
                self.send_response(200)
                self.end_headers()

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                 "message": "body is not JSON"}})
                    return
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                    return
                if not path.endswith("/v1/messages"):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
                    return
                api.record(body)
                blocks = api.reply_for(body)
                if isinstance(blocks, APIError):
                    self._json(blocks.status, blocks.body(), blocks.headers)
                    return
                message = _message(body, blocks, api.usage(body))
                with api._lock:
                    api.served.append((body, message["usage"]))
                if body.get("stream"):
                    self._stream(message)
                else:
                    self._json(200, message)

            def _json(self, code, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_mock_{next(_ids)}")
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("request-id", f"req_mock_{next(_ids)}")
                self.end_headers()
                for event, data in _events(message):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        return Handler


def _message(body, blocks, usage):
    content = []
    for block in blocks:
        if block["type"] == "tool_use":
            content.append({"type": "tool_use", "id": f"toolu_mock{next(_ids):06d}", "name": block["name"],
                            "input": block["input"]})
        else:
            content.append({"type": "text", "text": block["text"]})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {"id": f"msg_mock{next(_ids):06d}", "type": "message", "role": "assistant",
            "model": body.get("model", "mock"), "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": dict(usage)}


def _events(message):
    # As the API streams it: message_start carries the input side, message_delta the output.
    start = dict(message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1))
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": message["usage"]["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


# --- reading what the CLI sent ---------------------------------------------------------------

def blocks_of(message):
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def text_of(message):
    """All text a message carries, tool results included."""
    parts = []
    for block in blocks_of(message):
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else text_of({"content": inner}))
    return "\n".join(parts)


def has_tool_result(message):
    return any(b.get("type") == "tool_result" for b in blocks_of(message))


def is_agent_request(body):
    """The main agent loop's requests carry tools; titles and other side calls do not."""
    return bool(body.get("tools"))
