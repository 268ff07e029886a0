"""Registry of tiny Hugging Face model configurations for the model zoo.

Every entry builds a model with ``from_config`` (random weights under a fixed seed; nothing is
downloaded) at hidden size 64 (or the smallest size the architecture accepts) and 2 layers, so a
forward and backward pass takes milliseconds on CPU. An entry says which transformers classes to
use, how to make its inputs (see :mod:`neuron_conformance.model_zoo.inputs`), which output to compare, and flags that
change how the checks run it (attention implementation, MoE, generation, ``torch.compile``).

Known traps handled here (found by building every entry with transformers 5.x on CPU):

- ModernBERT's special-token ids (pad/bos/eos/cls/sep) default to ids above a small vocabulary;
  they are set inside the vocabulary.
- Every entry with attention is built with ``attn_implementation="eager"`` (eager attention is the
  same math on every device); ``forward`` and ``backward`` also run each other implementation the
  model's transformers class supports (:meth:`ModelSpec.attention_implementations`,
  :mod:`neuron_conformance.model_zoo.attention`). Gemma2, Bloom, GPT-OSS and DeBERTa-v2 have no SDPA path, the Mamba
  family and the CNNs no attention.
- MoE models default to ``experts_implementation="grouped_mm"`` (``torch._grouped_mm``), which has
  no float64 kernel. The checks build the float64 reference with eager experts and keep the
  default on the device, so ``_grouped_mm`` stays an op the device must run.
- Dropout, layerdrop and stochastic depth are set to zero so that gradients compare in train mode
  as well as eval mode.

Source of the config field names: ``transformers/models/<name>/configuration_<name>.py``
(transformers 5.24).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

#: Sizes shared by the text models: vocabulary, hidden size, layers, heads, MLP width.
VOCAB = 128
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 128
MAX_POSITIONS = 128

#: Model families, in the order the report lists them.
FAMILIES = ("decoder", "moe", "ssm", "encoder", "encoder-decoder", "vision", "multimodal", "audio")

#: The checks a model can take part in (the ``variant`` field of its records).
CHECKS = ("forward", "backward", "train", "generate", "router", "compile", "compile_train")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One zoo entry.

    Attributes:
        id: model id used in test ids and records (``op`` field), e.g. ``"llama"``.
        family: one of :data:`FAMILIES`.
        config_class: name of the transformers config class, e.g. ``"LlamaConfig"``.
        model_class: name of the transformers model class built with ``_from_config``.
        config_kwargs: keyword arguments for the config class (a callable returning them when the
            config needs sub-configs).
        inputs: input kind understood by :func:`neuron_conformance.model_zoo.inputs.make_inputs`.
        output: attribute of the model output that the checks compare (``logits``,
            ``last_hidden_state``, ...). ``logits`` over a vocabulary or label set also gets
            top-1/top-5 agreement.
        attn_implementation: attention implementation pinned for every comparison; ``None`` for
            models without attention.
        is_moe: the model routes tokens to experts; the router check applies.
        supports_generate: the model has ``generate`` and a causal LM head.
        ci: the entry belongs to the bounded subset that CI runs (marker ``model_zoo_ci``).
        fp16_nonfinite_ok: the architecture is known to overflow in float16 on CPU at these sizes;
            a non-finite CPU reference is then reported as a skip, not a failure.
        note: free text shown in the docs (why a field is set the way it is).
    """

    id: str
    family: str
    config_class: str
    model_class: str
    config_kwargs: Mapping[str, Any] | Callable[[], Mapping[str, Any]]
    inputs: str = "text"
    output: str = "logits"
    attn_implementation: str | None = "eager"
    is_moe: bool = False
    supports_generate: bool = False
    ci: bool = False
    note: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"ModelSpec {self.id!r}: family={self.family!r} is not one of {FAMILIES}")

    def checks(self) -> tuple[str, ...]:
        """The checks that apply to this entry, in :data:`CHECKS` order."""
        out = ["forward", "backward", "train"]
        if self.supports_generate:
            out.append("generate")
        if self.is_moe:
            out.append("router")
        if self.id not in NO_COMPILE:
            out += ["compile", "compile_train"]
        return tuple(out)

    def attention_implementations(self) -> tuple[str, ...]:
        """transformers ``attn_implementation`` names this entry supports, eager first: ``()`` without
        attention, else ``eager``, then ``sdpa`` unless the entry is in :data:`NO_SDPA`, then
        ``flex_attention`` when it is in :data:`FLEX`."""
        if self.attn_implementation is None:
            return ()
        out = ["eager"]
        if self.id not in NO_SDPA:
            out.append("sdpa")
        if self.id in FLEX:
            out.append("flex_attention")
        return tuple(out)

    def make_config(self):
        """Build the transformers config object for this entry (no weights, no download)."""
        import transformers  # deferred: optional dependency (the models extra)

        kwargs = self.config_kwargs() if callable(self.config_kwargs) else dict(self.config_kwargs)
        config_cls = getattr(transformers, self.config_class)
        return config_cls(**kwargs)


NO_COMPILE: dict[str, str] = {}
"""Entries the compile checks (``compile``, ``compile_train``) leave out, each with the reason; every other
entry takes both."""

COMPILE_CI = {
    ("llama", "compile"): ("float32", "bfloat16", "float16"),
    ("llama", "compile_train"): ("float32",),
    ("bert", "compile"): ("float32",),
}
"""The compile tests of the CI subset (``model_zoo_ci``), as ``(model id, check): dtypes``; the other CI entries'
compile tests run in the full zoo only (Dynamo tracing costs seconds per model x dtype)."""

NO_SDPA = frozenset({"gemma2", "bloom", "gpt_oss", "deberta_v2"})
"""Entries with attention whose transformers 5.24 class has ``_supports_sdpa = False``."""

# fmt: off
FLEX = frozenset({
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi", "phi3", "gpt_neox",
    "starcoder2", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "gpt_oss", "recurrent_gemma", "bert",
    "roberta", "modernbert", "distilbert", "t5", "umt5", "bart", "whisper", "vit", "dinov2", "clip", "siglip",
    "llava", "paligemma", "idefics3", "wav2vec2",
})
# fmt: on
"""Entries whose transformers 5.24 class has ``_supports_flex_attn = True``. Both sets are static so that
collecting the zoo imports no model class; ``tests/model_zoo/test_zoo_registry.py`` checks them against
the class flags."""


def _text(**overrides: Any) -> dict[str, Any]:
    """Common decoder/encoder sizes plus per-model overrides."""
    base = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    base.update(overrides)
    return base


def _bert_like(**overrides: Any) -> dict[str, Any]:
    base = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=MAX_POSITIONS,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )
    base.update(overrides)
    return base


def _vit_like(**overrides: Any) -> dict[str, Any]:
    base = dict(
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=10,
    )
    base.update(overrides)
    return base


def _clip_text(**overrides: Any) -> dict[str, Any]:
    base = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    base.update(overrides)
    return base


def _clip_vision(**overrides: Any) -> dict[str, Any]:
    base = dict(
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        image_size=32,
        patch_size=8,
        num_channels=3,
    )
    base.update(overrides)
    return base


def _llava() -> dict[str, Any]:
    return dict(
        vision_config=dict(model_type="clip_vision_model", **_clip_vision()),
        text_config=dict(model_type="llama", **_text()),
        image_token_index=VOCAB - 1,
        image_seq_length=16,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


def _paligemma() -> dict[str, Any]:
    return dict(
        vision_config=dict(model_type="siglip_vision_model", **_clip_vision()),
        text_config=dict(model_type="gemma", **_text(head_dim=16)),
        image_token_index=VOCAB - 1,
        vocab_size=VOCAB,
        projection_dim=HIDDEN,
        hidden_size=HIDDEN,
    )


def _qwen2_vl() -> dict[str, Any]:
    return dict(
        vision_config=dict(
            depth=LAYERS,
            embed_dim=HIDDEN,
            hidden_size=HIDDEN,
            num_heads=HEADS,
            mlp_ratio=2,
            patch_size=4,
            spatial_merge_size=2,
            temporal_patch_size=2,
            in_channels=3,
        ),
        text_config=dict(
            **_text(rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0})
        ),
        image_token_id=VOCAB - 1,
        video_token_id=VOCAB - 2,
        vision_start_token_id=VOCAB - 3,
        vision_end_token_id=VOCAB - 4,
    )


def _idefics3() -> dict[str, Any]:
    return dict(
        vision_config=dict(
            hidden_size=HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            intermediate_size=INTERMEDIATE,
            image_size=32,
            patch_size=8,
        ),
        text_config=dict(model_type="llama", **_text()),
        image_token_id=VOCAB - 1,
        scale_factor=2,
    )


def _whisper() -> dict[str, Any]:
    return dict(
        vocab_size=VOCAB,
        num_mel_bins=16,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=INTERMEDIATE,
        decoder_ffn_dim=INTERMEDIATE,
        d_model=HIDDEN,
        max_source_positions=16,
        max_target_positions=MAX_POSITIONS,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        dropout=0.0,
        suppress_tokens=[],
        begin_suppress_tokens=[],
        apply_spec_augment=False,
    )


def _seq2seq(**overrides: Any) -> dict[str, Any]:
    base = dict(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        pad_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=0,
        dropout_rate=0.0,
        tie_word_embeddings=False,
    )
    base.update(overrides)
    return base


def _t5(**overrides: Any) -> dict[str, Any]:
    return _seq2seq(
        d_kv=16,
        d_ff=INTERMEDIATE,
        num_layers=LAYERS,
        num_decoder_layers=LAYERS,
        num_heads=HEADS,
        relative_attention_num_buckets=8,
        **overrides,
    )


# fmt: off
_SPECS: tuple[ModelSpec, ...] = (
    # ---- decoders -------------------------------------------------------------------------
    ModelSpec("llama", "decoder", "LlamaConfig", "LlamaForCausalLM", _text(),
              supports_generate=True, ci=True),
    ModelSpec("mistral", "decoder", "MistralConfig", "MistralForCausalLM", _text(sliding_window=8),
              supports_generate=True),
    ModelSpec("qwen2", "decoder", "Qwen2Config", "Qwen2ForCausalLM", _text(),
              supports_generate=True),
    ModelSpec("qwen3", "decoder", "Qwen3Config", "Qwen3ForCausalLM", _text(head_dim=16),
              supports_generate=True),
    ModelSpec("gemma", "decoder", "GemmaConfig", "GemmaForCausalLM", _text(head_dim=16),
              supports_generate=True),
    ModelSpec("gemma2", "decoder", "Gemma2Config", "Gemma2ForCausalLM",
              _text(head_dim=16, sliding_window=8, query_pre_attn_scalar=16),
              supports_generate=True, note="rejects sdpa; eager attention"),
    ModelSpec("gemma3_text", "decoder", "Gemma3TextConfig", "Gemma3ForCausalLM",
              _text(head_dim=16, sliding_window=8, query_pre_attn_scalar=16),
              supports_generate=True),
    ModelSpec("gpt2", "decoder", "GPT2Config", "GPT2LMHeadModel",
              dict(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=MAX_POSITIONS,
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2,
                   pad_token_id=0),
              supports_generate=True),
    ModelSpec("phi", "decoder", "PhiConfig", "PhiForCausalLM",
              _text(num_key_value_heads=HEADS, resid_pdrop=0.0, embd_pdrop=0.0, partial_rotary_factor=0.5),
              supports_generate=True),
    ModelSpec("phi3", "decoder", "Phi3Config", "Phi3ForCausalLM", _text(resid_pdrop=0.0, embd_pdrop=0.0),
              supports_generate=True),
    ModelSpec("gpt_neox", "decoder", "GPTNeoXConfig", "GPTNeoXForCausalLM",
              _text(num_key_value_heads=None, hidden_dropout=0.0, attention_dropout=0.0, rotary_pct=0.5),
              supports_generate=True),
    ModelSpec("falcon", "decoder", "FalconConfig", "FalconForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   new_decoder_architecture=False, multi_query=True, hidden_dropout=0.0, attention_dropout=0.0,
                   bos_token_id=1, eos_token_id=2, pad_token_id=0),
              supports_generate=True),
    ModelSpec("bloom", "decoder", "BloomConfig", "BloomForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS, hidden_dropout=0.0,
                   attention_dropout=0.0, bos_token_id=1, eos_token_id=2, pad_token_id=0),
              supports_generate=True),
    ModelSpec("starcoder2", "decoder", "Starcoder2Config", "Starcoder2ForCausalLM",
              _text(sliding_window=8, residual_dropout=0.0, embedding_dropout=0.0),
              supports_generate=True),
    # ---- mixture of experts ---------------------------------------------------------------
    ModelSpec("mixtral", "moe", "MixtralConfig", "MixtralForCausalLM",
              _text(num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0),
              is_moe=True, supports_generate=True, ci=True),
    ModelSpec("qwen2_moe", "moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
              _text(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    shared_expert_intermediate_size=64, decoder_sparse_step=1),
              is_moe=True, supports_generate=True),
    ModelSpec("qwen3_moe", "moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
              _text(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    decoder_sparse_step=1),
              is_moe=True, supports_generate=True),
    ModelSpec("olmoe", "moe", "OlmoeConfig", "OlmoeForCausalLM",
              _text(num_experts=4, num_experts_per_tok=2),
              is_moe=True, supports_generate=True),
    ModelSpec("deepseek_v3", "moe", "DeepseekV3Config", "DeepseekV3ForCausalLM",
              _text(num_key_value_heads=HEADS, moe_intermediate_size=32, n_shared_experts=1, n_routed_experts=4,
                    num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1,
                    kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16),
              is_moe=True, supports_generate=True),
    ModelSpec("gpt_oss", "moe", "GptOssConfig", "GptOssForCausalLM",
              _text(head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                    layer_types=["sliding_attention", "full_attention"]),
              is_moe=True, supports_generate=True),
    # ---- state space models and hybrids ---------------------------------------------------
    ModelSpec("mamba", "ssm", "MambaConfig", "MambaForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, state_size=8, expand=2,
                   conv_kernel=4, pad_token_id=0, bos_token_id=1, eos_token_id=2, use_mambapy=False),
              attn_implementation=None, supports_generate=True, ci=True,
              note="no attention; slow-path selective scan (no CUDA kernels)"),
    ModelSpec("mamba2", "ssm", "Mamba2Config", "Mamba2ForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, state_size=8, expand=2,
                   num_heads=8, head_dim=16, n_groups=1, conv_kernel=4, chunk_size=8,
                   pad_token_id=0, bos_token_id=1, eos_token_id=2),
              attn_implementation=None, supports_generate=True),
    ModelSpec("falcon_mamba", "ssm", "FalconMambaConfig", "FalconMambaForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, state_size=8, expand=2,
                   conv_kernel=4, pad_token_id=0, bos_token_id=1, eos_token_id=2, use_mambapy=False),
              attn_implementation=None, supports_generate=True),
    ModelSpec("jamba", "ssm", "JambaConfig", "JambaForCausalLM",
              _text(num_experts=4, num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
                    attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_expand=2,
                    use_mamba_kernels=False),
              is_moe=True, supports_generate=True,
              note="layer 0 is Mamba + dense MLP, layer 1 is attention + MoE"),
    ModelSpec("recurrent_gemma", "ssm", "RecurrentGemmaConfig", "RecurrentGemmaForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   num_key_value_heads=1, intermediate_size=INTERMEDIATE, lru_width=HIDDEN,
                   attention_window_size=16, block_types=["recurrent", "attention"],
                   pad_token_id=0, bos_token_id=1, eos_token_id=2),
              supports_generate=True),
    ModelSpec("qwen3_next", "ssm", "Qwen3NextConfig", "Qwen3NextForCausalLM",
              _text(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    shared_expert_intermediate_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
                    linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                    layer_types=["linear_attention", "full_attention"], decoder_sparse_step=1),
              is_moe=True, supports_generate=True,
              note="gated DeltaNet (torch fallback) + full attention, MoE"),
    # ---- encoders -------------------------------------------------------------------------
    ModelSpec("bert", "encoder", "BertConfig", "BertForMaskedLM", _bert_like(), ci=True),
    ModelSpec("roberta", "encoder", "RobertaConfig", "RobertaForMaskedLM",
              _bert_like(max_position_embeddings=MAX_POSITIONS + 2, pad_token_id=1, bos_token_id=0,
                         eos_token_id=2)),
    ModelSpec("deberta_v2", "encoder", "DebertaV2Config", "DebertaV2ForMaskedLM",
              _bert_like(relative_attention=True, position_buckets=16, max_relative_positions=32,
                         pos_att_type=["p2c", "c2p"])),
    ModelSpec("modernbert", "encoder", "ModernBertConfig", "ModernBertForMaskedLM",
              dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   intermediate_size=INTERMEDIATE, max_position_embeddings=MAX_POSITIONS, local_attention=8,
                   pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=3, sep_token_id=4),
              note="special-token ids must be inside the vocabulary"),
    ModelSpec("distilbert", "encoder", "DistilBertConfig", "DistilBertForMaskedLM",
              dict(vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=INTERMEDIATE,
                   max_position_embeddings=MAX_POSITIONS, dropout=0.0, attention_dropout=0.0, pad_token_id=0)),
    # ---- encoder-decoder ------------------------------------------------------------------
    ModelSpec("t5", "encoder-decoder", "T5Config", "T5ForConditionalGeneration", _t5(), inputs="seq2seq"),
    ModelSpec("umt5", "encoder-decoder", "UMT5Config", "UMT5ForConditionalGeneration", _t5(),
              inputs="seq2seq"),
    ModelSpec("bart", "encoder-decoder", "BartConfig", "BartForConditionalGeneration",
              dict(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                   encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=INTERMEDIATE,
                   decoder_ffn_dim=INTERMEDIATE, max_position_embeddings=MAX_POSITIONS, dropout=0.0,
                   attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                   pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2,
                   forced_eos_token_id=None),
              inputs="seq2seq"),
    ModelSpec("whisper", "encoder-decoder", "WhisperConfig", "WhisperForConditionalGeneration", _whisper,
              inputs="whisper", note="layerdrop off so gradients compare"),
    # ---- vision ---------------------------------------------------------------------------
    ModelSpec("vit", "vision", "ViTConfig", "ViTForImageClassification", _vit_like(), inputs="image", ci=True),
    ModelSpec("convnext", "vision", "ConvNextConfig", "ConvNextForImageClassification",
              dict(num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
                   drop_path_rate=0.0, image_size=32, num_labels=10),
              inputs="image", attn_implementation=None),
    ModelSpec("dinov2", "vision", "Dinov2Config", "Dinov2ForImageClassification",
              _vit_like(mlp_ratio=2, drop_path_rate=0.0), inputs="image"),
    ModelSpec("swin", "vision", "SwinConfig", "SwinForImageClassification",
              dict(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                   window_size=4, mlp_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                   drop_path_rate=0.0, num_labels=10),
              inputs="image"),
    ModelSpec("resnet", "vision", "ResNetConfig", "ResNetForImageClassification",
              dict(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
                   num_labels=10),
              inputs="image", attn_implementation=None,
              note="batch norm: compared in eval mode (running statistics)"),
    # ---- multimodal -----------------------------------------------------------------------
    ModelSpec("clip", "multimodal", "CLIPConfig", "CLIPModel",
              lambda: dict(text_config=_clip_text(), vision_config=_clip_vision(), projection_dim=32),
              inputs="text_image", output="logits_per_image"),
    ModelSpec("siglip", "multimodal", "SiglipConfig", "SiglipModel",
              lambda: dict(text_config=_clip_text(), vision_config=_clip_vision()),
              inputs="text_image", output="logits_per_image"),
    ModelSpec("siglip2_vision", "multimodal", "Siglip2VisionConfig", "Siglip2VisionModel",
              dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   intermediate_size=INTERMEDIATE, patch_size=8, num_channels=3, num_patches=16),
              inputs="siglip2_patches", output="pooler_output"),
    ModelSpec("llava", "multimodal", "LlavaConfig", "LlavaForConditionalGeneration", _llava,
              inputs="llava"),
    ModelSpec("qwen2_vl", "multimodal", "Qwen2VLConfig", "Qwen2VLForConditionalGeneration", _qwen2_vl,
              inputs="qwen2_vl", note="needs mm_token_type_ids and image_grid_thw"),
    ModelSpec("paligemma", "multimodal", "PaliGemmaConfig", "PaliGemmaForConditionalGeneration", _paligemma,
              inputs="paligemma"),
    ModelSpec("idefics3", "multimodal", "Idefics3Config", "Idefics3ForConditionalGeneration", _idefics3,
              inputs="idefics3"),
    # ---- audio ----------------------------------------------------------------------------
    ModelSpec("wav2vec2", "audio", "Wav2Vec2Config", "Wav2Vec2ForCTC",
              dict(vocab_size=32, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   intermediate_size=INTERMEDIATE, conv_dim=[16, 16], conv_stride=[5, 2], conv_kernel=[10, 3],
                   num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_dropout=0.0,
                   activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0,
                   layerdrop=0.0, apply_spec_augment=False, mask_time_prob=0.0, pad_token_id=0),
              inputs="audio", note="layerdrop and spec-augment off so gradients compare"),
)
# fmt: on

REGISTRY: dict[str, ModelSpec] = {spec.id: spec for spec in _SPECS}
if len(REGISTRY) != len(_SPECS):  # pragma: no cover - guards edits to the table above
    raise RuntimeError("neuron_conformance.model_zoo.registry: duplicate model id in _SPECS")


def get_spec(model_id: str) -> ModelSpec:
    """Return the :class:`ModelSpec` for ``model_id``.

    Raises:
        KeyError: ``model_id`` is not registered; the message lists the registered ids.
    """
    try:
        return REGISTRY[model_id]
    except KeyError:
        raise KeyError(
            f"model id {model_id!r} is not in the model zoo; registered ids: {', '.join(sorted(REGISTRY))}"
        ) from None


def model_ids(*, family: str | None = None, ci_only: bool = False) -> list[str]:
    """Registered model ids in registry order, optionally filtered by family or the CI subset.

    Raises:
        ValueError: ``family`` is not one of :data:`FAMILIES`.
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family={family!r} is not one of {FAMILIES}")
    return [s.id for s in _SPECS if (family is None or s.family == family) and (not ci_only or s.ci)]


def build_model(
    spec: ModelSpec | str,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    experts_implementation: str | None = None,
) -> torch.nn.Module:
    """Build ``spec``'s model on CPU with random weights drawn under ``seed``, in eval mode.

    Weights are initialised in float32 (so every dtype starts from the same numbers) and then cast
    to ``dtype``. ``experts_implementation`` overrides the MoE experts kernel (``"eager"`` for a
    float64 reference; ``None`` keeps the transformers default, ``grouped_mm``).

    Raises:
        KeyError: unknown model id.
        TypeError: ``dtype`` is not a floating dtype.
    """
    import transformers  # deferred: optional dependency (the models extra)

    if isinstance(spec, str):
        spec = get_spec(spec)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"build_model: dtype must be a floating torch.dtype, got {dtype!r}")
    config = spec.make_config()
    model_cls = getattr(transformers, spec.model_class)
    kwargs: dict[str, Any] = {}
    if spec.attn_implementation is not None:
        kwargs["attn_implementation"] = spec.attn_implementation
    if spec.is_moe and experts_implementation is not None:
        kwargs["experts_implementation"] = experts_implementation
    fork_devices: list = []
    with torch.random.fork_rng(devices=fork_devices):
        torch.manual_seed(seed)
        model = model_cls._from_config(config, dtype=torch.float32, **kwargs)
    model.eval()
    return model.to(dtype)
