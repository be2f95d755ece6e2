"""The framework versions the adapters need, and the ImportError that names one."""

from __future__ import annotations

from importlib import metadata


def missing(requirement: str, hook: str) -> ImportError:
    """An adapter's framework lacks the hook it stands on: say which version has it."""
    distribution = requirement.split(">", 1)[0].split("=", 1)[0]
    try:
        installed = f"{distribution} {metadata.version(distribution)} is installed"
    except metadata.PackageNotFoundError:
        installed = f"{distribution} is not installed"
    return ImportError(
        f"breakerdeck.adapters needs {requirement} for {hook}; {installed} "
        f"(pip install '{requirement}')"
    )
