"""Software-defined assets and asset checks: thin wrappers over ``hypograph``."""
