"""Tests of the client and the worker against a stand-in server (no engine:
the Go test suite runs them against a real one, tests/httpworker_test.go)."""

import json
import os
import queue
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wasmsched import Client, WasmschedError, Worker  # noqa: E402

NS = "/api/v1/namespaces/default"


class Stand(ThreadingHTTPServer):
    """Records every request; answers from routes: (method, path) -> fn(handler, body)."""

    daemon_threads = True

    def __init__(self, routes):
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes = routes
        self.requests = queue.Queue()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        self.server.requests.put((self.command, self.path, dict(self.headers), body))
        fn = self.server.routes.get((self.command, self.path.split("?")[0]))
        if fn is None:
            return self.reply(404, {"error": f"no route {self.command} {self.path}", "code": "not_found"})
        fn(self, body)

    do_GET = do_POST = do_DELETE = _any

    def reply(self, status, obj):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def events(self, frames):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for f in frames:
            if callable(f):
                f = f()
            self.wfile.write(f.encode())
            self.wfile.flush()
        self.close_connection = True


class ClientTest(unittest.TestCase):
    def test_settings(self):
        old = os.environ.pop("WASMSCHED_URL", None)
        try:
            with self.assertRaisesRegex(ValueError, "set WASMSCHED_URL"):
                Client()
            with self.assertRaisesRegex(ValueError, "want http://HOST:PORT"):
                Client("127.0.0.1:8080")
            os.environ["WASMSCHED_URL"] = "http://example.invalid:1/"
            os.environ["WASMSCHED_TOKEN"] = "tok-from-env"
            c = Client()
            self.assertEqual((c.url, c.token), ("http://example.invalid:1", "tok-from-env"))
        finally:
            os.environ.pop("WASMSCHED_URL", None)
            os.environ.pop("WASMSCHED_TOKEN", None)
            if old is not None:
                os.environ["WASMSCHED_URL"] = old

    TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    def test_submit_sends_options(self):
        s = Stand({("POST", NS + "/groups/g%201/runs"): lambda h, b: h.reply(201, {"id": "r1", "state": "WAITING", **b})})
        run = Client(s.url, "secret-token").submit("g 1", "pay", id="r1", prefer=["region=eu:10"], max_attempts=3,
                                                    idempotency_key="k1", traceparent=self.TP)
        self.assertEqual(run["id"], "r1")
        method, path, headers, body = s.requests.get(timeout=5)
        self.assertEqual((method, path), ("POST", NS + "/groups/g%201/runs"))
        self.assertEqual(headers["Authorization"], "Bearer secret-token")
        self.assertEqual(headers["Idempotency-Key"], "k1")
        self.assertEqual({k.lower(): v for k, v in headers.items()}["traceparent"], self.TP)
        self.assertEqual(body, {"payload": "pay", "id": "r1", "prefer": ["region=eu:10"], "max_attempts": 3})

    def test_errors(self):
        s = Stand({("GET", NS + "/runs/r1"): lambda h, b: h.reply(401, {"error": "unknown token", "code": "unauthorized"})})
        with self.assertRaises(WasmschedError) as cm:
            Client(s.url, "bad").get("r1")
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        self.assertIn("check WASMSCHED_TOKEN", str(cm.exception))
        with self.assertRaises(WasmschedError) as cm:
            Client(s.url).get("nope")
        self.assertEqual(cm.exception.status, 404)
        s.shutdown()
        s.server_close()
        with self.assertRaises(WasmschedError) as cm:
            Client(s.url, timeout=2).get("r1")
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "unreachable"))
        self.assertIn("cannot reach", str(cm.exception))

    def test_watch(self):
        frames = [": subscribed\n\n", 'event: run\ndata: {"id": "r1", "state": "RUNNING"}\n\n', ": ping\n\n",
                  'event: missed\ndata: {}\n\n', 'event: run\ndata: {"id": "r1", "state": "SUCCEEDED"}\n\n']
        s = Stand({("GET", NS + "/events"): lambda h, b: h.events(frames)})
        got = [r["state"] for r in Client(s.url).watch(run="r1")]
        self.assertEqual(got, ["RUNNING", "SUCCEEDED"])
        self.assertTrue(s.requests.get(timeout=5)[1].endswith("/events?run=r1"))


class WorkerTest(unittest.TestCase):
    def test_executes_reports_and_drains(self):
        reports, drained = queue.Queue(), threading.Event()
        a1 = {"run": "r1", "token": "t1", "group": "py", "payload": "hi", "attempt": 1, "max_attempts": 1}
        a2 = {"run": "r2", "token": "t2", "group": "py", "payload": "boom", "attempt": 1, "max_attempts": 1}

        def stream(h, b):
            h.events([f"event: assign\ndata: {json.dumps(a1)}\n\n",
                      f"event: assign\ndata: {json.dumps(a1)}\n\n",  # sent again: executed once
                      f"event: assign\ndata: {json.dumps(a2)}\n\n",
                      lambda: (drained.wait(10), "event: drain\ndata: {}\n\nevent: deregistered\ndata: {}\n\n")[1]])

        def report(h, b):
            for r in b["reports"]:
                reports.put((r.pop("run"), r))
            h.reply(200, {"accepted": len(b["reports"]), "refused": []})

        s = Stand({
            ("POST", NS + "/workers"): lambda h, b: h.reply(201, {"id": "w-1", "identity": "py#1#x", **b}),
            ("POST", NS + "/workers/w-1/heartbeat"): lambda h, b: h.reply(200, {"id": "w-1"}),
            ("GET", NS + "/workers/w-1/assignments"): stream,
            ("POST", NS + "/workers/w-1/reports"): report,
            ("DELETE", NS + "/workers/w-1"): lambda h, b: (drained.set(), h.reply(202, {"id": "w-1", "draining": True}))[1],
        })
        w = Worker(s.url, "wtok", slots=2, heartbeat_ttl=1.0)
        calls = []

        @w.handle("py")
        def handler(run):
            calls.append(run.id)
            if run.payload == "boom":
                raise ValueError("bad payload")
            run.output = "printed\n"
            return run.payload.upper()

        t = threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True)
        t.start()
        got = dict(reports.get(timeout=10) for _ in range(2))
        self.assertEqual(got["r1"], {"token": "t1", "result": "HI", "output": "printed\n"})
        self.assertEqual(got["r2"], {"token": "t2", "error": "ValueError: bad payload"})
        self.assertEqual(sorted(calls), ["r1", "r2"])
        w.stop()
        t.join(15)
        self.assertFalse(t.is_alive(), "the worker did not exit after its drain")
        self.assertEqual(w._seen, set(), "reported tokens are forgotten (the set is bounded by the runs in flight)")
        reg = s.requests.get(timeout=5)
        self.assertEqual(reg[:2], ("POST", NS + "/workers"))
        self.assertEqual(reg[3]["groups"], ["py"])  # the groups it has handlers for
        self.assertEqual(reg[3]["heartbeat_ttl_ms"], 1000)


if __name__ == "__main__":
    unittest.main()
