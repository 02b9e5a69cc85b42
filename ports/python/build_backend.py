"""A minimal in-tree PEP 517 build backend for this port: pure-Python wheels from the standard library alone.

Why not setuptools: building a wheel with setuptools before 70.1 needs the separate ``wheel`` package, which a
fresh venv does not have, and build isolation would fetch both from an index. This backend has no requirements,
so ``pip install ./ports/python`` works offline in any Python 3.11+ with pip. It reads ``[project]`` from
pyproject.toml (name, version, description, requires-python, license, scripts) and ``[tool.nginx-hash]``
``modules``, and writes a ``py3-none-any`` wheel holding those modules, their metadata and console scripts.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _project() -> tuple[dict, list[str]]:
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        doc = tomllib.load(f)
    return doc["project"], doc["tool"]["nginx-hash"]["modules"]


def _dist_name(project: dict) -> str:
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    if "text" in project.get("license", {}):
        lines.append(f"License: {project['license']['text']}")
    return "\n".join(lines) + "\n"


def _entry_points(project: dict) -> str:
    scripts = project.get("scripts", {})
    return "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items()) if scripts else ""


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    project, modules = _project()
    dist = f"{_dist_name(project)}-{project['version']}"
    info = f"{dist}.dist-info"
    files: list[tuple[str, bytes]] = []
    for m in modules:
        with open(os.path.join(HERE, f"{m}.py"), "rb") as f:
            files.append((f"{m}.py", f.read()))
    files.append((f"{info}/METADATA", _metadata(project).encode()))
    files.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: nginx-hash build_backend\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    entry_points = _entry_points(project)
    if entry_points:
        files.append((f"{info}/entry_points.txt", entry_points.encode()))
    record = "".join(_record_line(p, d) + "\n" for p, d in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))
    name = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files:
            z.writestr(zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0)), d, zipfile.ZIP_DEFLATED)
    return name
