"""Measuring engines: timing one engine (`timing`: warm-up, calls a round, a round, the three
measurements, statistics of rounds), rounds of several in one process (`rounds`: interleaved block by
block, after the process's other threads go quiet: `quiet`), paired comparison with the load as the
unit, when to stop, round orders (`paired`), and the t quantiles behind the intervals (`stats`). The
winner rule that decides on these figures is `search.winner`."""
