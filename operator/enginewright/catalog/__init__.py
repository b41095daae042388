"""Engine consumers: reading the catalog the operator publishes, choosing the engine a machine may
run (`compatibility`: pure rules), fetching it byte-verified (`fetch`), and coverage (`listing`)."""
