"""What a client spent and what became of it (``Usage``), and the one line a command prints per
task (``usage_line``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Usage:
    """What a client spent and what became of it."""

    calls: int = 0  # requests answered with a completion (failed ones: failed_calls)
    cached: int = 0  # asks answered from the cache (rejections included)
    cached_rejected: int = 0
    rejected: int = 0  # asks rejected after their re-asks (not counting cached ones)
    invalid_answers: int = 0
    reasked: int = 0
    cut_off: int = 0  # answers ended by the token budget (finish_reason: length)
    failed_calls: int = 0  # requests that got no usable answer (each traced)
    outages: int = 0  # asks that ended as an outage
    refused: int = 0  # prompts over the endpoint's context, never sent
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fallback: int = 0  # asks decided offline instead (hypograph.llm.policy): rejected, refused or outage
    declined: int = 0  # items this model declined on an earlier run, kept offline without asking again

    def as_metadata(self) -> dict[str, int]:
        return {f"llm_{k}": v for k, v in self.__dict__.items()}


def usage_line(metadata: dict) -> str:
    """One line saying how the model did on one task, from ``LLMClient.metadata()``:
    calls, cached answers, rejections (a cached one says how to ask again), re-asks, fallbacks,
    outages and refusals, the structured-output mode, tokens."""
    m = {k: v for k, v in metadata.items()}
    task = m.get("llm_task", "llm")
    if m.get("llm") == "offline":
        return f"{task}: offline ({m.get('llm_endpoint', 'no model')}): every decision by the offline policy"
    parts = [f"{m.get('llm_calls', 0)} calls", f"{m.get('llm_cached', 0)} cached"]
    rejected = m.get("llm_rejected", 0) + m.get("llm_cached_rejected", 0)
    if rejected:
        text = f"{rejected} rejected"
        if m.get("llm_cached_rejected"):
            text += (
                f" ({m['llm_cached_rejected']} from the cache: HYPOGRAPH_LLM_RETRY_REJECTED=1, or "
                "retry_rejected in the LLM resource, asks again)"
            )
        parts.append(text)
    if m.get("llm_reasked"):
        parts.append(f"{m['llm_reasked']} re-asked")
    if m.get("llm_cut_off"):
        parts.append(f"{m['llm_cut_off']} cut off by the token budget")
    if m.get("llm_refused"):
        parts.append(f"{m['llm_refused']} over the context length")
    if m.get("llm_outages"):
        parts.append(f"{m['llm_outages']} outage" + ("s" if m["llm_outages"] > 1 else ""))
    parts.append(f"{m.get('llm_fallback', 0)} decided offline instead")
    if m.get("llm_declined"):
        parts.append(
            f"{m['llm_declined']} kept offline as this model declined them before (HYPOGRAPH_LLM_RETRY_REJECTED=1, "
            "or retry_rejected in the LLM resource, asks again)"
        )
    parts.append(f"structured output {m.get('llm_structured_output', '?')}")
    parts.append(f"{m.get('llm_prompt_tokens', 0)}+{m.get('llm_completion_tokens', 0)} tokens")
    return f"{task} ({m.get('llm_endpoint', '?')}): " + ", ".join(parts)
