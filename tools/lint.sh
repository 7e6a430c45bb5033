#!/usr/bin/env bash
# The project's two static checks, with the configuration in pyproject.toml, from the repository root.
# Uses the tools of the virtual environment in .venv when there is one (pip install -e ".[tests]" installs both).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=""
[ -x .venv/bin/ruff ] && bin=".venv/bin/"
status=0
"${bin}ruff" check . || status=1
"${bin}mypy" || status=1
exit $status
