"""Shared pytest setup for every package's tests."""

import kiln_compile

# Until a compiled backend is installed, "auto" falls back to the VM with a warning;
# tests that check the warning turn it back on locally.
kiln_compile.config.warn_fallback = False
