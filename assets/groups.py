"""Asset group names: one place, so jobs, selections and the UI agree."""

PROXIMITY = "proximity"
STRUCTURE = "structure"
LIBRARY = "library"
CASEWORK = "casework"
