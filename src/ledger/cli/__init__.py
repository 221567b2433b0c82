"""The ``train-ledger`` command: the grammar (``args``, with its flag groups ``placement_flags``
and ``step_flags``; the Megatron-only ones checked by ``megatron_only``), the model flags
(``model_flags``),
the inputs assembled from flags and files (``inputs``; serve's ``serve_inputs``), the model
and placement built from them (``placement_config``) and the subcommands (``commands``).
The only printing besides the seed's ``report``.

May import: everything.
"""
from ledger.cli.args import build_parser
from ledger.cli.commands import main, run
from ledger.cli.model_flags import FLAGS, parse_layers

__all__ = ["FLAGS", "build_parser", "main", "parse_layers", "run"]
