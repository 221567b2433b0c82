#!/usr/bin/env python3
"""The two transformers tables ``ledger.io.hf`` reads, regenerated from the pinned
transformers (5.23.0; imported here, never by the ledger):

    PYTHONPATH=src python tools/hf_tables.py > src/ledger/io/data/hf_transformers.json

- ``architectures``: a causal-LM (or image-text) class name -> the model_type transformers
  maps it from (``models/auto/modeling_auto.py``: MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and
  MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES), for the model_types the ledger reads. A
  config.json whose model_type names remote code (Kimi-K2's ``kimi_k2``) is read by the
  family of its ``architectures`` (``DeepseekV3ForCausalLM``), as its auto_map builds it.
- ``defaults``: per model_type, the config class's default of every key a ledger reader
  takes without a default of its own (``Reader.required``): a config.json that omits it
  (Gemma-3-27B-it's text_config has no vocab_size) gets the class's value, as
  ``PreTrainedConfig.from_dict`` gives it. None defaults are left out (still refused).
"""
from __future__ import annotations

import json
import sys
import warnings


def main() -> None:
    import transformers as tf

    from ledger.errors import LedgerError
    from ledger.io.hf.families import COMPOSITES, FAMILIES
    from ledger.io.hf.reader import Reader

    tf.logging.set_verbosity_error()
    ma = tf.models.auto.modeling_auto
    read = set(FAMILIES) | set(COMPOSITES)
    arch: dict[str, str] = {}
    for mapping in (ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                    ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES):
        for model_type, cls in sorted(mapping.items()):
            for name in (cls,) if isinstance(cls, str) else cls:
                if model_type in read and name not in arch:
                    arch[name] = model_type
    defaults: dict[str, dict] = {}
    for model_type in sorted(FAMILIES):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfg = tf.AutoConfig.for_model(model_type).to_dict()
        except Exception:  # noqa: BLE001 - a class whose own defaults do not validate
            continue
        r = Reader(cfg, model_type)
        try:
            FAMILIES[model_type](r)
        except LedgerError:
            pass
        keys = {k: cfg[k] for k in dict.fromkeys(r.required) if cfg.get(k) is not None}
        if keys:
            defaults[model_type] = keys
    out = {"transformers": tf.__version__, "architectures": arch, "defaults": defaults}
    json.dump(out, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
