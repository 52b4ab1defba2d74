"""The ``kiln`` command line: ``kiln cache info`` and ``kiln cache clear``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from kiln import cache


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kiln", description="kiln command line tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cache_cmd = commands.add_parser("cache", help="inspect or empty the on-disk caches")
    actions = cache_cmd.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("info", "show the cache folder and its entries and size per cache"),
        ("clear", "delete every cached entry (all caches)"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument(
            "--cache-dir",
            default=None,
            help="the cache root (default: KILN_CACHE_DIR or ~/.cache/kiln)",
        )
        if name == "info":
            action.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kiln`` command with ``argv`` (default: the process arguments).

    Returns the exit status (0 on success).

    Examples
    --------
    >>> main(["cache", "info"])  # doctest: +SKIP
    kiln cache: /home/me/.cache/kiln
      stage1             3 entries     5.0 KiB
      total              3 entries     5.0 KiB
    0
    """
    args = _parser().parse_args(argv)
    if args.command == "cache" and args.action == "info":
        report = cache.info(args.cache_dir)
        print(json.dumps(report, indent=2) if args.json else cache.format_info(report))
    elif args.command == "cache" and args.action == "clear":
        root = args.cache_dir or cache.info()["root"]
        removed = cache.clear(root)
        print(f"kiln cache: removed {removed} file(s) from {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
