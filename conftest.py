"""Repository-root conftest.

The suite's plugin (``fixtures/plugin.py``) is loaded through its ``pytest11`` entry
point. When plugin autoloading is switched off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``),
load it here so the options and markers still exist.
"""

import os

if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
    pytest_plugins = ["gpushare_conformance.fixtures.plugin"]
