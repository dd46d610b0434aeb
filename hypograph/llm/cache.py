"""Answers by content hash: ``<root>/<kk>/<key>.json`` holds a validated answer (as JSON) or a
remembered rejection. The key is sha256(model, messages, JSON schema): a re-run on unchanged input
finds what an earlier run, or an earlier version, was answered."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel

from hypograph.atomic import STATE_MAX, read_regular, write_json


class AnswerCache:
    """The answers of one model under ``root``."""

    def __init__(self, root: Path, model: str | None):
        self.root = root
        self.model = model

    def key(self, messages: list[dict], schema: type[BaseModel]) -> str:
        entry = {"model": self.model, "messages": messages, "schema": schema.model_json_schema()}
        blob = json.dumps(entry, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict | None:
        """``{"answer": ...}`` or ``{"rejected": reason, "attempts": n, "kind": ...}``, or None."""
        try:
            value = json.loads(read_regular(self.root / key[:2] / f"{key}.json", STATE_MAX, follow=True))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return value if isinstance(value, dict) and ("answer" in value or "rejected" in value) else None

    def put(self, key: str, value: dict) -> None:
        write_json(self.root / key[:2] / f"{key}.json", value)
