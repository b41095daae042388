"""The Kubernetes executor of the tuning flow: kopf handlers (`handlers`), one reconcile pass per
TuningRun (`reconcile`), and the pure parts it is made of: Job manifests (`jobs`), cache shards
(`shards`), status and conditions (`status`), catalog publishing (`publish`), settings.

It never imports a compiler: what it knows of one comes from the probe Job's `probe.json`.
"""
