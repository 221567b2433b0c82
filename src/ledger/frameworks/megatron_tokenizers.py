"""What Megatron-LM's tokenizer settings say about a launch's vocabulary, in one place: the
Megatron launch reader (``ledger.io.megatron``) and the functional-test goldens' rule
(``ledger.validation.megatron_goldens``) both read them here."""
from __future__ import annotations

# tokenizers that take their size from --vocab-size (Megatron-LM d98e8a64
# megatron/core/tokenizers/utils/build_tokenizer.py L58-65 TikTokenizer, L96-102
# NullTokenizer); any other reads it from its files
SIZED_TOKENIZERS = ("NullTokenizer", "TikTokenizer")
# what pretrain_gpt.py hands Megatron's parser as defaults (pretrain_gpt.py L525-528
# @d98e8a64, ``args_defaults``), set where the launch leaves the argument None
# (arguments.py L657-666): a launch without --tokenizer-type runs GPT2BPETokenizer
PRETRAIN_GPT_DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}

__all__ = ["PRETRAIN_GPT_DEFAULTS", "SIZED_TOKENIZERS"]
