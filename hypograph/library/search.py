"""Web grounding (``NOVELTY_WEB``): literature search over arXiv and OpenAlex, each a resource with
a configurable endpoint.

* ``ArxivSearch(base_url)``: ``GET <base_url>?search_query=all:"t1" AND all:"t2"…&max_results=N``,
  arXiv's Atom API (default ``https://export.arxiv.org/api/query``; ``$HYPOGRAPH_ARXIV_URL``, or
  the older ``$HYPOGRAPH_SEARCH_URL``);
* ``OpenAlexSearch(base_url)``: ``GET <base_url>?search=t1 t2…&per-page=N``, OpenAlex's works API
  (default ``https://api.openalex.org/works``; ``$HYPOGRAPH_OPENALEX_URL``);
* ``WebSearch([...])``: asks each in turn; ``web_search(arxiv_url, openalex_url)`` builds both.

A query is a list of search terms the model wrote (``score.py`` asks for them). Each hit is a
``rounds.Paper``: source, id (``arXiv:2310.13548v1``, ``openalex:W…``), title, year, URL, summary.
A search that fails (network, HTTP status, not a feed) never fails the round: it returns
``SearchOutcome(ok=False, error=…)``; only papers that came back ground a score.

An endpoint that does not answer costs little: connecting (TCP, and a proxy tunnel or TLS) is
given ``CONNECT_TIMEOUT`` seconds, an answer ``READ_TIMEOUT`` seconds of silence; an endpoint that
timed out, refused or could not be reached is not asked again for the rest of the invocation
(``web_search(..., invocation=…)``: one memory shared by its searchers and its rounds); an HTTP
error status is a failed search, and the endpoint is asked again.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from hypograph import environment
from hypograph.library.rounds import Paper

DEFAULT_URL = "https://export.arxiv.org/api/query"
DEFAULT_OPENALEX_URL = "https://api.openalex.org/works"
ATOM = "{http://www.w3.org/2005/Atom}"
SUMMARY_CHARS = 400
MAX_BODY = 2_000_000
USER_AGENT = "hypograph-library/0.2 (+https://github.com/)"
CONNECT_TIMEOUT = 3.0
READ_TIMEOUT = 10.0
_DOWN: dict[str, dict[str, str]] = {}  # invocation -> {endpoint: why it is not asked again}
_DOWN_LOCK = threading.Lock()


@dataclass
class SearchOutcome:
    query: str
    ok: bool
    papers: list[Paper] = field(default_factory=list)
    error: str = ""
    source: str = ""


def _terms(query: str | list[str]) -> list[str]:
    """The search terms: the list given, or (a plain string) its first keywords."""
    if isinstance(query, str):
        return _keywords(query)[:4] or [query[:50]]
    return [" ".join(re.sub(r'["()]', " ", t).split()) for t in query if t and t.strip()][:6]


class _ShortConnect:
    """An ``http.client`` connection given ``CONNECT_TIMEOUT`` to connect, then its own timeout
    (the read timeout) for the answer."""

    def connect(self) -> None:
        read, self.timeout = self.timeout, min(self.timeout, CONNECT_TIMEOUT)
        try:
            super().connect()
        finally:
            self.timeout = read
        self.sock.settimeout(read)


class _HttpConnection(_ShortConnect, http.client.HTTPConnection):
    pass


class _HttpsConnection(_ShortConnect, http.client.HTTPSConnection):
    pass


class _HttpHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_HttpConnection, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_HttpsConnection, req, context=self._context)


_OPENER = urllib.request.build_opener(_HttpHandler(), _HttpsHandler())  # proxies from the environment, as urlopen


def endpoints_down(invocation: str | None) -> dict[str, str]:
    """The memory of endpoints not to ask again in ``invocation`` (a new one for None)."""
    if invocation is None:
        return {}
    with _DOWN_LOCK:
        return _DOWN.setdefault(invocation, {})


class _Http:
    name = "web"

    def __init__(self, base_url: str, timeout: float, max_results: int, down: dict[str, str] | None = None):
        self.base_url, self.timeout, self.max_results = base_url, timeout, max_results
        self.down = {} if down is None else down

    def describe(self) -> str:
        parts = urllib.parse.urlsplit(self.base_url)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))

    def endpoint(self) -> str:
        """``scheme://host:port``: what a timeout or a refusal is remembered by."""
        parts = urllib.parse.urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"

    def _get(self, params: dict, query: str) -> tuple[bytes | None, SearchOutcome | None]:
        endpoint = self.endpoint()
        gone = self.down.get(endpoint)
        if gone is not None:
            return None, self._failed(query, f"{self.describe()} not asked: {gone} earlier in this run")
        url = f"{self.base_url}?{urllib.parse.urlencode(params)}"
        try:
            request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with _OPENER.open(request, timeout=self.timeout) as response:
                return response.read(MAX_BODY), None
        except urllib.error.HTTPError as e:
            return None, self._failed(query, f"HTTP {e.code} from {self.describe()}")
        except (urllib.error.URLError, OSError) as e:  # timed out, refused, no such host: asked no more
            reason = str(getattr(e, "reason", e) or type(e).__name__)
            with _DOWN_LOCK:
                self.down.setdefault(endpoint, reason)
            return None, self._failed(query, f"{self.describe()} unreachable: {reason} (not asked again in this run)")

    def _failed(self, query: str, error: str) -> SearchOutcome:
        return SearchOutcome(query, False, error=error, source=self.name)


class ArxivSearch(_Http):
    """A search resource over arXiv's Atom API (or anything serving the same feed).

    arXiv asks API clients for one request every 3 seconds: requests to an ``arxiv.org`` host are
    spaced by ``min_interval`` (default 3 s there, none elsewhere)."""

    name = "arxiv"
    _last = 0.0
    _lock = threading.Lock()

    def __init__(
        self,
        base_url: str | None = None,
        timeout: float = READ_TIMEOUT,
        max_results: int = 5,
        min_interval: float | None = None,
        down: dict[str, str] | None = None,
    ):
        super().__init__(
            base_url or environment.current().search_endpoint or DEFAULT_URL,
            timeout,
            max_results,
            down,
        )
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        self.min_interval = (
            (3.0 if host == "arxiv.org" or host.endswith(".arxiv.org") else 0.0)
            if min_interval is None
            else min_interval
        )

    def _pace(self) -> None:
        if self.min_interval <= 0:
            return
        with ArxivSearch._lock:
            wait = ArxivSearch._last + self.min_interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            ArxivSearch._last = time.monotonic()

    def search(self, query: str | list[str]) -> SearchOutcome:
        """The feed's entries for ``query`` (terms AND-ed); any failure is an outcome, never an exception."""
        self._pace()
        terms = _terms(query)
        text = " AND ".join(f'all:"{t}"' if " " in t else f"all:{t}" for t in terms)
        body, failed = self._get({"search_query": text, "start": 0, "max_results": self.max_results}, text)
        if failed:
            return failed
        try:
            return SearchOutcome(text, True, parse_atom(body), source=self.name)
        except ET.ParseError as e:
            return SearchOutcome(
                text, False, error=f"{self.describe()} did not return an Atom feed ({e})", source=self.name
            )


class OpenAlexSearch(_Http):
    """A search resource over OpenAlex's works API (or anything serving the same JSON)."""

    name = "openalex"

    def __init__(
        self,
        base_url: str | None = None,
        timeout: float = READ_TIMEOUT,
        max_results: int = 5,
        down: dict[str, str] | None = None,
    ):
        super().__init__(
            base_url or environment.current().openalex_url or DEFAULT_OPENALEX_URL, timeout, max_results, down
        )

    def search(self, query: str | list[str]) -> SearchOutcome:
        text = " ".join(_terms(query))
        params = {"search": text, "per-page": self.max_results}
        mailto = environment.current().openalex_mailto
        if mailto:  # OpenAlex's polite pool
            params["mailto"] = mailto
        body, failed = self._get(params, text)
        if failed:
            return failed
        try:
            return SearchOutcome(text, True, parse_openalex(body), source=self.name)
        except ValueError as e:
            return SearchOutcome(
                text, False, error=f"{self.describe()} did not return OpenAlex works ({e})", source=self.name
            )


class WebSearch:
    """Several search resources asked in turn; ``search`` returns one outcome per resource."""

    def __init__(self, searchers: list):
        self.searchers = list(searchers)

    def describe(self) -> str:
        return ", ".join(f"{s.name} {s.describe()}" for s in self.searchers)

    def search(self, query: str | list[str]) -> list[SearchOutcome]:
        return [s.search(query) for s in self.searchers]


def web_search(
    arxiv_url: str | None = None,
    openalex_url: str | None = None,
    sources: tuple[str, ...] = ("arxiv", "openalex"),
    invocation: str | None = None,
) -> WebSearch:
    """arXiv and OpenAlex (each at its endpoint: argument, else environment, else the public API),
    sharing the memory of endpoints that did not answer with every search of ``invocation`` (None:
    with this one's searches only)."""
    down = endpoints_down(invocation)
    make = {
        "arxiv": lambda: ArxivSearch(arxiv_url, down=down),
        "openalex": lambda: OpenAlexSearch(openalex_url, down=down),
    }
    return WebSearch([make[s]() for s in sources])


def as_web_search(search) -> WebSearch | None:
    """``search`` as a WebSearch: None stays None, one resource is wrapped."""
    if search is None or isinstance(search, WebSearch):
        return search
    return WebSearch([search])


def parse_atom(body: bytes) -> list[Paper]:
    """Entries of an Atom feed. Raises ``ET.ParseError`` for anything that is not one."""
    if b"<!DOCTYPE" in body[:2000] or b"<!ENTITY" in body:
        raise ET.ParseError("document type declarations are not accepted")
    root = ET.fromstring(body)
    if root.tag != f"{ATOM}feed":
        raise ET.ParseError(f"root element is {root.tag!r}, not an Atom feed")
    return [p for p in (_atom_paper(entry) for entry in root.findall(f"{ATOM}entry")) if p.title]


def _atom_paper(entry: ET.Element) -> Paper:
    """One Atom entry: whitespace-collapsed fields; the alternate link, else the entry id."""
    text = lambda tag: " ".join((entry.findtext(f"{ATOM}{tag}") or "").split())  # noqa: E731
    links = entry.findall(f"{ATOM}link")
    entry_id = text("id")
    link = next((a.get("href", "") for a in links if a.get("rel", "alternate") == "alternate"), entry_id)
    m = re.search(r"arxiv\.org/abs/([^/?#\s]+)$", entry_id)
    pid = f"arXiv:{m.group(1)}" if m else (entry_id or link)
    return Paper(
        source="arxiv",
        id=pid[:200],
        title=text("title")[:400],
        year=text("published")[:4],
        url=link[:500],
        summary=text("summary")[:SUMMARY_CHARS],
    )


def parse_openalex(body: bytes) -> list[Paper]:
    """Works of an OpenAlex ``/works`` answer. Raises ValueError for anything that is not one."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"not JSON: {str(e)[:80]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError("no 'results' list")
    out = []
    for w in data["results"]:
        if not isinstance(w, dict):
            continue
        title = " ".join(str(w.get("display_name") or w.get("title") or "").split())
        wid = str(w.get("id") or "")
        if not title or not wid:
            continue
        short = wid.rsplit("/", 1)[-1]
        url = str(w.get("doi") or wid)
        year = str(w.get("publication_year") or "")[:4]
        out.append(
            Paper(
                source="openalex",
                id=f"openalex:{short}"[:200],
                title=title[:400],
                year=year,
                url=url[:500],
                summary=_abstract(w.get("abstract_inverted_index"))[:SUMMARY_CHARS],
            )
        )
    return out


def _abstract(index) -> str:
    """The abstract text of OpenAlex's inverted index ``{word: [positions]}``."""
    if not isinstance(index, dict):
        return ""
    at = {}
    for word, positions in index.items():
        for p in positions if isinstance(positions, list) else []:
            if isinstance(p, int) and 0 <= p < 5000:
                at[p] = str(word)
    return " ".join(at[p] for p in sorted(at))


STOP = set(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "in",
        "on",
        "for",
        "to",
        "with",
        "by",
        "from",
        "is",
        "are",
        "be",
        "as",
        "at",
        "that",
        "this",
        "which",
        "into",
        "its",
        "it",
        "or",
        "not",
        "their",
        "they",
        "when",
        "than",
        "then",
        "over",
        "under",
        "more",
        "less",
        "model",
        "models",
    ]
)


def _keywords(text: str) -> list[str]:
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9\-]{2,}", text.lower()) if w not in STOP]
    return list(dict.fromkeys(words))
