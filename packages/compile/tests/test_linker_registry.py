"""The linker registry finds a backend kiln knows without reading any package metadata."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from kiln_compile import _linkers as linkers


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=linkers.GROUP)}


def test_the_known_linkers_are_the_installed_entry_points():
    installed = _entry_points()
    for name, value in linkers.KNOWN_LINKERS.items():
        if name in installed:
            assert installed[name] == value, name
    assert set(linkers.KNOWN_LINKERS) == set(linkers.KNOWN_BACKENDS)


def test_a_known_backend_is_found_without_package_metadata(monkeypatch):
    registry = linkers._Registry()
    expected = _entry_points()

    def no_scan(**kwargs):
        raise AssertionError("read package metadata for a known backend")

    monkeypatch.setattr(importlib.metadata, "entry_points", no_scan)
    monkeypatch.setattr(importlib.metadata, "distribution", no_scan)
    assert registry["vm"].value == expected["vm"]
    assert "vm" in registry
    assert registry["vm"].load() is type(linkers.get_linker("vm"))


def test_a_compile_in_a_new_process_imports_no_package_metadata():
    """importlib.metadata costs tens of milliseconds of a warm compile (issue #23's 20 ms)."""
    code = (
        "import sys, kiln, kiln.tensor as kt\n"
        "x = kt.vector('x')\n"
        "kiln.function([x], kt.sum(x**2), mode=kiln.Mode(linker='vm'))([1.0])\n"
        "print('importlib.metadata' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout


def test_other_names_and_listing_scan_once(monkeypatch):
    registry = linkers._Registry()
    calls = []
    real = importlib.metadata.entry_points

    def counted(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", counted)
    assert "no-such-backend" not in registry
    with pytest.raises(KeyError):
        registry["no-such-backend"]
    assert "vm" in sorted(registry)
    assert len(registry) == len({ep.name for ep in real(group=linkers.GROUP)})
    assert calls == [{"group": linkers.GROUP}]


def test_known_backend_missing_its_module_falls_back_to_the_scan(monkeypatch):
    monkeypatch.setitem(linkers.KNOWN_LINKERS, "vm", "kiln_no_such_module:VMLinker")
    registry = linkers._Registry()
    assert registry["vm"].name == "vm"
    assert registry["vm"].value == "kiln_vm:VMLinker"  # the installed entry point
