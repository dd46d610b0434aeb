"""Structure step 4 (vault structuring): 4a merge/drop bookkeeping, 4b hypothesis clusters, the map, checks."""
