"""What to tell a user whose graph came out empty or nearly so."""

from __future__ import annotations

import numpy as np

# Above this many rows the exact maximum is not worth an all-pairs product just for a hint.
HINT_MAX_ROWS = 20_000


def highest_similarity(matrix, block: int = 2048) -> float | None:
    """The largest cosine similarity between two different rows of an L2-normalised matrix
    (sparse or dense), by row blocks; None for fewer than 2 rows or more than HINT_MAX_ROWS."""
    n = matrix.shape[0]
    if n < 2 or n > HINT_MAX_ROWS:
        return None
    best = -1.0
    for start in range(0, n, block):
        sims = matrix[start : start + block] @ matrix.T
        sims = sims.toarray() if hasattr(sims, "toarray") else np.asarray(sims)
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -1.0  # not a row with itself
        best = max(best, float(sims.max()))
    return best


def sparse_graph_hint(nodes: int, edges: int, threshold: float, matrix, backend: str) -> str | None:
    """A one-line hint when fewer than one edge per ten hypotheses came out (with the highest
    similarity of ``matrix``'s rows, computed only then: it is an all-pairs product); else None."""
    if nodes < 2 or edges * 10 >= nodes:
        return None
    highest = highest_similarity(matrix)
    seen = f"the highest similarity between two hypotheses is {highest:.3f}; " if highest is not None else ""
    other = " or --backend sbert (meaning rather than shared words)" if backend == "tfidf" else ""
    return f"only {edges} edge(s) for {nodes} hypotheses at threshold {threshold}: {seen}try a lower --threshold{other}"
