"""The toys: each parallelism mechanism run for real on torch.distributed.

One module per mechanism (zero, tp, cp, pp, ep). Each builds the seed's tiny setup,
runs it between processes, compares the result cell by cell with one process doing
the whole computation, and compares the bytes it handed to collectives, and the bytes
its sockets put on the wire as the kernel counts them (``wire``), with the ledger's
placement formulas for the same shapes. ``python -m ledger.toys all``.
"""
