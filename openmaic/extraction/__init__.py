"""Reading documents an owner uploaded, on a budget: the text of a PDF, extracted in a child process.

A PDF is a program for a parser. A few kilobytes can hold streams that decompress to hundreds of megabytes or
content that takes minutes of CPU to walk, and pypdf, run in the server, would spend that in the server (its
memory, once grown, is never returned). So a document is never parsed in a serving process:

* :mod:`openmaic.extraction.pdf` (the parent side) starts ``python -m openmaic.extraction.child`` for each
  document, gives it the bytes on stdin and reads one JSON result from stdout. It kills the child when its wall
  clock runs out and bounds how many children run at once, per process and per owner.
* :mod:`openmaic.extraction.child` limits itself before it reads a byte of the document (CPU seconds, address
  space, no files), then extracts page by page within caps on pages, decompressed bytes and characters, and
  reports pypdf's warnings as counts (one line in the server's log, not one per broken object).

Both the upload path and a run's material step call :meth:`~openmaic.extraction.pdf.Extractor.pdf_text`.
"""
