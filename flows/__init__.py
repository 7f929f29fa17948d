"""Prefect flows: thin wiring of the library's stages (see ragbench.sweep.orchestrator)."""
