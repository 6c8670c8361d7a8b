"""Imported first in every worker process of the embedded Dask cluster, and nowhere
else: by its fork server (which passes the handlers on to each worker it forks), and by
each worker as its `preload` (for one started later, the slow way). Importing it makes
the process leave the stop signals to the main process.

Ctrl-C, a closed terminal or `kill -- -PGID` reach the whole process group, the
cluster's workers included. The main process handles them: it releases the running
checks (each kills its process group), removes the check script it installed on the
workers, and closes the cluster. A worker that died of the signal first printed a
traceback (KeyboardInterrupt in its event loop) and was gone before the script's
removal reached it.
"""

from __future__ import annotations

import threading
from typing import Any

from reducer.core.processes import leave_stops_to_parent


def _leave_stops() -> None:
    if threading.current_thread() is threading.main_thread():  # where handlers may be set
        leave_stops_to_parent()


def dask_setup(_worker: Any) -> None:
    """Dask's hook for a worker's preload module."""
    _leave_stops()


_leave_stops()
