"""``python -m ember ...``: the same command line as the ``ember`` console script."""

from ember.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
