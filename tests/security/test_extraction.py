"""PDF extraction on a budget: a hostile document costs its child process, never the server.

The hostile files are a few kilobytes each (``tests/security/pdfs.py``): one that takes pypdf minutes of CPU, one
that grows it by hundreds of megabytes, one that inflates a single stream at once, one that makes pypdf warn for
every object. Run in the server, the first two held a 2-core machine and grew the process by over a gigabyte.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import httpx
import pytest
import trio

from openmaic.config import ExtractionLimits
from openmaic.extraction.pdf import (
    DocumentTooCostly, ExtractionBusy, ExtractionQueueFull, Extractor, UnreadableFile,
)  # fmt: skip
from openmaic.store.postgres import free_port
from tests.security import pdfs
from tests.serving import FAST_CONFIG, serve_processes, wait_ready


def children() -> list[int]:
    """This process's extraction children that still exist (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"openmaic.extraction.child" in cmdline:
            found.append(int(entry.name))
    return found


def limits(**kw: object) -> ExtractionLimits:
    return ExtractionLimits(**{"cpu_s": 30, "wall_s": 60, **kw})  # type: ignore[arg-type]


async def test_text_is_read_page_by_page_within_the_page_and_character_caps():
    doc = pdfs.text_pdf("Stomata open at dawn", pages=5)
    whole = await Extractor(limits()).pdf_text(doc, owner="o", filename="leaf.pdf")
    assert (whole.pages_read, whole.pages_total, whole.truncated) == (5, 5, False)
    assert whole.text.count("Stomata open at dawn") == 5

    paged = await Extractor(limits(max_pages=2)).pdf_text(doc, owner="o", filename="leaf.pdf")
    assert (paged.pages_read, paged.pages_total, paged.truncated) == (2, 5, True)
    assert paged.text.count("Stomata") == 2

    short = await Extractor(limits(max_chars=30)).pdf_text(doc, owner="o", filename="leaf.pdf")
    assert short.truncated and len(short.text) <= 30 and short.text.startswith("Stomata open at dawn")


async def test_decompressed_bytes_are_capped_over_the_whole_document_counting_every_read():
    # Each page walks the same 200 KB stream again: the cap counts every read, not only the first decoding.
    stream = b"BT /F1 12 Tf 72 712 Td (Leaf) Tj ET\n" + b"% padding\n" * 20_000
    doc = pdfs.pdf(stream, pages=10)
    read = await Extractor(limits(max_decompressed_bytes=len(stream) * 3 + 10)).pdf_text(doc, owner="o",
                                                                                          filename="leaf.pdf")
    assert read.truncated and read.pages_read == 3 and read.text.count("Leaf") == 3

    with pytest.raises(DocumentTooCostly) as refused:
        await Extractor(limits(max_decompressed_bytes=len(stream) - 1)).pdf_text(doc, owner="o", filename="leaf.pdf")
    assert refused.value.details["reason"] == "decompressed"


async def test_a_pdf_past_its_cpu_budget_is_killed_and_reaped():
    with pytest.raises(DocumentTooCostly) as refused:
        await Extractor(limits(cpu_s=1)).pdf_text(pdfs.slow_pdf(), owner="o", filename="slow.pdf")
    assert refused.value.details["reason"] == "cpu" and refused.value.status == 400
    assert "1 s of CPU" in refused.value.message
    assert children() == []


async def test_a_pdf_past_its_memory_budget_ends_its_child():
    with pytest.raises(DocumentTooCostly) as refused:
        await Extractor(limits(memory_bytes=100 << 20)).pdf_text(pdfs.inflating_pdf(), owner="o", filename="x.pdf")
    assert refused.value.details["reason"] == "memory"
    assert children() == []


async def test_a_pdf_past_its_wall_clock_is_killed_and_a_cancelled_caller_leaves_no_child():
    start = trio.current_time()
    with pytest.raises(DocumentTooCostly) as refused:
        await Extractor(limits(wall_s=1.0)).pdf_text(pdfs.slow_pdf(), owner="o", filename="slow.pdf")
    assert refused.value.details["reason"] == "time"
    assert trio.current_time() - start < 1.0 + 10  # the kill is at once; the rest is a loaded machine
    assert children() == []

    extractor = Extractor(limits())
    with trio.move_on_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: extractor.pdf_text(pdfs.slow_pdf(), owner="o", filename="slow.pdf"))
            while extractor.running == 0 or not children():
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()  # the upload's client went away
    assert extractor.running == 0 and children() == []


async def test_unreadable_and_encrypted_files_are_refused_with_what_to_do():
    with pytest.raises(UnreadableFile) as refused:
        await Extractor(limits()).pdf_text(b"%PDF-1.4\nnot really", owner="o", filename="broken.pdf")
    assert "not a readable PDF" in refused.value.message


async def test_extractions_are_bounded_per_process_and_per_owner():
    extractor = Extractor(limits(concurrent=1, queue=1, wall_s=3.0))
    doc = pdfs.text_pdf("Leaf")
    results: dict[str, object] = {}

    async def read(owner: str, data: bytes) -> None:
        try:
            results[owner] = await extractor.pdf_text(data, owner=owner, filename=f"{owner}.pdf")
        except Exception as exc:
            results[owner] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read, "slow", pdfs.slow_pdf())  # holds the one turn until its wall clock ends
        with trio.fail_after(30):
            while extractor.running == 0:
                await trio.sleep(0.01)
        # The same owner again: refused at once (one owner cannot fill the queue) ...
        with pytest.raises(ExtractionBusy) as busy:
            await extractor.pdf_text(doc, owner="slow", filename="again.pdf")
        assert busy.value.status == 429 and busy.value.headers["Retry-After"]
        # ... another owner waits for the turn, and the queue (1) is then full for a third.
        nursery.start_soon(read, "patient", doc)
        with trio.fail_after(30):
            while extractor.statistics()["waiting"] == 0:
                await trio.sleep(0.01)
        with pytest.raises(ExtractionQueueFull) as full:
            await extractor.pdf_text(doc, owner="third", filename="third.pdf")
        assert full.value.status == 503 and full.value.headers["Retry-After"]
    assert isinstance(results["slow"], DocumentTooCostly)
    assert "Leaf" in results["patient"].text  # type: ignore[union-attr]
    assert extractor.peak == 1


async def test_pypdfs_warnings_about_every_broken_object_are_one_line(caplog):
    caplog.set_level(logging.DEBUG)
    read = await Extractor(limits()).pdf_text(pdfs.broken_xref_pdf(), owner="o", filename="broken.pdf")
    assert read.pages_read == 300 and read.warnings >= 300
    assert not [r for r in caplog.records if r.name.startswith("pypdf")]
    [line] = [r for r in caplog.records if r.name == "openmaic.extraction"]
    assert f"pypdf reported {read.warnings} problems reading 'broken.pdf'" in line.getMessage()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_hostile_upload_is_refused_and_the_servers_memory_is_unchanged(db_url, tmp_path):
    port = free_port()
    config = FAST_CONFIG + "limits: {extraction: {cpu_s: 2, wall_s: 30}}\n"
    with serve_processes(db_url, tmp_path, [(None, port)], config) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=60) as client:
            await wait_ready(client, procs, tmp_path)

            async def upload(name: str, data: bytes) -> httpx.Response:
                return await client.post("/api/materials", content=data,
                                         headers={"Content-Type": "application/pdf", "X-Material-Filename": name})

            ok = await upload("leaf.pdf", pdfs.text_pdf("Stomata open at dawn"))
            assert ok.status_code == 201, ok.text
            before = rss_kb(procs[0].pid)
            refused = await upload("bloat.pdf", pdfs.bloating_pdf())
            after = rss_kb(procs[0].pid)
            assert refused.status_code == 400, refused.text
            assert refused.json()["errorCode"] == "INVALID_REQUEST"
            assert refused.json()["details"]["reason"] in ("cpu", "memory")
            assert "upload a smaller or simpler file" in refused.json()["error"]
            assert after - before < 30_000, f"the server grew from {before} kB to {after} kB"
            again = await upload("leaf2.pdf", pdfs.text_pdf("Roots drink at night"))
            assert again.status_code == 201, again.text
