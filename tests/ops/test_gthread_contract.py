"""What ops/httpserver.py's worker subclass takes from gunicorn's gthread worker, beyond its documented API.

The intake (requests gathered in the selector before a thread takes them) hooks
gthread's own methods and reads a connection's parser. A gunicorn release that
renames or reshapes any of them breaks slow-client protection; this fails first,
naming what moved. pyproject.toml pins gunicorn to the major tested here.
"""

from __future__ import annotations

import inspect
import re
import socket
from pathlib import Path

import gunicorn
from gunicorn.config import Config
from gunicorn.workers.gthread import TConn, ThreadWorker

ROOT = Path(__file__).resolve().parents[2]


def test_gunicorn_is_the_major_pyproject_pins_and_this_contract_was_checked_on():
    pin = re.search(r'"gunicorn>=(\d+),<(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert pin, "pyproject.toml no longer pins gunicorn to one major"
    assert (int(pin.group(1)), int(pin.group(2))) == (27, 28)
    assert gunicorn.version_info[0] == 27, f"gunicorn {gunicorn.__version__}: re-check ops/httpserver.py's hooks"


def test_the_gthread_methods_the_worker_overrides_keep_their_signatures():
    expected = {
        "accept": ["self", "listener"],
        "enqueue_req": ["self", "conn"],
        "finish_request": ["self", "conn", "fs"],
        "murder_pending": ["self"],
        "handle": ["self", "conn"],
        "handle_request": ["self", "req", "conn"],
        "handle_error": ["self", "req", "client", "addr", "exc"],
        "handle_exit": ["self", "sig", "frame"],
    }
    found = {name: list(inspect.signature(getattr(ThreadWorker, name)).parameters) for name in expected}
    assert found == expected


def test_a_connection_still_has_the_parser_and_flags_the_intake_uses():
    left, right = socket.socketpair()
    try:
        conn = TConn(Config(), left, ("127.0.0.1", 1), ("127.0.0.1", 2))
        assert hasattr(conn, "data_ready") and conn.parser is None
        conn.init()
        unreader = conn.parser.unreader
        unreader.unread(b"GET / HTTP/1.1\r\n")  # what the selector gathered, read first by the thread's parser
        assert unreader.take_buffered() == b"GET / HTTP/1.1\r\n"
    finally:
        left.close()
        right.close()
