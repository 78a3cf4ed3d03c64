"""The soak suite (`make soak`): a long run of mixed traffic against the
release gateway with its real neighbours (Redis, an upstream app), sampled
every few seconds and judged at the end. `run.py` is the entry point; the
other modules are its parts: `services` (the processes), `traffic` (the
request mix and the client ledger), `probe` (what is sampled), `verdict`
(the pass rules, unit-tested) and `plot`."""
