"""The relational-orientation audit (RELATE): ``rescue-train audit``. See docs/audit.md."""
