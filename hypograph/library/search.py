"""Web grounding through arXiv's Atom API (``NOVELTY_WEB``): one quick search per surviving behavior.

``ArxivSearch(base_url).search(query)`` sends ``GET <base_url>?search_query=all:…&max_results=N``
and parses the Atom feed's entries (title, link, published date, summary). The base URL is
configurable (``HYPOGRAPH_SEARCH_URL``; default ``https://export.arxiv.org/api/query``) so tests and
mirrors can serve it. A search that fails (network, HTTP status, not an Atom feed) never fails
the round: it returns ``SearchOutcome(ok=False, error=…)`` and the caller scores with
``method: llm-chat``.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

DEFAULT_URL = "https://export.arxiv.org/api/query"
ATOM = "{http://www.w3.org/2005/Atom}"
SUMMARY_CHARS = 400
USER_AGENT = "hypograph-library/0.1 (+https://github.com/)"


@dataclass
class Paper:
    title: str
    url: str
    published: str
    summary: str


@dataclass
class SearchOutcome:
    query: str
    ok: bool
    papers: list[Paper] = field(default_factory=list)
    error: str = ""


class ArxivSearch:
    """A search resource over arXiv's Atom API (or anything serving the same feed)."""

    def __init__(self, base_url: str | None = None, timeout: float = 10.0, max_results: int = 5):
        self.base_url = base_url or os.environ.get("HYPOGRAPH_SEARCH_URL") or DEFAULT_URL
        self.timeout = timeout
        self.max_results = max_results

    def describe(self) -> str:
        parts = urllib.parse.urlsplit(self.base_url)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))

    def search(self, query: str) -> SearchOutcome:
        """The feed's entries for ``query``; any failure is an outcome, never an exception."""
        terms = " AND ".join(f"all:{w}" for w in _keywords(query)[:4]) or "all:" + urllib.parse.quote(query[:50])
        params = {"search_query": terms, "start": 0, "max_results": self.max_results}
        url = f"{self.base_url}?{urllib.parse.urlencode(params)}"
        try:
            request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read(2_000_000)
            return SearchOutcome(query, True, parse_atom(body))
        except urllib.error.HTTPError as e:
            return SearchOutcome(query, False, error=f"HTTP {e.code} from {self.describe()}")
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            return SearchOutcome(query, False, error=f"{self.describe()} unreachable: {reason}")
        except ET.ParseError as e:
            return SearchOutcome(query, False, error=f"{self.describe()} did not return an Atom feed ({e})")


def parse_atom(body: bytes) -> list[Paper]:
    """Entries of an Atom feed. Raises ``ET.ParseError`` for anything that is not one."""
    if b"<!DOCTYPE" in body[:2000] or b"<!ENTITY" in body:
        raise ET.ParseError("document type declarations are not accepted")
    root = ET.fromstring(body)
    if root.tag != f"{ATOM}feed":
        raise ET.ParseError(f"root element is {root.tag!r}, not an Atom feed")
    return [_paper(entry) for entry in root.findall(f"{ATOM}entry")]


def _paper(entry: ET.Element) -> Paper:
    """One Atom entry: whitespace-collapsed fields; the alternate link, else the entry id."""
    text = lambda tag: " ".join((entry.findtext(f"{ATOM}{tag}") or "").split())
    links = entry.findall(f"{ATOM}link")
    link = next((a.get("href", "") for a in links if a.get("rel", "alternate") == "alternate"), text("id"))
    return Paper(text("title"), link, text("published")[:10], text("summary")[:SUMMARY_CHARS])


STOP = set("a an and the of in on for to with by from is are be as at that this which into its it or not "
           "their they when than then over under more less model models".split())


def _keywords(text: str) -> list[str]:
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9\-]{2,}", text.lower()) if w not in STOP]
    return list(dict.fromkeys(words))
