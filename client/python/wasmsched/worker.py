"""A wasmsched worker over HTTP: threads as slots, drain on SIGTERM.

    worker = Worker(slots=4)                  # WASMSCHED_URL, WASMSCHED_TOKEN (a worker token)

    @worker.handle("thumbnails")
    def thumbnail(run):
        ...                                   # run.payload; check run.stopped on long work
        return "done"                         # the run's result; an exception fails the attempt

    worker.run()                              # until SIGTERM or SIGINT: then it drains

The server runs the engine's own worker on this worker's behalf (Redis is
the server's business): it assigns runs to this worker's slots, once per
assignment token, and tells it when a run must stop (an operator's stop, a
timeout, a drain). A handler that raises fails the attempt (retried when the
run has attempts left).
"""

import json
import logging
import os
import queue
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .client import Client, WasmschedError, read_events

__all__ = ["Worker", "Run"]

log = logging.getLogger("wasmsched.worker")


class Run:
    """What a handler gets of the run it executes."""

    def __init__(self, a, namespace):
        self.id = a["run"]
        self.token = a["token"]
        self.group = a["group"]
        self.payload = a.get("payload", "")
        self.attempt = a.get("attempt", 1)
        self.max_attempts = a.get("max_attempts", 1)
        self.timeout_ms = a.get("timeout_ms", 0)
        self.deadline = a.get("deadline")
        self.duration_ms = a.get("duration_ms", 0)
        # the W3C traceparent of the attempt's execution span ("" = none):
        # the parent of the handler's own spans
        self.traceparent = a.get("traceparent", "")
        self.namespace = namespace
        self.stop_event = threading.Event()
        self.output = ""
        self.exit_code = None
        self._send_progress = None  # set by the worker
        self._p_lock = threading.Lock()
        self._p_last = 0.0
        self._p_pending = None  # the latest not sent yet: (fraction, message)
        self._p_done = False

    def progress(self, fraction=None, message=""):
        """Report how far the attempt is: fraction 0 to 1 (None: not known)
        and a short message. Call it as often as you like: the latest is
        sent at most once a second."""
        if self._send_progress is None:
            return
        with self._p_lock:
            if self._p_done:
                return
            wait = 1.0 - (time.monotonic() - self._p_last)
            if self._p_pending is not None:
                self._p_pending = (fraction, message)
                return
            if wait > 0:
                self._p_pending = (fraction, message)
                threading.Timer(wait, self._flush_progress).start()
                return
            self._p_last = time.monotonic()
        self._send_progress(self, fraction, message)

    def _flush_progress(self):
        with self._p_lock:
            if self._p_done or self._p_pending is None:
                return
            fraction, message = self._p_pending
            self._p_pending, self._p_last = None, time.monotonic()
        self._send_progress(self, fraction, message)

    @property
    def stopped(self):
        """True once the run must end (stopped, timed out, drained)."""
        return self.stop_event.is_set()


class Worker:
    """A worker of one namespace: register handlers with handle, then run."""

    def __init__(self, url=None, token=None, namespace="default", slots=1, name="python", labels=None,
                 groups=None, heartbeat_ttl=10.0, drain_timeout=30.0, journal=None):
        self.client = Client(url, token, namespace)
        self.slots = slots
        self.name = name
        self.labels = labels or {}
        self.groups = groups
        self.heartbeat_ttl = heartbeat_ttl
        self.drain_timeout = drain_timeout
        self.journal = journal or os.environ.get("WASMSCHED_JOURNAL") or None
        self.handlers = {}
        self.default = None
        self.id = None
        self._lock = threading.Lock()
        self._running = {}  # token -> Run
        # tokens executing or not yet reported: one execution per token (a
        # reported token is never sent again, so the set stays bounded)
        self._seen = set()
        self._draining = threading.Event()
        self._done = threading.Event()
        self._pool = None
        self._reports = queue.Queue()  # (worker id, report): sent in batches

    def handle(self, group):
        """Decorator: the function handles runs of group (fn(run) -> result)."""
        def register(fn):
            self.handlers[group] = fn
            return fn
        return register

    def handle_default(self, fn):
        """Handle the runs of every group without its own handler."""
        self.default = fn
        return fn

    # -- life ---------------------------------------------------------------

    def register(self):
        groups = self.groups
        if groups is None and self.default is None and self.handlers:
            groups = sorted(self.handlers)  # only the groups it has handlers for
        body = {"name": self.name, "slots": self.slots, "labels": self.labels,
                "heartbeat_ttl_ms": int(self.heartbeat_ttl * 1000), "drain_timeout_ms": int(self.drain_timeout * 1000)}
        if groups:
            body["groups"] = groups
        w = self.client._request("POST", self.client._path("workers"), body)
        self.id = w["id"]
        log.info("registered as %s (%s), %d slots", self.id, w.get("identity"), self.slots)
        return w

    def run(self, install_signals=True):
        """Register, then execute assigned runs until SIGTERM/SIGINT (or
        stop()); then drain: no new runs, the runs in flight finish."""
        if install_signals:
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        self.register()
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="wasmsched-slot")
        threading.Thread(target=self._beat, daemon=True, name="wasmsched-heartbeat").start()
        threading.Thread(target=self._stream, daemon=True, name="wasmsched-stream").start()
        threading.Thread(target=self._reporter, daemon=True, name="wasmsched-reports").start()
        while not self._done.wait(0.2):
            pass
        self._pool.shutdown(wait=True)
        log.info("worker stopped")

    def stop(self):
        """Start the drain: the server assigns no new runs; the runs in
        flight finish (within the drain timeout), then the worker exits."""
        if self._draining.is_set():
            return
        self._draining.set()
        log.info("draining: %d runs in flight", len(self._running))
        threading.Thread(target=self._drain, daemon=True, name="wasmsched-drain").start()

    def _drain(self):
        try:
            self.client._request("DELETE", self.client._path("workers", self.id))
        except WasmschedError as e:
            log.warning("drain: %s", e)
            self._done.set()
            return
        deadline = time.monotonic() + self.drain_timeout + 5
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    break
            time.sleep(0.05)
        # the stream ends with "deregistered"; if it does not, end anyway
        self._done.wait(5)
        self._done.set()

    def _beat(self):
        every = max(self.heartbeat_ttl / 3, 0.1)
        while not self._done.wait(every):
            try:
                self.client._request("POST", self.client._path("workers", self.id, "heartbeat"), {}, timeout=every)
            except WasmschedError as e:
                if e.status == 404 and not self._draining.is_set():
                    log.warning("the server no longer knows this worker (%s): registering again", e.message)
                    self._reregister()
                else:
                    log.warning("heartbeat: %s", e)

    def _reregister(self):
        try:
            self.register()
        except WasmschedError as e:
            log.warning("register: %s", e)

    def _stream(self):
        backoff = 0.1
        while not self._done.is_set():
            try:
                resp = self.client._request("GET", self.client._path("workers", self.id, "assignments"),
                                            stream=True, timeout=60)
                backoff = 0.1
                with resp:
                    for event, data in read_events(resp):
                        if event == "assign":
                            self._assign(json.loads(data))
                        elif event == "stop":
                            self._stop(json.loads(data))
                        elif event == "deregistered":
                            if self._draining.is_set():
                                self._done.set()
                                return
                            self._reregister()
                            break
            except WasmschedError as e:
                if e.status == 404 and not self._draining.is_set():
                    self._reregister()
                elif e.status in (401, 403):
                    log.error("assignments: %s", e)
                    self._done.set()
                    return
                else:
                    log.warning("assignments: %s; reconnecting", e)
            except OSError as e:
                log.warning("assignments stream broke: %s; reconnecting", e)
            if self._done.wait(backoff):
                return
            backoff = min(backoff * 2, 5)

    def _assign(self, a):
        with self._lock:
            if a["token"] in self._seen:
                return  # sent again after a reconnect: one execution per token
            self._seen.add(a["token"])
            run = Run(a, self.client.namespace)
            run._send_progress = self._progress_of(self.id)
            self._running[run.token] = run
        if self.journal:
            with open(self.journal, "a") as f:
                f.write(f"{run.id} {run.token} {run.attempt}\n")
                f.flush()
                os.fsync(f.fileno())
        self._pool.submit(self._execute, run, self.id)

    def _stop(self, s):
        with self._lock:
            run = self._running.get(s["token"])
        if run:
            run.stop_event.set()

    def _progress_of(self, worker_id):
        def send(run, fraction, message):
            body = {"token": run.token, "message": message[:256]}
            if fraction is not None:
                body["fraction"] = min(max(float(fraction), 0.0), 1.0)
            try:
                self.client._request("POST", self.client._path("workers", worker_id, "runs", run.id, "progress"), body)
            except WasmschedError as e:
                log.debug("progress of run %s: %s", run.id, e)
        return send

    def _execute(self, run, worker_id):
        fn = self.handlers.get(run.group) or self.default
        report = {"token": run.token}
        try:
            if fn is None:
                raise RuntimeError(f"no handler for group {run.group} on this worker")
            result = fn(run)
            if result is None:
                result = ""
            report["result"] = result if isinstance(result, str) else json.dumps(result)
        except Exception as e:  # the attempt fails with the exception's message
            report["error"] = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if run.output:
            report["output"] = run.output
        if run.exit_code is not None:
            report["exit_code"] = run.exit_code
        report["run"] = run.id
        with run._p_lock:
            run._p_done = True
        self._reports.put((worker_id, report))
        with self._lock:
            self._running.pop(run.token, None)

    def _reporter(self):
        # what finished while the last request was out goes in the next
        while True:
            first = self._reports.get()
            batch = [first]
            while len(batch) < 256:
                try:
                    batch.append(self._reports.get_nowait())
                except queue.Empty:
                    break
            by_worker = {}
            for wid, rep in batch:
                by_worker.setdefault(wid, []).append(rep)
            for wid, reps in by_worker.items():
                try:
                    res = self.client._request("POST", self.client._path("workers", wid, "reports"), {"reports": reps})
                    for r in (res or {}).get("refused", []):
                        log.warning("report of run %s (token %s) refused: %s", r.get("run"), r.get("token"), r.get("error"))
                except WasmschedError as e:
                    log.warning("reports of %d runs: %s", len(reps), e)
            with self._lock:
                for _, rep in batch:
                    self._seen.discard(rep["token"])
