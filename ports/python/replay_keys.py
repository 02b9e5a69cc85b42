#!/usr/bin/env python3
"""Replay the key vectors against the Python port: ``python3 ports/python/replay_keys.py [FILE]``.

The logic lives in ``nginx_keys_replay.py``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_keys_replay import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli())
