"""How a checkpoint stores its weights: a config.json's ``quantization_config`` (or
``compression_config``) read as vLLM reads it, into one ``Quant``.

vLLM picks the method from ``quant_method`` (``ModelConfig._parse_quant_hf_config`` and
``_verify_quantization``, vllm/config/model.py) and each method's ``QuantizationConfig.
from_config`` reads its own keys (vllm/model_executor/layers/quantization/<method>.py). The
methods read here, with the keys each one reads:

  fp8                 ``weight_block_size`` ([128, 128]: DeepSeek-V3's block scales, fp32
                      ``weight_scale_inv`` per block) or none (one fp32 scale per tensor,
                      ``activation_scheme`` static adds one input scale); ``ignored_layers``
                      / ``modules_to_not_convert`` (fp8.py Fp8Config.from_config)
  mxfp4               gpt-oss: the MoE experts only (Mxfp4Config.get_quant_method: a
                      LinearBase falls back to UnquantizedLinearMethod), e2m1 codes two a
                      byte and one e8m0 scale per 32 (mxfp4.py Mxfp4MoEMethod.create_weights)
  modelopt            ``quant_algo`` FP8 (fp8 weight, fp32 weight and input scales) or NVFP4
                      (e2m1 two a byte, an fp8 scale per ``group_size`` 16, an fp32
                      weight_scale_2 and input_scale per tensor); ``exclude_modules`` under
                      ``quantization`` (hf_quant_config.json's form), else ``ignore``
                      (modelopt.py ModelOptQuantConfigBase.from_config, v0.22.0 :276-311);
                      MIXED_PRECISION: FP8 / NVFP4 / W4A16 per module (``ledger.serve.mixed``);
                      ``kv_cache_quant_algo`` / ``kv_cache_scheme``: the KV cache vLLM's
                      --kv-cache-dtype auto takes (``Quant.kv_cache``)
  compressed-tensors  ``config_groups``: weights' ``num_bits``, ``type`` (int / float),
                      ``strategy`` (tensor / channel / group / block), ``group_size``,
                      ``symmetric``, ``scale_dtype``; input activations (W8A8) or none
                      (W4A16); ``ignore`` (compressed_tensors.py CompressedTensorsConfig.
                      from_config); scales in the model's dtype on disk, fp32 resident for
                      FP8 / INT8 W8A8 (``ledger.serve.scales``)
  awq                 ``bits``, ``group_size``, ``zero_point``; ``modules_to_not_convert``
                      (awq.py AWQConfig.from_config): int4 packed in int32, fp16 scales and
                      packed zeros per group
  gptq                ``bits``, ``group_size``, ``desc_act`` (an int32 g_idx per input row),
                      ``sym`` (gptq.py GPTQConfig.from_config; the zeros are stored packed
                      either way), ``lm_head``; ``dynamic``'s patterns and
                      ``modules_in_block_to_quantize`` (which modules stay unquantized: v0.22.0
                      auto_gptq.py:193-215; it reads no ``modules_to_not_convert``)
  bitsandbytes        ``load_in_4bit`` / ``load_in_8bit``, ``bnb_4bit_quant_type``,
                      ``bnb_4bit_use_double_quant``, ``llm_int8_skip_modules``
                      (bitsandbytes.py BitsAndBytesConfig.from_config)

Every method leaves the embedding, the output head (unless GPTQ's ``lm_head``), the norms,
the biases and the routers in the model's bf16 (the MoE gate is built with
``quant_config=None``: ReplicatedLinear in vllm/model_executor/models/deepseek_v2.py
DeepseekV2MoE.__init__), and what the checkpoint's list names, each method matching it
by its own rule (``ledger.serve.skips``: exact names for fp8, regexes for
compressed-tensors, wildcards for ModelOpt, substrings for AWQ). An unknown
``quant_method`` is refused in one line naming it.

>>> q = read_quant({"quant_method": "fp8", "weight_block_size": [128, 128]})
>>> q.method, q.weight, q.block, q.activations
('fp8', 'fp8', (128, 128), 'fp8')
>>> q.label
'fp8 W8A8: FP8, 128x128 blocks'

"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.errors import LedgerError
from ledger.serve.mixed import mixed_label, module_algo, read_layers
from ledger.serve.scales import SCALE_DTYPES, ct_scale_bytes

# weights' element formats: bits a value, what the GEMM runs in when activations are not
# quantized (the kernels dequantize to the activations' bf16: Marlin, AWQ/GPTQ GEMMs)
BITS = {"bf16": 16, "fp8": 8, "int8": 8, "int4": 4, "int3": 3, "int2": 2, "fp4": 4, "nf4": 4}


@dataclass(frozen=True)
class Quant:
    """One checkpoint's weight format as vLLM loads it."""

    method: str  # vLLM's quant_method
    weight: str  # a key of BITS
    scale: str  # "tensor" | "channel" | "group" | "block" | "nf4"
    scale_bytes: int = 4  # bytes of one scale as vLLM holds it (resident)
    group: int | None = None  # elements along the input sharing a scale ("group")
    block: tuple[int, int] | None = None  # (out, in) elements sharing a scale ("block")
    zero_points: bool = False  # one zero point a scale, packed at the weight's bits
    g_idx: bool = False  # GPTQ's desc_act: an int32 group index per input row
    tensor_scales: int = 0  # fp32 scalars a matrix beyond its format's own (``ledger.
    #                         formats``): a static input scale, NVFP4's input_scale
    activations: str = "bf16"  # what the GEMM's other operand is: bf16 (weight-only) or
    #                            the quantized activations (fp8, int8, fp4)
    experts_only: bool = False  # mxfp4: only the FusedMoE layers are quantized
    ignore: tuple[str, ...] = ()  # the checkpoint's list of modules left in bf16, each
    #                               method matching it by its own rule (ledger.serve.skips);
    #                               GPTQ: its ``dynamic`` patterns
    only: tuple[str, ...] = ()  # GPTQ's modules_in_block_to_quantize: only these quantized
    lm_head: bool = False  # GPTQ's lm_head flag: the output head quantized too
    double_quant: bool = True  # bitsandbytes' nested absmax
    source: str = ""  # where the settings came from (the file's key, or the flag)
    stored_scale_bytes: int | None = None  # bytes of one scale in the files, where the
    #                                        writer's dtype differs (``SCALE_DTYPES``)
    kv_cache: str | None = None  # the KV cache a ModelOpt checkpoint declares ("fp8",
    #                              "nvfp4"): vLLM's --kv-cache-dtype auto takes it
    layers: tuple[tuple[str, str], ...] = ()  # MIXED_PRECISION: (module, algo); the
    #                                           fields above are its NVFP4 modules'

    def module(self, prefix: str) -> Quant | None:
        """Module ``prefix``'s format (MIXED_PRECISION: its own, None for bf16)."""
        if not self.layers:
            return self
        algo = module_algo(dict(self.layers), prefix)
        return None if algo is None else replace(
            _modelopt_algo(algo, self.group, self.kv_cache), source=self.source)

    @property
    def stored(self) -> Quant:
        """The same format with its scales as the checkpoint's files keep them."""
        if self.stored_scale_bytes is None or self.stored_scale_bytes == self.scale_bytes:
            return self
        return replace(self, scale_bytes=self.stored_scale_bytes)

    @property
    def label(self) -> str:
        """One phrase for the report: the method, its weight and activation bits, the
        format and its scales, e.g. "fp8 W8A8: FP8, 128x128 blocks", "gptq W4A16: INT4,
        group 128"."""
        w = {"fp8": "FP8", "fp4": "FP4", "nf4": "NF4", "bf16": "BF16"}.get(
            self.weight, self.weight.upper())
        if self.layers:
            return mixed_label(self.layers, self.group)
        if self.method == "mxfp4":
            w, how = "MXFP4", "e8m0 scale per 32"
        elif self.method == "modelopt" and self.weight == "fp4":
            w, how = "NVFP4", f"fp8 scale per {self.group}"
        else:
            how = {"tensor": "per-tensor", "channel": "per-channel", "nf4": "blocks of 64",
                   "group": f"group {self.group}",
                   "block": "x".join(map(str, self.block or ())) + " blocks"}[self.scale]
        return f"{self.method} W{BITS[self.weight]}A{BITS[self.activations]}: {w}, {how}"


METHODS = ("fp8", "mxfp4", "modelopt", "compressed-tensors", "awq", "gptq", "bitsandbytes")
# vLLM's names for the same checkpoints' kernels: --quantization may name them
# (awq_marlin / gptq_marlin override_quantization_method, awq_marlin.py, gptq_marlin.py;
# modelopt_fp4 is ModelOptNvFp4Config's name)
ALIASES = {"awq_marlin": "awq", "gptq_marlin": "gptq", "modelopt_fp4": "modelopt",
           "compressed_tensors": "compressed-tensors"}


def _str_list(qc: dict, *keys: str) -> tuple[str, ...]:
    for k in keys:
        v = qc.get(k)
        if v is not None:
            if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
                raise LedgerError("quantization_config", f"{k!r} must be a list of strings, "
                                                         f"got {v!r}")
            return tuple(v)
    return ()


def _int(qc: dict, key: str, default: int | None, low: int = 1) -> int | None:
    """An integer key at least ``low`` (GPTQ's group_size -1 is its own case)."""
    v = qc.get(key, default)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
        raise LedgerError("quantization_config", f"{key!r} must be an integer >= {low}, "
                                                 f"got {v!r}")
    return v


def _dict(qc: dict, key: str) -> dict:
    """A nested object (absent or null: empty)."""
    v = qc.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise LedgerError("quantization_config", f"{key!r} must be an object, got {v!r}")
    return v


def _fp8(qc: dict) -> Quant:
    block = qc.get("weight_block_size")
    ignore = _str_list(qc, "ignored_layers", "modules_to_not_convert")
    if block is not None:
        if (not isinstance(block, list) or len(block) != 2
                or not all(isinstance(b, int) and b > 0 for b in block)):
            raise LedgerError("quantization_config", f"'weight_block_size' must be two "
                                                     f"positive integers, got {block!r}")
        return Quant("fp8", "fp8", "block", 4, block=tuple(block), activations="fp8",
                     ignore=ignore)
    static = qc.get("activation_scheme", "dynamic") == "static"
    return Quant("fp8", "fp8", "tensor", 4, tensor_scales=int(static), activations="fp8",
                 ignore=ignore)


def _mxfp4(qc: dict) -> Quant:
    # the file's modules_to_not_convert, kept for the report: vLLM reads no list for
    # mxfp4 (ledger.serve.skips: linear layers unquantized, every MoE layer in MXFP4)
    return Quant("mxfp4", "fp4", "group", 1, group=32, experts_only=True,
                 ignore=_str_list(qc, "modules_to_not_convert"))


def _kv_cache(qc: dict, inner: dict) -> str | None:
    """The KV cache a ModelOpt config declares, as vLLM resolves --kv-cache-dtype auto from
    it (v0.22.0 vllm/utils/torch_utils.py:311-394, called at vllm/engine/arg_utils.py:1746):
    only for a ModelOpt ``quant_method`` (which vLLM sets from hf_quant_config.json's
    ``producer`` name, transformers_utils/model_arch_config_convertor.py:174-196); its
    ``kv_cache_scheme`` (static 8-bit float: fp8; 4-bit float: nvfp4) or
    ``kv_cache_quant_algo`` (fp8, nvfp4); anything else vLLM leaves to auto (the model's
    dtype)."""
    method = str(qc.get("quant_method") or "").lower()
    producer = qc.get("producer")
    if not (method.startswith("modelopt")
            or isinstance(producer, dict) and producer.get("name") == "modelopt"):
        return None
    algo = (inner.get("kv_cache_scheme") or qc.get("kv_cache_scheme")
            or inner.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo"))
    if isinstance(algo, dict):
        if algo.get("num_bits") == 8 and algo.get("type") == "float" \
                and algo.get("dynamic") is False:
            return "fp8"
        return "nvfp4" if algo.get("num_bits") == 4 and algo.get("type") == "float" else None
    return {"fp8": "fp8", "nvfp4": "nvfp4"}.get(str(algo).lower()) if algo else None


def _modelopt_algo(algo: str, group: int | None, kv: str | None = None) -> Quant:
    """A ModelOpt algorithm's format (W4A16_NVFP4: NVFP4's files, bf16 activations)."""
    if algo == "FP8":
        return Quant("modelopt", "fp8", "tensor", 4, tensor_scales=1, activations="fp8",
                     kv_cache=kv)
    return Quant("modelopt", "fp4", "group", 1, group=group, tensor_scales=1,
                 activations="fp4" if algo == "NVFP4" else "bf16", kv_cache=kv)


def _modelopt(qc: dict) -> Quant:
    inner = _dict(qc, "quantization") or qc  # hf_quant_config.json nests it
    algo = str(inner.get("quant_algo", "")).upper()
    # nested: exclude_modules; config.json's flat form: ignore (modelopt.py:276-311)
    ignore = _str_list(inner, "exclude_modules" if inner is not qc else "ignore")
    kv = _kv_cache(qc, inner)
    if algo in ("FP8", "NVFP4"):
        group = _int(inner, "group_size", 16) if algo == "NVFP4" else None
        return replace(_modelopt_algo(algo, group, kv), ignore=ignore)
    if algo == "MIXED_PRECISION":
        layers, group = read_layers(inner)
        head = "W4A16_NVFP4" if "W4A16_NVFP4" in dict(layers).values() else "NVFP4"
        return replace(_modelopt_algo(head, group, kv), ignore=ignore, layers=layers)
    raise LedgerError("quantization_config", f"modelopt quant_algo {algo or None!r} is not "
                                             f"modelled (FP8, NVFP4, MIXED_PRECISION are)")


def _ct(qc: dict, model_bytes: int = 2) -> Quant:
    groups = _dict(qc, "config_groups")
    if not groups or not all(isinstance(g, dict) for g in groups.values()):
        raise LedgerError("quantization_config", "compressed-tensors needs 'config_groups' "
                                                 "of objects")
    weights = [_dict(g, "weights") for g in groups.values()]
    schemes = {(w.get("num_bits"), w.get("type", "int"), w.get("strategy")) for w in weights}
    if len(schemes) != 1:
        raise LedgerError("quantization_config", f"compressed-tensors with {len(schemes)} "
                                                 f"weight schemes is not modelled (one is)")
    g = next(iter(groups.values()))
    w, a = weights[0], g.get("input_activations")
    bits, kind, strategy = next(iter(schemes))
    weight = {(8, "float"): "fp8", (8, "int"): "int8", (4, "int"): "int4",
              (4, "float"): "fp4"}.get((bits, kind))
    if weight is None or strategy not in ("tensor", "channel", "group", "block"):
        raise LedgerError("quantization_config", f"compressed-tensors weights of {bits!r} bits "
                                                 f"{kind!r} by {strategy!r} are not modelled")
    acts = "bf16"
    if isinstance(a, dict):
        acts = {(8, "float"): "fp8", (8, "int"): "int8", (4, "float"): "fp4"}.get(
            (a.get("num_bits"), a.get("type", "int")), "bf16")
    block = w.get("block_structure")
    if strategy == "block" and not (isinstance(block, list) and len(block) == 2 and all(
            isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise LedgerError("quantization_config", f"'block_structure' must be two positive "
                                                 f"integers, got {block!r}")
    group = _int(w, "group_size", None) if strategy == "group" else None
    if strategy == "group" and group is None:
        raise LedgerError("quantization_config", "a group strategy needs 'group_size'")
    resident, stored = ct_scale_bytes(weight, acts, w, model_bytes)  # ledger.serve.scales
    # actorder "group" saves an int32 weight_g_idx per input column (compressed-tensors
    # ac8e2ba82f, compressors/pack_quantized/base.py:45-56 and naive_quantized/base.py)
    return Quant("compressed-tensors", weight, strategy, resident, group=group,
                 block=tuple(block) if strategy == "block" else None,
                 zero_points=w.get("symmetric") is False,
                 g_idx=w.get("actorder") == "group",
                 tensor_scales=int(isinstance(a, dict) and not a.get("dynamic", True)),
                 activations=acts, ignore=_str_list(qc, "ignore"), stored_scale_bytes=stored)


def _awq(qc: dict) -> Quant:
    bits = _int(qc, "bits", None) or _int(qc, "w_bit", 4)
    group = _int(qc, "group_size", None) or _int(qc, "q_group_size", 128)
    if bits != 4:
        raise LedgerError("quantization_config", f"awq bits {bits} is not modelled (4 is)")
    return Quant("awq", "int4", "group", 2, group=group,
                 zero_points=bool(qc.get("zero_point", True)),
                 ignore=_str_list(qc, "modules_to_not_convert"))


def _gptq(qc: dict) -> Quant:
    bits, group = _int(qc, "bits", 4), _int(qc, "group_size", 128, low=-1)
    if group == 0:
        raise LedgerError("quantization_config", "'group_size' must be -1 or >= 1, got 0")
    if bits not in (2, 3, 4, 8):  # GPTQConfig's supported bits (gptq.py)
        raise LedgerError("quantization_config", f"gptq bits {bits} is not one of 2, 3, 4, 8")
    dynamic = _dict(qc, "dynamic")  # pattern -> overrides; "-:" leaves a module unquantized
    only = qc.get("modules_in_block_to_quantize") or []
    if only and all(isinstance(b, list) for b in only):  # list[list[str]]: flattened
        only = [m for block in only for m in block]  # (auto_gptq.py:280-289)
    only = _str_list({"modules_in_block_to_quantize": only}, "modules_in_block_to_quantize")
    # GPTQ stores qzeros for symmetric checkpoints too (gptq.py create_weights)
    return Quant("gptq", f"int{bits}", "group" if group != -1 else "channel",
                 2, group=group if group != -1 else None, zero_points=True,
                 g_idx=bool(qc.get("desc_act", False)), lm_head=bool(qc.get("lm_head", False)),
                 ignore=tuple(dynamic), only=only)


def _bnb(qc: dict) -> Quant:
    skip = _str_list(qc, "llm_int8_skip_modules")
    if qc.get("load_in_8bit"):
        return Quant("bitsandbytes", "int8", "channel", 4, ignore=skip)
    return Quant("bitsandbytes", "nf4", "nf4", 4,
                 double_quant=bool(qc.get("bnb_4bit_use_double_quant", False)), ignore=skip)


READERS = {"fp8": _fp8, "mxfp4": _mxfp4, "modelopt": _modelopt,
           "compressed-tensors": _ct, "awq": _awq, "gptq": _gptq, "bitsandbytes": _bnb}


def read_quant(qc: dict, source: str = "quantization_config", model_bytes: int = 2) -> Quant:
    """A ``Quant`` from a ``quantization_config`` (or ``compression_config``) object;
    ``model_bytes``: the checkpoint's dtype (compressed-tensors' scales follow it,
    ``ledger.serve.scales``)."""
    if not isinstance(qc, dict):
        raise LedgerError("quantization_config", f"must be an object, got {qc!r}")
    method = qc.get("quant_method")
    if not isinstance(method, str):
        if "quant_algo" in qc or "quantization" in qc:
            method = "modelopt"  # hf_quant_config.json carries no quant_method
        else:
            raise LedgerError("quantization_config", f"no 'quant_method' in {source}")
    method = ALIASES.get(method.lower(), method.lower())
    if method not in READERS:
        raise LedgerError("quantization_config", f"quant_method {method!r} is not modelled; "
                                                 f"modelled: {', '.join(METHODS)}")
    q = _ct(qc, model_bytes) if method == "compressed-tensors" else READERS[method](qc)
    return replace(q, source=source)


def model_dtype_bytes(cfg: dict) -> int:
    """Bytes of a config.json's ``torch_dtype`` (transformers 5: ``dtype``); bf16 when
    neither is a float dtype the table names."""
    name = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").removeprefix("torch.")
    return SCALE_DTYPES.get(name, 2) if name.startswith(("float", "bfloat", "half")) else 2


def config_quant(cfg: dict) -> Quant | None:
    """The checkpoint's format from a parsed config.json: its ``quantization_config``,
    else its ``compression_config`` (older compressed-tensors checkpoints; vLLM reads
    either, vllm/transformers_utils/config.py get_hf_file_to_dict / model.py), else the
    text model's (a composite's ``text_config``); None when the weights are the bf16."""
    for key in ("quantization_config", "compression_config"):
        if cfg.get(key) is not None:
            return read_quant(cfg[key], key, model_dtype_bytes(cfg))
    text = cfg.get("text_config")
    if isinstance(text, dict) and text.get("quantization_config") is not None:
        return read_quant(text["quantization_config"], "text_config.quantization_config",
                          model_dtype_bytes(text))
    return None


def online(method: str) -> Quant:
    """``--quantization`` on a bf16 checkpoint: what vLLM quantizes at load. fp8: every
    linear layer to FP8 with one scale per tensor, dynamic activations
    (Fp8LinearMethod.process_weights_after_loading when not is_checkpoint_fp8_serialized,
    fp8.py); bitsandbytes: 4-bit NF4 without nested absmax (vLLM's in-flight default,
    bitsandbytes_loader.py). Other methods need a checkpoint made for them."""
    if method == "fp8":
        return Quant("fp8", "fp8", "tensor", 4, activations="fp8", source="--quantization")
    if method == "bitsandbytes":
        return Quant("bitsandbytes", "nf4", "nf4", 4, double_quant=False,
                     source="--quantization")
    raise LedgerError("quantization", f"--quantization {method} needs a checkpoint "
                                      f"quantized with it; vLLM quantizes a bf16 checkpoint "
                                      f"at load only with fp8 or bitsandbytes")


def resolve(flag: str | None, stored: Quant | None) -> Quant | None:
    """The format vLLM serves: ``--quantization`` over the file's. On a bf16 checkpoint
    the flag quantizes at load (``online``); on a quantized one it may name the same
    method or one of its kernels (``ALIASES``); any other vLLM refuses
    (ModelConfig._verify_quantization, vllm/config/model.py: "Quantization method
    specified in the model config (...) does not match the quantization method
    specified in the `quantization` argument (...)"); ``none`` keeps the file's."""
    if flag is None or flag == "none":
        return stored
    method = ALIASES.get(flag, flag)
    if stored is None:
        return online(method)
    if method != stored.method:
        raise LedgerError("quantization", f"the checkpoint is {stored.method} "
                                          f"({stored.source}); vLLM refuses --quantization "
                                          f"{flag} on it (its config's method must match)")
    return replace(stored, source=f"{stored.source}, --quantization {flag}")
