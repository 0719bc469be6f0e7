"""Keeps hydra/launcher=submitit_local grpo-sweep's after Hydra re-scans its plugins.

Hydra's plugin scan re-executes every plugin module, the stock submitit launcher's too, which stores its
``submitit_local`` entry again over grpo-sweep's; it re-scans whenever its global state is restored
(``Singleton.set_state``: its test fixtures, a job process). A search-path plugin is asked for its paths after every
scan, each time a config is composed: the one moment that follows the scan. It adds no path.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class GrpoSweepLaunchers(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from grpo_sweep.configstore import restore_launchers

        restore_launchers()
