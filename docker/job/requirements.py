"""The third-party requirements of the job image's packages (fedcore with its iceberg and serve
extras, fed-dev, fed-spark), one per line, read from their pyproject.toml files: the image
installs them before fed's own sources, so that a source change reuses that layer."""

import re
from pathlib import Path

import tomllib

PACKAGES = {"fedcore": ["iceberg", "serve"], "fed-dev": [], "fed-spark": []}

for name, extras in PACKAGES.items():
    project = tomllib.loads(Path("packages", name, "pyproject.toml").read_text())["project"]
    wanted = project.get("dependencies", [])
    for extra in extras:
        wanted += project.get("optional-dependencies", {})[extra]
    for requirement in wanted:
        named = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", named).lower() not in PACKAGES:  # (names compare normalized)
            print(requirement)
