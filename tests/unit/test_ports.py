"""Ports for servers about to start: never from the ephemeral range, never the same in two processes' slices."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from openmaic.store import ports

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
pytestmark = pytest.mark.skipif(not EPHEMERAL.exists(), reason="no Linux ephemeral port range to stay out of")


def ephemeral_low() -> int:
    return int(EPHEMERAL.read_text().split()[0])


def test_ports_come_from_below_the_range_outgoing_connections_take_theirs_from():
    picker = ports._Ports()
    taken = [picker.take() for _ in range(50)]
    assert all(p < ephemeral_low() for p in taken), taken
    assert len(set(taken)) == 50, "one after another, none handed out twice"


def test_processes_side_by_side_take_disjoint_slices():
    slices = [ports._Ports(i, 3) for i in range(3)]
    picks = [{s.take() for _ in range(200)} for s in slices]
    assert not (picks[0] & picks[1] or picks[0] & picks[2] or picks[1] & picks[2])
    ranges = [set(s.slice) for s in slices]
    for own, others in ((0, (1, 2)), (1, (0, 2)), (2, (0, 1))):
        assert picks[own] <= ranges[own]
        assert not any(ranges[own] & ranges[o] for o in others)


def test_a_port_something_is_bound_to_is_skipped():
    picker = ports._Ports()
    first = picker.take()  # a port that binds now; then rewind, so that it is the next one offered
    picker.next = (picker.next - 1) % len(picker.slice)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first))
        holder.listen()
        assert picker.take() != first


def test_a_slice_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="slice 3 of 3"):
        ports.share_ports(3, 3)
