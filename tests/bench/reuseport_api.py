"""One API process serving its own SO_REUSEPORT socket through uvicorn's public API (`Server.run(sockets=)`).

The public-API way to put N API processes behind one port, without the parent
that deals connections (service/api/processes.py): start this N times on the
same port and the kernel spreads new connections by a hash of their addresses.
Only bench_private.py starts it, as the reference for the dealing parent.
Usage: python -m tests.bench.reuseport_api PORT
"""

from __future__ import annotations

import socket
import sys

import uvicorn

from service.api.app import create_app
from service.api.connections import config as api_config
from service.api.connections import tune_process
from service.api.settings import ApiSettings


def main() -> int:
    port = int(sys.argv[1])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    tune_process()
    settings = ApiSettings()
    uvicorn.Server(api_config(create_app(settings), settings, log_level="warning")).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
