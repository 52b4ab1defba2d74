"""The linker registry finds a backend kiln knows without scanning every distribution."""

from __future__ import annotations

import pytest

from kiln_compile import _linkers as linkers


def test_known_backend_reads_only_its_package(monkeypatch):
    registry = linkers._Registry()
    expected = {ep.name: ep.value for ep in linkers.entry_points(group=linkers.GROUP)}

    def no_scan(**kwargs):
        raise AssertionError("scanned every distribution for a known backend")

    monkeypatch.setattr(linkers, "entry_points", no_scan)
    assert registry["vm"].value == expected["vm"]
    assert "vm" in registry


def test_other_names_and_listing_scan_once(monkeypatch):
    registry = linkers._Registry()
    calls = []
    real = linkers.entry_points

    def counted(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(linkers, "entry_points", counted)
    assert "no-such-backend" not in registry
    with pytest.raises(KeyError):
        registry["no-such-backend"]
    assert "vm" in sorted(registry)
    assert len(registry) == len({ep.name for ep in real(group=linkers.GROUP)})
    assert calls == [{"group": linkers.GROUP}]


def test_known_backend_missing_its_package_falls_back_to_the_scan(monkeypatch):
    monkeypatch.setitem(linkers.KNOWN_BACKENDS, "vm", "kiln-no-such-distribution")
    registry = linkers._Registry()
    assert registry["vm"].name == "vm"
