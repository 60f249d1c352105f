"""The ``nbdist`` command (layer L3)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: nbdist <command> [options]\n\ncommands:\n"
              "  install-kernel   install the Jupyter kernel \"Python 3 (nbdist)\"\n"
              "  microbenchmark   measure nbdist (and, with --compare ray, Ray) side by side")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "install-kernel":
        return _install_kernel(rest)
    if command == "microbenchmark":
        from . import microbenchmark

        return microbenchmark.main(rest)
    print(f"nbdist: unknown command {command!r}; see 'nbdist --help'", file=sys.stderr)
    return 2


def _install_kernel(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="nbdist install-kernel",
        description="Install a Jupyter kernelspec that loads nbdist's extension at start.")
    parser.add_argument("--name", default="nbdist", help="kernelspec name (default: nbdist)")
    parser.add_argument("--display-name", default="Python 3 (nbdist)",
                        help='name shown in Jupyter (default: "Python 3 (nbdist)")')
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="install for the current user (the default)")
    where.add_argument("--sys-prefix", action="store_true",
                       help="install into this Python environment (sys.prefix)")
    where.add_argument("--prefix", help="install under this prefix")
    args = parser.parse_args(argv)
    from .jupyter import kernelspec

    prefix = sys.prefix if args.sys_prefix else args.prefix
    path = kernelspec.install(args.name, args.display_name, user=prefix is None, prefix=prefix)
    print(f"installed kernelspec {args.name!r} ({args.display_name}) in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
