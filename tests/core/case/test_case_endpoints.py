"""A case's ``[[endpoints]]`` carry the model settings a local server needs (its context length, an
answer budget, the structured-output mode), checked on load and handed to every dispatch."""

from __future__ import annotations

import pytest

from hypograph.case.config import HypothesisConfig
from hypograph.case.gateway import CaseGateway
from hypograph.errors import HypographError

LOCAL = """
[[endpoints]]
model = "smollm2"
base_url = "http://127.0.0.1:8765/v1"
timeout_seconds = 300
context_length = 8192
max_tokens = 900
structured_output = "json_object"

[[endpoints]]
model = "fallback"
base_url = "http://127.0.0.1:8766/v1"
"""


def test_endpoint_settings_reach_the_gateway(tmp_path):
    path = tmp_path / "analysis.local.toml"
    path.write_text(LOCAL)
    gateway = CaseGateway.from_config(HypothesisConfig.load(path))
    first, second = gateway.endpoints
    assert (first.model, first.timeout, first.context_length, first.max_tokens, first.structured_output) == (
        "smollm2",
        300.0,
        8192,
        900,
        "json_object",
    )
    # unset: the client's own defaults (budget sized from the schema, modes tried in turn)
    assert (second.context_length, second.max_tokens, second.structured_output) == (None, None, "auto")


@pytest.mark.parametrize(
    "line, message",
    [
        ("context_length = 100", "endpoints[0].context_length: must be ≥ 256 and ≤ 10000000 (got 100)"),
        ("max_tokens = 'many'", "endpoints[0].max_tokens: must be a whole number ≥ 16 and ≤ 1000000 (got 'many')"),
        ("max_tokens = true", "endpoints[0].max_tokens: must be a whole number ≥ 16 and ≤ 1000000 (got True)"),
        ("timeout_seconds = inf", "endpoints[0].timeout_seconds: must be > 0 and ≤ 3600 (got inf)"),
        ("timeout_seconds = nan", "endpoints[0].timeout_seconds: must be > 0 and ≤ 3600 (got nan)"),
        ("structured_output = 'grammar'", "endpoints[0].structured_output: input should be 'auto', 'json_schema'"),
    ],
)
def test_a_bad_endpoint_setting_is_one_line_naming_the_file_and_key(tmp_path, line, message):
    path = tmp_path / "analysis.local.toml"
    path.write_text(f'[[endpoints]]\nmodel = "m"\n{line}\n')
    with pytest.raises(HypographError) as e:
        HypothesisConfig.load(path)
    assert str(e.value).startswith(f"{path}: {message}")
