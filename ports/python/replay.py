#!/usr/bin/env python3
"""Replay the golden vectors against the Python port: ``python3 ports/python/replay.py [DIR_OR_FILE ...]``.

The logic lives in ``nginx_hash_replay.py``, which the installed package (``pip install ./ports/python``) also
exposes as the ``replay`` command.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_hash_replay import cli  # noqa: E402

if __name__ == "__main__":
    cli()
