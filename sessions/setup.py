"""ds4sessions' one compiled part: `ds4sessions.agents.pi._cprep`, `SlimReader._prepare` in C.

The extension is optional (`Extension(..., optional=True)`): where it cannot be compiled (no C
compiler, no Python headers) the build warns and goes on, and `ds4sessions.agents.pi.slim` uses
its pure-Python route (same results). Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ds4sessions.agents.pi._cprep",
            ["src/ds4sessions/agents/pi/_cprep.c"],
            optional=True,
        )
    ]
)
