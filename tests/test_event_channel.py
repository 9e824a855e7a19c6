"""The worker's events channel (cuda_llm/tools/harness/event_channel.py): each line comes with the time the worker
sent it, however late the parent reads it; a line longer than one message comes whole; the channel ends when
the worker does; where stamps are off, a line's time is when it was read (the old pipe)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from cuda_llm.tools.harness.event_channel import MAX_MESSAGE, EventChannel

WRITER = """
import os, sys, time
from cuda_llm.tools.harness.event_channel import write_all
fd = int(sys.argv[1])
for i in range(3):
    write_all(fd, b'{"ev": "t", "i": %d}\\n' % i)
    time.sleep(0.2)
write_all(fd, b'{"ev": "long", "pad": "' + b"x" * int(sys.argv[2]) + b'"}\\n')
"""


def run_writer(channel: EventChannel, pad: int = 10) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(channel.child_fd), str(pad)],
                            pass_fds=(channel.child_fd,))
    channel.close_child()
    return proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel send stamps are Linux's")
def test_lines_carry_their_send_times_however_late_they_are_read():
    channel = EventChannel()
    assert channel.stamped
    proc = run_writer(channel)
    time.sleep(1.0)                        # the parent busy elsewhere: every line waits in the socket
    read_at = time.perf_counter()
    got = list(channel.lines())
    assert proc.wait(10) == 0 and [line[:15] for line, _ in got[:3]] == [b'{"ev": "t", "i"'] * 3
    times = [at for _, at in got]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(0.15 < g < 0.5 for g in gaps), gaps          # the writer's 0.2 s sleeps, not one bunch
    assert times[0] < read_at - 0.3                          # when it was sent, not when it was read


def test_where_stamps_are_off_a_line_is_timed_when_it_is_read():
    channel = EventChannel(prefer_stamps=False)
    assert not channel.stamped
    proc = run_writer(channel)
    time.sleep(1.0)
    read_at = time.perf_counter()
    got = list(channel.lines())
    assert proc.wait(10) == 0 and len(got) == 4
    assert got[0][1] >= read_at and got[1][1] - got[0][1] < 0.05      # bunched: why the stamps exist


@pytest.mark.parametrize("prefer_stamps", [True, False])
def test_a_line_longer_than_a_message_comes_whole_and_the_channel_ends_with_the_worker(prefer_stamps):
    channel = EventChannel(prefer_stamps=prefer_stamps)
    pad = 5 * MAX_MESSAGE + 123
    proc = run_writer(channel, pad)
    got = [line for line, _ in channel.lines()]           # returns: the writer's end closed when it exited
    assert proc.wait(10) == 0 and len(got) == 4
    assert got[-1] == b'{"ev": "long", "pad": "' + b"x" * pad + b'"}'
