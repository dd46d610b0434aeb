"""Structure step 4 (seed 000): 4a merge/drop bookkeeping, 4b hypothesis clusters, the map, checks."""
