#!/usr/bin/env python3
"""A runnable wasmsched worker: handles the groups given (default "py").

    WASMSCHED_URL=http://127.0.0.1:8080 WASMSCHED_TOKEN=... python3 examples/worker.py --group py --slots 4

A run's payload says what to do: "fail" raises (the attempt fails),
"sleep:S" works S seconds (and ends early when the run is stopped), anything
else comes back upper-cased as the run's result.
"""

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wasmsched import Worker  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group", action="append", help="a group to handle (repeatable; default py)")
    ap.add_argument("--slots", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--name", default="python", help="goes into the worker's identity")
    ap.add_argument("--namespace", default=os.environ.get("WASMSCHED_NAMESPACE", "default"))
    ap.add_argument("--heartbeat-ttl", type=float, default=10.0, help="seconds (default 10)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = Worker(namespace=args.namespace, slots=args.slots, name=args.name, heartbeat_ttl=args.heartbeat_ttl)

    def work(run):
        logging.info("run %s attempt %d: %r", run.id, run.attempt, run.payload)
        if run.payload == "fail":
            raise RuntimeError("asked to fail")
        if run.payload.startswith("sleep:"):
            end = time.monotonic() + float(run.payload[6:])
            total = end - time.monotonic()
            while time.monotonic() < end:
                run.progress(1 - (end - time.monotonic()) / total, "sleeping")
                if run.stopped:
                    raise RuntimeError("stopped")
                time.sleep(0.05)
            return "slept"
        return run.payload.upper()

    for g in args.group or ["py"]:
        worker.handle(g)(work)
    worker.run()


if __name__ == "__main__":
    main()
