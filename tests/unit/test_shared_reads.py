"""Single-flight reads: concurrent equal reads share one call; a cancelled leader hands over."""

from __future__ import annotations

import trio

from openmaic.api.shared_reads import SingleFlight


async def test_concurrent_equal_keys_share_one_call():
    flights = SingleFlight()
    calls = 0
    gate = trio.Event()

    async def read() -> list[int]:
        nonlocal calls
        calls += 1
        await gate.wait()
        return [1, 2, 3]

    results = []

    async def reader(key: str) -> None:
        results.append((key, await flights.run(key, read)))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(reader, "a")
        nursery.start_soon(reader, "b")
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert calls == 2  # one per key
    assert sorted(k for k, _ in results) == ["a"] * 5 + ["b"]
    assert all(v == [1, 2, 3] for _, v in results)


async def test_a_cancelled_leader_hands_over_to_a_follower():
    flights = SingleFlight()
    calls = 0

    async def read() -> str:
        nonlocal calls
        calls += 1
        await trio.sleep(0.05 if calls > 1 else 10)
        return "value"

    got = []
    leader = trio.CancelScope()

    async def follower() -> None:
        got.append(await flights.run("k", read))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run_in, leader, flights, read)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(follower)
        await trio.testing.wait_all_tasks_blocked()
        leader.cancel()
    assert got == ["value"] and calls == 2


async def _run_in(scope: trio.CancelScope, flights: SingleFlight, read) -> None:
    with scope:
        await flights.run("k", read)
