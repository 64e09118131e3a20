"""A hatchling build hook for the sdist: leave out ``.gitignore``.

hatchling always adds the project's ``.gitignore`` to an sdist, so that a
wheel built from it excludes the same files.  metakit's wheel names its one
package (``packages = ["metakit"]``) and its sdist lists what it holds, so
the file has no job there.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class SdistHook(BuildHookInterface):
    """Drop ``.gitignore`` from the files hatchling forces into the sdist."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        forced = build_data["force_include"]
        for source in [source for source, target in forced.items() if target == ".gitignore"]:
            del forced[source]
