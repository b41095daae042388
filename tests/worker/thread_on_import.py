"""A module that starts a thread when imported: a preload that makes a fork unsafe
(`tests/worker/test_builds_fork_only_where_it_is_safe.py`)."""

import threading
import time

threading.Thread(target=time.sleep, args=(600,), daemon=True, name="started-on-import").start()
