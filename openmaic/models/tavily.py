"""Tavily web search: ``POST {base}/search`` (``https://api.tavily.com``), the ``webSearch`` slot.

The request is ``{query, max_results, search_depth: "basic", include_answer: false, include_raw_content: false}``
with the key as ``Authorization: Bearer``; the answer's ``results`` are ``{title, url, content, score}``. Only
http(s) results with a title or content are kept, each field bounded, so a search result can never carry more
into a prompt or an event than a short quote. Queries are cut to Tavily's 400 characters.
"""

from __future__ import annotations

from openmaic.models.errors import ProviderError
from openmaic.models.media import HttpDriver, SearchSource, read_json

__all__ = ["TavilySearch"]

DEFAULT_BASE_URL = "https://api.tavily.com"
QUERY_CHARS = 400
TITLE_CHARS = 300
CONTENT_CHARS = 2_000
URL_CHARS = 2_000


class TavilySearch(HttpDriver):
    """A provider of protocol ``tavily`` serving ``webSearch``."""

    label = "web search provider"
    default_base_url = DEFAULT_BASE_URL

    async def search(self, query: str, *, max_results: int = 5) -> list[SearchSource]:
        headers = self._headers()
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
