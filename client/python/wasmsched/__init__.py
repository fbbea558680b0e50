"""wasmsched: submit and execute runs of a wasmsched server over its HTTP API.

Standard library only (Python 3.11+). The server URL and token come from the
arguments or from WASMSCHED_URL and WASMSCHED_TOKEN.
"""

from .client import Client, WasmschedError
from .worker import Run, Worker

__all__ = ["Client", "WasmschedError", "Worker", "Run"]
__version__ = "0.1.0"
