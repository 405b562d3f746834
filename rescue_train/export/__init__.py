"""Exports of the benchmark for other tools (``rescue-train export FORMAT``)."""
