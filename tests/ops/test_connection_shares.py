"""ConnectionShares: web processes see each other's connection counts through memory made before the fork."""

from __future__ import annotations

import multiprocessing
import os
import signal

from ops.httpserver import ConnectionShares

fork = multiprocessing.get_context("fork")


def _sibling(shares: ConnectionShares, connections: int, claimed, stop) -> None:
    shares.claim()
    shares.publish(connections)
    claimed.set()
    stop.wait(30)
    shares.release()


def _start_sibling(shares: ConnectionShares, connections: int):
    claimed, stop = fork.Event(), fork.Event()
    proc = fork.Process(target=_sibling, args=(shares, connections, claimed, stop))
    proc.start()
    assert claimed.wait(10)
    return proc, stop


def test_a_process_holding_more_connections_than_a_sibling_leaves_the_next_one_to_it():
    shares = ConnectionShares(2)
    shares.claim()
    sibling, stop = _start_sibling(shares, 1)
    try:
        assert not shares.sibling_holds_fewer(0)
        assert not shares.sibling_holds_fewer(1)  # equal: both race, nobody waits
        assert shares.sibling_holds_fewer(2)
    finally:
        stop.set()
        sibling.join(10)
    # A sibling that stopped gave its slot back: nobody to leave connections to.
    assert not shares.sibling_holds_fewer(5)


def test_a_crashed_process_slot_is_taken_by_its_replacement():
    shares = ConnectionShares(2)
    shares.claim()
    crashed, _ = _start_sibling(shares, 0)
    os.kill(crashed.pid, signal.SIGKILL)
    crashed.join(10)
    # More replacements than the table's spare room: each takes a slot whose process is gone.
    for count in (3, 4, 5, 6):
        replacement, stop = _start_sibling(shares, count)
        try:
            assert shares.sibling_holds_fewer(count + 1) and not shares.sibling_holds_fewer(count)
        finally:
            os.kill(replacement.pid, signal.SIGKILL)
            replacement.join(10)


def test_one_process_has_no_siblings():
    shares = ConnectionShares(1)
    assert not shares.sibling_holds_fewer(100)  # not claimed yet
    shares.claim()
    assert not shares.sibling_holds_fewer(100)
