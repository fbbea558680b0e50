"""The HTTP client of a wasmsched server: submit, get, list, stop and watch runs.

Standard library only. The server URL and token come from the arguments or
from WASMSCHED_URL and WASMSCHED_TOKEN.
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "WasmschedError"]


class WasmschedError(Exception):
    """A refusal of the server (status, code and message of its JSON error),
    or status 0 and code "unreachable" when the server could not be reached."""

    def __init__(self, status, code, message):
        super().__init__(f"wasmsched: {message} ({status} {code})" if status else f"wasmsched: {message}")
        self.status = status
        self.code = code
        self.message = message


def _settings(url, token):
    url = url or os.environ.get("WASMSCHED_URL", "")
    token = token if token is not None else os.environ.get("WASMSCHED_TOKEN", "")
    if not url:
        raise ValueError("wasmsched: no server URL: pass url= or set WASMSCHED_URL (e.g. http://127.0.0.1:8080)")
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ValueError(f"wasmsched: server URL {url!r}: want http://HOST:PORT or https://HOST:PORT")
    return url.rstrip("/"), token


class Client:
    """A client of one namespace of a wasmsched server."""

    def __init__(self, url=None, token=None, namespace="default", timeout=30.0):
        self.url, self.token = _settings(url, token)
        self.namespace = namespace
        self.timeout = timeout

    # -- plumbing ---------------------------------------------------------

    def _path(self, *parts):
        p = "/api/v1/namespaces/" + urllib.parse.quote(self.namespace, safe="")
        for part in parts:
            p += "/" + urllib.parse.quote(str(part), safe="")
        return p

    def _request(self, method, path, body=None, headers=None, timeout=None, stream=False):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "text/event-stream" if stream else "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            resp = urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raise _error_of(e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise WasmschedError(0, "unreachable", f"cannot reach {self.url}: {reason} (is the server running? check WASMSCHED_URL)") from None
        if stream:
            return resp
        with resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    # -- runs -------------------------------------------------------------

    def submit(self, group, payload="", *, id=None, slots=None, priority=None, duration_ms=None, labels=None,
               require=None, prefer=None, same_worker=None, not_before=None, timeout_ms=None, max_attempts=None,
               retry_backoff_ms=None, retry_cap_ms=None, idempotency_key=None, traceparent=None):
        """Submit a run to group (made with policy wait if new) and return it.

        not_before is an RFC 3339 time; prefer a list of "key=value[:weight]";
        traceparent a W3C traceparent (the caller's span: the run's spans join
        its trace, and its worker gets it as the run's parent)."""
        body = {"payload": payload}
        for k, v in (("id", id), ("slots", slots), ("priority", priority), ("duration_ms", duration_ms),
                     ("labels", labels), ("require", require), ("prefer", prefer), ("same_worker", same_worker),
                     ("not_before", not_before), ("timeout_ms", timeout_ms), ("max_attempts", max_attempts),
                     ("retry_backoff_ms", retry_backoff_ms), ("retry_cap_ms", retry_cap_ms)):
            if v is not None:
                body[k] = v
        headers = {}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        if traceparent:
            headers["traceparent"] = traceparent
        return self._request("POST", self._path("groups", group, "runs"), body, headers or None)

    def get(self, run_id):
        """The run with this id."""
        return self._request("GET", self._path("runs", run_id))

    def list(self, group=None, state=None, labels=None, limit=None, cursor=None):
        """One page of runs, newest first: {"runs": [...], "next_cursor": ...}."""
        q = [(k, v) for k, v in (("group", group), ("state", state), ("limit", limit), ("cursor", cursor)) if v]
        q += [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        return self._request("GET", self._path("runs") + ("?" + urllib.parse.urlencode(q) if q else ""))

    def stop(self, run_id, reason=None):
        """Stop a run (WAITING: discarded; LAUNCHED: stopped; RUNNING: stopping)."""
        return self._request("POST", self._path("runs", run_id, "stop"), {"reason": reason} if reason else {})

    def watch(self, group=None, run=None):
        """Yield each run (a dict) after each change of its state, as the
        server streams them (server-sent events); ends when the stream does."""
        q = [(k, v) for k, v in (("group", group), ("run", run)) if v]
        resp = self._request("GET", self._path("events") + ("?" + urllib.parse.urlencode(q) if q else ""),
                             stream=True, timeout=60)
        with resp:
            for event, data in read_events(resp):
                if event == "run":
                    yield json.loads(data)


def read_events(resp):
    """Yield (event, data) of each frame of a server-sent event stream."""
    event, data = "", []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode("utf-8").rstrip("\r\n")
        if line == "":
            if event or data:
                yield event or "message", "\n".join(data)
            event, data = "", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


def _error_of(e):
    try:
        body = json.loads(e.read() or b"{}")
    except ValueError:
        body = {}
    message = body.get("error") or e.reason or "error"
    code = body.get("code") or "error"
    if e.code == 401:
        message += " (check WASMSCHED_TOKEN)"
    return WasmschedError(e.code, code, message)
