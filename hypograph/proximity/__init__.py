"""Proximity (prox formats, docs/prox-formats.md): embed hypotheses, build the similarity graph, find communities, list
near-duplicate pairs. Each module computes one thing; ``store`` reads and writes prox's files."""
