"""Tavily web search: ``POST {base}/search`` (``https://api.tavily.com``), the ``webSearch`` slot.

The request is ``{query, max_results, search_depth: "basic", include_answer: false, include_raw_content: false}``
with the key as ``Authorization: Bearer``; the answer's ``results`` are ``{title, url, content, score}``. Only
http(s) results with a title or content are kept, each field bounded, so a search result can never carry more
into a prompt or an event than a short quote. Queries are cut to Tavily's 400 characters.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from openmaic.models.errors import ProviderError
from openmaic.models.media import SearchSource, read_json
from openmaic.models.retry import Sleep, Transport

__all__ = ["TavilySearch"]

DEFAULT_BASE_URL = "https://api.tavily.com"
QUERY_CHARS = 400
TITLE_CHARS = 300
CONTENT_CHARS = 2_000
URL_CHARS = 2_000


class TavilySearch:
    """A provider of kind ``tavily`` serving ``webSearch``."""

    label = "web search provider"

    def __init__(
        self,
        name: str,
        cfg: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.base_url = (getattr(cfg, "base_url", None) or DEFAULT_BASE_URL).rstrip("/")
        self._transport = Transport(name, cfg, http=http, sleep=sleep, rng=rng, label=self.label)

    def __repr__(self) -> str:
        return f"<TavilySearch {self.name!r} {self.base_url}>"

    async def search(self, query: str, *, max_results: int = 5) -> list[SearchSource]:
        headers = {"content-type": "application/json"}
        key = self._transport.key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        headers.update(self._transport.extra_headers())
        body = {"query": " ".join(query.split())[:QUERY_CHARS], "max_results": max(1, min(20, max_results)),
                "search_depth": "basic", "include_answer": False, "include_raw_content": False}  # fmt: skip
        doc = await self._transport.send("POST", f"{self.base_url}/search", headers, read_json, json_body=body)
        results = doc.get("results")
        if not isinstance(results, list):
            raise ProviderError(f"the {self.label} {self.name!r} sent a malformed response (no results)",
                                provider=self.name)
        out: list[SearchSource] = []
        for r in results:
            if not isinstance(r, dict):
                continue
            url, title, content = r.get("url"), r.get("title"), r.get("content")
            if not isinstance(url, str) or not url.startswith(("https://", "http://")) or len(url) > URL_CHARS:
                continue
            title = " ".join(title.split())[:TITLE_CHARS] if isinstance(title, str) else ""
            content = " ".join(content.split())[:CONTENT_CHARS] if isinstance(content, str) else ""
            if not (title or content):
                continue
            score = r.get("score")
            out.append(SearchSource(title=title or url, url=url, content=content,
                                    score=float(score) if isinstance(score, (int, float)) else None))
        return out[:max_results]
