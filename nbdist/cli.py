"""The ``nbdist`` command (layer L3)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: nbdist <command> [options]\n\ncommands:\n"
              "  microbenchmark   measure nbdist (and, with --compare ray, Ray) side by side")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "microbenchmark":
        from . import microbenchmark

        return microbenchmark.main(rest)
    print(f"nbdist: unknown command {command!r}; see 'nbdist --help'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
