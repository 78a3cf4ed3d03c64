"""The chaos scenario (`make chaos`): faults injected in combination under
steady load, with a client-side ledger that accounts for every request.
`run.py` is the entry point; `fleet` starts the processes, `load` sends
and checks the requests, `events` are the faults."""
