"""A Megatron-LM ``pretrain_gpt.py`` launch, read as Megatron reads it.

``reader`` turns a file (flags, or a launch script run through ``ledger.io.shell``) into a
``Launch``; ``args`` parses the flags with the table of every ``arguments.py`` flag at the
cited commit (``data/megatron_arguments.json``); ``model`` builds the ModelSpec and the
refusals Megatron itself raises; ``flags`` maps the placement and the model flags given
beside a file; ``layout`` reads Megatron's own pipeline splits (a layout string, first and
last stage layer counts) as layers per model stage.
"""
