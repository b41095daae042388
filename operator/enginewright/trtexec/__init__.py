"""trtexec interop: its JSON Lines tuning cache read and written (`format`), and the files imported
into a cache directory (`imports`, `enginewright cache import`)."""
