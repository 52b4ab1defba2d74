"""kiln's one progress helper (tqdm): a bar per chain, or one bar; off on request.

:func:`progress_bar` makes every bar kiln shows (the chains' bars of :class:`Progress`,
posterior predictive draws in the umbrella); a disabled one shows nothing and does not
import tqdm (whose import, with ``importlib.metadata`` and asyncio, costs tens of
milliseconds of a short process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_samplers import _nuts_core as core


def progress_bar(total: int, desc: str, enabled: bool = True, position: int | None = None) -> Any:
    """Return a tqdm bar of ``total`` draws labelled ``desc`` (shows nothing when not enabled).

    Use it as a context manager (``with progress_bar(...) as bar: bar.update()``) or
    close it.
    """
    if not enabled:
        return _HiddenBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, position=position, leave=True, unit="draws")


class _HiddenBar:
    """What a disabled bar does: nothing (tqdm's methods that kiln calls)."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _HiddenBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class Progress:
    """One bar per chain, updated from the chains' threads after each chunk."""

    def __init__(self, chains: int, total: int, enabled: bool = True) -> None:
        self._bars: list[Any] = []
        self._divergences = [0] * chains
        self._lock = threading.Lock()
        if enabled:
            self._bars = [progress_bar(total, f"chain {c}", position=c) for c in range(chains)]

    def updater(self, chain: int) -> Callable[[int, np.ndarray, bool], None]:
        """Return the callback of ``chain``: ``update(n_new, stats_of_the_new, tuning)``.

        The bar counts the divergences after tuning (those the final warning reports).
        """

        def update(n: int, stats: np.ndarray, tuning: bool) -> None:
            if self._bars:
                diverging = 0 if tuning else int(np.sum(stats[:, core.DIVERGING]))
                self.advance(chain, n, diverging)

        return update

    def advance(self, chain: int, n: int, divergences: int = 0) -> None:
        """Move ``chain``'s bar ``n`` draws on, ``divergences`` of them after tuning.

        For chains that run elsewhere and report counts (``kl.sample(executor=...)``).
        """
        if not self._bars:
            return
        with self._lock:
            self._divergences[chain] += divergences
            bar = self._bars[chain]
            bar.update(n)
            bar.set_postfix(divergences=self._divergences[chain], refresh=False)

    def close(self) -> None:
        """Close the bars."""
        for bar in self._bars:
            bar.close()
