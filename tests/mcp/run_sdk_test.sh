#!/usr/bin/env bash
# CTest entry for the MCP client test: creates a virtual environment under the build
# folder (once), installs the official MCP Python SDK from PyPI into it, then drives
# the real `thrive mcp` binary with it. Usage: run_sdk_test.sh THRIVE_BINARY VENV_DIR
set -euo pipefail
thrive=$1
venv=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import mcp" 2> /dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
exec "$venv/bin/python" "$here/test_mcp_sdk.py" "$thrive"
