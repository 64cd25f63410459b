"""What the V1 reach probe (:mod:`annotations.reach_probe_v1`) runs: the kinds of model and the
settings added to them (:data:`CONFIGS`), the workload they share (:data:`WORKLOAD`), the stand-in
checkpoints an audio model's processor reads, and the prompts.

The kinds of model run with default settings, as ``vllm serve`` applies them to a generative model:
prefix caching on (off for an attention-free model, for the R-SWA model, whose configuration hook
turns it off, and for the encoder-decoder model), chunked prefill (off for the encoder-decoder
model), asynchronous scheduling, statistics logged. What differs is the kind of model. The requests
share prefixes; the KV cache is small (in some kinds of model it forces preemption); two requests
are aborted, a running one and a waiting one; a second wave of requests arrives once the first is
done, half of it repeating earlier prompts (as a next turn or unchanged), so that hits end inside
blocks; the fake model samples random tokens, sometimes EOS. The Mamba kinds get the cache mode and
block size the Mamba configuration hook sets: "align" with the attention block size under prefix
caching, "none" with the model length as block size without it. The other configurations add
settings to one of those kinds of model (KV-cache events, twice; prefix caching off, twice, and on
for an attention-free model and, through an ``rswa_window`` override, for R-SWA layers; the hybrid
KV-cache manager off; a retention interval of ``None`` and of 64 tokens, on sliding-window and on
Mamba layers; a finer ``prefix_match_unit``, three times; an EAGLE drafter with its default
lookahead hashes, and with the trailing-block drop on four kinds of model, once with a finer
``prefix_match_unit`` too; the ``DecodeBenchConnector`` KV connector, role ``kv_both`` as its
documentation sets it, twice; speculative decoding's ``extract_hidden_states`` method, whose hidden-
state cache layer joins the others, three times; an explicit prefix-cache reset, asked for once
while requests run, which the block pool refuses, and once between the waves; decode context
parallelism over two tensor-parallel ranks on attention and Mamba layers, planned for both ranks'
workers; prefix caching turned on for the encoder-decoder model, which the engine accepts and which
stops it at the first request's lookup or, when requests ask for prompt logprobs and so skip it, at
the first caching, stops the probe expects and records), and list them as the notes' setting routes
spell them. The connector runs as the scheduler builds it; on a request's first scheduling it
reports every token beyond the local prefix-cache hit, less the last one, as loaded synchronously.
The drafter is one attention layer whose KV-cache spec is marked as a drafter's, as the model runner
marks it, beside a real ``SpeculativeConfig`` (method ``eagle``, two speculative tokens) built from
a one-layer EAGLE-Llama configuration; a request verifying drafts gets the bonus token plus a random
number of accepted drafts. The Mamba layers are Mamba-2 layers, which export prefill checkpoints,
except in one kind of model with Mamba-1 layers, which export none. The R-SWA layers keep the hook's
default window of 128 generated tokens, and the R-SWA requests may generate up to 249 tokens, so
that the window moves past whole blocks behind the prompt. The circular-buffer layer is declared as
DeepSeek-V4.1's compressor declares its ring (8 float32 rows of one head), beside full-attention
layers standing in for the model's compressed attention. The encoder-decoder model is a Whisper
configuration whose requests each carry one audio item of Whisper's 1500 encoder tokens, so that the
scheduler gives its cross-attention group the encoder's blocks; it gets Whisper's own limits (448
decoder positions, and a step budget of 2048 tokens, since a step must hold an audio item whole) and
room for a few requests' encoder blocks. The multimodal model is a Qwen2-Audio configuration: half
of the prompts' parts (a shared prefix, the rest of a prompt, a next turn's addition) carry an audio
clip of 25 or 50 placeholder tokens between its begin and end tokens, as Qwen2-Audio's processor
writes it, so that block hashes carry the clips' keys; two clips are equally long, so that prompts
alike token for token may differ in their audio.

Nothing here imports vLLM.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

#: Whisper's own limits (448 decoder positions, 1500 encoder tokens per audio item, which a step must
#: hold whole without chunked multimodal input), and room for a few requests' encoder blocks.
_WHISPER_SIZES = {"max_model_len": 448, "max_num_batched_tokens": 2048, "num_blocks_per_layer": 400}
#: Settings several configurations make, spelled as the notes' setting routes spell them.
_EAGLE_DROP = ["`disable_lookahead_block_hashes=True`", "and speculative decoding"]
_KV_CONNECTOR = ["a KV connector of any kind", "a KV connector (`kv_transfer_config`) that supplies external tokens",
                 "a KV-consumer connector (`kv_role` `kv_consumer` or `kv_both`)", "a KV connector acting as KV producer"]
_EXTRACT_HIDDEN_STATES = ['`method="extract_hidden_states"`', "and speculative decoding"]

#: The kinds of model the probe runs, each with default settings: the layers' KV-cache specs, in
#: the notes' words, and the model configuration fields the engine reads for that kind.
CONFIGS: dict[str, dict] = {
    "full_attention": {
        "model": "a model whose layers are all full attention (Llama, Qwen3)",
        "layers": ["full", "full"],
    },
    "full_and_sliding_window": {
        "model": "a model with full-attention and sliding-window layers (Gemma 3, GPT-OSS)",
        "layers": ["full", "sliding_window"],
    },
    "full_and_wider_sliding_window": {
        "model": "a model with full-attention layers whose pages are half those of its sliding-window layers,"
                 " so the planner doubles their block and the hash unit is finer than it",
        "layers": ["full", "sliding_window_wide"],
    },
    "sliding_window_only": {
        "model": "a model whose layers all use a sliding window (Mistral-7B-v0.1)",
        "layers": ["sliding_window", "sliding_window"],
    },
    "full_and_chunked_local": {
        "model": "a model with full-attention and chunked-local layers (Llama 4)",
        "layers": ["full", "chunked_local"],
        "hf_config": {"attention_chunk_size": 64},
    },
    "attention_and_mamba": {
        "model": "a model with attention and Mamba-2 layers, which export prefill checkpoints (NemotronH)",
        "layers": ["full", "mamba"],
        "mamba_cache_mode": "align",  # what the Mamba configuration hook selects under prefix caching
    },
    "attention_and_mamba1": {
        "model": "a model with attention and Mamba-1 layers, which export no prefill checkpoints (Jamba)",
        "layers": ["full", "mamba1"],
        "mamba_cache_mode": "align",  # the Mamba configuration hook's choice under prefix caching
    },
    "mamba_only": {
        "model": "an attention-free model of Mamba layers (Mamba-2), whose default leaves prefix caching off",
        "layers": ["mamba", "mamba"],
        "prefix_caching": False,
        "mamba_cache_mode": "none",
    },
    "rswa_only": {
        "model": "a model whose attention layers all use R-SWA (Unlimited-OCR), whose configuration hook turns"
                 " prefix caching off",
        "layers": ["rswa", "rswa"],
        "prefix_caching": False,
        "sizes": {"max_tokens": 250},  # so that decodes outrun the window and leave a gap behind the prompt
    },
    "full_and_circular_buffer": {
        "model": "a model with attention layers and a compressor's circular-buffer layer (DeepSeek-V4.1)",
        "layers": ["full", "circular_buffer"],
    },
    "encoder_decoder": {
        "model": "an encoder-decoder model (Whisper): decoder self-attention and cross-attention layers, every"
                 " request with one 30-second audio input; prefix caching and chunked prefill are off by default",
        "layers": ["full", "cross_attention"],
        "checkpoint": "whisper",
        "prefix_caching": False,
        "sizes": _WHISPER_SIZES,
    },
    "multimodal": {
        "model": "a model of full-attention layers that takes audio in its prompts (Qwen2-Audio): half of the"
                 " prompts' parts carry a clip, some of them in the shared prefixes",
        "layers": ["full", "full"],
        "checkpoint": "qwen2_audio",
    },
    # One setting on top of a kind of model's defaults; ``settings`` spells it as the notes' setting
    # routes do, so that a note whose setting routes name none of them must not run here.
    "kv_events": {
        "model": "a model with full-attention layers whose pages are half those of its sliding-window layers,"
                 " with KV-cache events on",
        "layers": ["full", "sliding_window_wide"],
        "settings": ["`kv_events_config.enable_kv_cache_events=True`"],
        "kv_events": True,
    },
    "attention_and_mamba_kv_events": {
        "model": "a model with attention and Mamba-2 layers, with KV-cache events on",
        "layers": ["full", "mamba"],
        "settings": ["`kv_events_config.enable_kv_cache_events=True`"],
        "kv_events": True,
        "mamba_cache_mode": "align",
    },
    "full_and_sliding_window_without_hybrid_manager": {
        "model": "a model with full-attention and sliding-window layers, with the hybrid KV-cache manager off",
        "layers": ["full", "sliding_window"],
        "settings": ["`--disable-hybrid-kv-cache-manager`"],
        "disable_hybrid_kv_cache_manager": True,
    },
    "full_and_sliding_window_dense_retention": {
        "model": "a model with full-attention and sliding-window layers, caching every sliding-window block"
                 " (`prefix_cache_retention_interval=None`)",
        "layers": ["full", "sliding_window"],
        "settings": ["`prefix_cache_retention_interval`"],
        "retention_interval": None,
    },
    "full_and_sliding_window_retention_interval": {
        "model": "a model with full-attention and sliding-window layers, keeping a sliding-window tail every 64"
                 " tokens (`prefix_cache_retention_interval=64`)",
        "layers": ["full", "sliding_window"],
        "settings": ["`prefix_cache_retention_interval`"],
        "retention_interval": 64,
    },
    "attention_and_mamba_dense_retention": {
        "model": "a model with attention and Mamba-2 layers, caching every Mamba state block"
                 " (`prefix_cache_retention_interval=None`)",
        "layers": ["full", "mamba"],
        "settings": ["`prefix_cache_retention_interval`"],
        "retention_interval": None,
        "mamba_cache_mode": "align",
    },
    "attention_and_mamba_retention_interval": {
        "model": "a model with attention and Mamba-2 layers, keeping a Mamba state every 64 tokens"
                 " (`prefix_cache_retention_interval=64`)",
        "layers": ["full", "mamba"],
        "settings": ["`prefix_cache_retention_interval`"],
        "retention_interval": 64,
        "mamba_cache_mode": "align",
    },
    "full_attention_without_prefix_caching": {
        "model": "a model whose layers are all full attention, with prefix caching off",
        "layers": ["full", "full"],
        "settings": ["`enable_prefix_caching=False`", "prefix caching turned off"],
        "prefix_caching": False,
    },
    "attention_and_mamba_without_prefix_caching": {
        "model": "a model with attention and Mamba layers, with prefix caching off (Mamba in \"none\" mode)",
        "layers": ["full", "mamba"],
        "settings": ["`enable_prefix_caching=False`", "prefix caching turned off"],
        "prefix_caching": False,
        "mamba_cache_mode": "none",
    },
    "mamba_only_with_prefix_caching": {
        "model": "an attention-free model of Mamba layers, with prefix caching turned on (Mamba in \"align\" mode)",
        "layers": ["mamba", "mamba"],
        "settings": ["`enable_prefix_caching=True` on a model with Mamba-type layers"],
        "mamba_cache_mode": "align",
    },
    "rswa_only_with_prefix_caching": {
        "model": "a model whose attention layers all use R-SWA, with prefix caching on (an `rswa_window` given"
                 " through `--hf-overrides` to a checkpoint with `DeepseekAttention` layers)",
        "layers": ["rswa", "rswa"],
        "settings": ["an `rswa_window` given through `--hf-overrides`"],
        "sizes": {"max_tokens": 250},
    },
    "full_and_sliding_window_fine_unit": {
        "model": "a model with full-attention and sliding-window layers, with a `prefix_match_unit` of 4",
        "layers": ["full", "sliding_window"],
        "settings": ["`prefix_match_unit`"],
        "prefix_match_unit": 4,
    },
    # An EAGLE drafter (one full-attention layer of its own, as the model runner marks drafter layers)
    # with its default, lookahead block hashes, and with the trailing-block drop instead.
    "full_and_sliding_window_eagle": {
        "model": "a model with full-attention and sliding-window layers and an EAGLE drafter (lookahead hashes)",
        "layers": ["full", "sliding_window", "draft_full"],
        "settings": ["EAGLE, EAGLE3 or MTP drafter with prefix caching", "and speculative decoding"],
        "eagle": "lookahead",
    },
    "full_and_sliding_window_eagle_drop": {
        "model": "a model with full-attention and sliding-window layers and an EAGLE drafter that drops the"
                 " trailing block (`disable_lookahead_block_hashes=True`)",
        "layers": ["full", "sliding_window", "draft_full"],
        "settings": _EAGLE_DROP,
        "eagle": "drop",
    },
    "full_and_sliding_window_sliding_drafter_eagle_drop": {
        "model": "a model with full-attention and sliding-window layers and an EAGLE-family drafter whose layer"
                 " uses the sliding window (as MiMo-V2-Flash's MTP layer does), dropping the"
                 " trailing block (`disable_lookahead_block_hashes=True`)",
        "layers": ["full", "sliding_window", "draft_sliding_window"],
        "settings": _EAGLE_DROP,
        "eagle": "drop",
    },
    "full_attention_eagle_drop": {
        "model": "a model whose layers are all full attention, with an EAGLE drafter that drops the trailing"
                 " block (`disable_lookahead_block_hashes=True`)",
        "layers": ["full", "full", "draft_full"],
        "settings": _EAGLE_DROP,
        "eagle": "drop",
    },
    "attention_and_mamba_eagle_drop": {
        "model": "a model with attention and Mamba layers, with an EAGLE drafter that drops the trailing"
                 " block (`disable_lookahead_block_hashes=True`)",
        "layers": ["full", "mamba", "draft_full"],
        "settings": _EAGLE_DROP,
        "eagle": "drop",
        "mamba_cache_mode": "align",
    },
    "full_and_sliding_window_fine_unit_eagle_drop": {
        "model": "a model with full-attention and sliding-window layers, with a `prefix_match_unit` of 4 and an"
                 " EAGLE drafter that drops the trailing block (`disable_lookahead_block_hashes=True`)",
        "layers": ["full", "sliding_window", "draft_full"],
        "settings": ["`prefix_match_unit`", *_EAGLE_DROP],
        "prefix_match_unit": 4,
        "eagle": "drop",
    },
    # Speculative decoding's extract_hidden_states method: a hidden-state cache layer beside the model's.
    "full_attention_extract_hidden_states": {
        "model": "a model whose layers are all full attention, with speculative `method=\"extract_hidden_states\"`",
        "layers": ["full", "full", "hidden_state"],
        "settings": _EXTRACT_HIDDEN_STATES,
        "extract_hidden_states": True,
    },
    "full_and_sliding_window_extract_hidden_states": {
        "model": "a model with full-attention and sliding-window layers, with speculative"
                 " `method=\"extract_hidden_states\"`",
        "layers": ["full", "sliding_window", "hidden_state"],
        "settings": _EXTRACT_HIDDEN_STATES,
        "extract_hidden_states": True,
    },
    "attention_and_mamba_extract_hidden_states": {
        "model": "a model with attention and Mamba-2 layers, with speculative `method=\"extract_hidden_states\"`",
        "layers": ["full", "mamba", "hidden_state"],
        "settings": _EXTRACT_HIDDEN_STATES,
        "extract_hidden_states": True,
        "mamba_cache_mode": "align",
    },
    "full_and_sliding_window_decode_bench_connector": {
        "model": "a model with full-attention and sliding-window layers, with the `DecodeBenchConnector` KV"
                 " connector, which reports every token beyond the local hit but the last as loaded externally",
        "layers": ["full", "sliding_window"],
        "settings": _KV_CONNECTOR,
        "kv_connector": "DecodeBenchConnector",
    },
    "attention_and_mamba_decode_bench_connector": {
        "model": "a model with attention and Mamba layers, with the `DecodeBenchConnector` KV connector",
        "layers": ["full", "mamba"],
        "settings": _KV_CONNECTOR,
        "kv_connector": "DecodeBenchConnector",
        "mamba_cache_mode": "align",
    },
    "full_and_sliding_window_prefix_cache_reset": {
        "model": "a model with full-attention and sliding-window layers, whose prefix cache is reset on request"
                 " (`LLM.reset_prefix_cache()`) while requests run, which the pool refuses, and between the waves",
        "layers": ["full", "sliding_window"],
        "settings": ["an explicit prefix-cache reset", "a prefix-cache reset"],
        "reset_prefix_cache": True,
    },
    "attention_and_mamba1_fine_unit": {
        "model": "a model with attention and Mamba-1 layers, which export no prefill checkpoints, with a"
                 " `prefix_match_unit` of 4 (partial hits on)",
        "layers": ["full", "mamba1"],
        "settings": ["`prefix_match_unit`"],
        "prefix_match_unit": 4,
        "mamba_cache_mode": "align",
    },
    "attention_and_mamba_decode_context_parallel": {
        "model": "a model with attention and Mamba layers, with decode context parallelism over two tensor-parallel"
                 " ranks (`decode_context_parallel_size=2`), under which fine-grained hits need no finer unit",
        "layers": ["full", "mamba"],
        "settings": ["`decode_context_parallel_size > 1`", "decode context parallelism"],
        "mamba_cache_mode": "align",
        "parallel": {"tensor_parallel_size": 2, "decode_context_parallel_size": 2},
        "hf_config": {"num_key_value_heads": 1},  # DCP needs more tensor-parallel ranks than KV heads
    },
    "encoder_decoder_with_prefix_caching": {
        "model": "an encoder-decoder model (Whisper) with prefix caching turned on, which the engine accepts; it"
                 " plans the caches, and the first request's prefix-cache lookup stops it, since the"
                 " cross-attention manager refuses caching",
        "layers": ["full", "cross_attention"],
        "settings": ["`enable_prefix_caching=True` on an encoder-decoder model"],
        "checkpoint": "whisper",
        "sizes": _WHISPER_SIZES,
        "stops": "NotImplementedError",
    },
    "encoder_decoder_with_prefix_caching_prompt_logprobs": {
        "model": "an encoder-decoder model (Whisper) with prefix caching turned on, whose requests ask for prompt"
                 " logprobs and so skip the prefix-cache lookup; the first request's blocks are cached, which"
                 " stops the engine, since the cross-attention manager refuses caching",
        "layers": ["full", "cross_attention"],
        "settings": ["`enable_prefix_caching=True` on an encoder-decoder model"],
        "checkpoint": "whisper",
        "prompt_logprobs": 1,
        "sizes": _WHISPER_SIZES,
        "stops": "ValueError",
    },
    "attention_and_mamba_fine_unit": {
        "model": "a model with attention and Mamba layers, with a `prefix_match_unit` of 4 (partial hits on)",
        "layers": ["full", "mamba"],
        "settings": ["`prefix_match_unit`"],
        "prefix_match_unit": 4,
        "mamba_cache_mode": "align",
    },
}
#: The sizes and workload shared by every configuration (small, so that preemption happens); a
#: configuration's ``sizes`` replace some of them, and the report records those.
WORKLOAD = {
    "block_size": 16,
    "num_blocks_per_layer": 48,
    "max_model_len": 512,  # the planner refuses a KV cache smaller than one max-length request
    "max_num_seqs": 16,
    "max_num_batched_tokens": 96,
    "batches_in_flight": 2,  # EngineCore's batch queue under asynchronous scheduling
    "requests": 48,
    "first_wave": 36,  # the rest arrive once these are done, half of them next turns of earlier prompts
    "max_steps": 4000,
    "seed": 0,
    "eos_token_id": 2,
    "sliding_window": 48,
    "attention_chunk_size": 64,
    "rswa_window": 128,  # the Unlimited-OCR configuration hook's default
    "max_tokens": 40,  # a request generates 1 to this many tokens, less one
}
#: Steps at which the probe aborts a request: the newest running one, then one that waits.
ABORT_STEPS = (40, 90)
#: The step at which a configuration that resets the prefix cache asks for it while requests run.
RESET_STEP = 60

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
          "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
          "rms_norm_eps": 1e-5, "torch_dtype": "float16", "bos_token_id": 1, "eos_token_id": 2}


#: A two-layer Whisper decoder (one encoder layer), small as the Llama stand-in is.
#: The encoder tokens of one Whisper audio item (30 s), which its cross-attention layers read.
_WHISPER_ENCODER_TOKENS = 1500
_WHISPER = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "d_model": 256,
            "encoder_layers": 1, "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
            "encoder_ffn_dim": 256, "decoder_ffn_dim": 256, "vocab_size": 1000, "num_mel_bins": 80,
            "max_source_positions": _WHISPER_ENCODER_TOKENS, "max_target_positions": 448, "torch_dtype": "float16",
            "decoder_start_token_id": 3, "eos_token_id": 2, "bos_token_id": 1, "pad_token_id": 2}
#: Qwen2-Audio's prompt tokens around an audio clip, in the stand-in's tokenizer (256 byte tokens, then
#: the special tokens in the order ``_CHECKPOINTS`` lists them).
_AUDIO_BOS, _AUDIO_EOS, _AUDIO = 259, 260, 261
#: A two-layer Qwen2 decoder behind a one-layer audio encoder, small as the Llama stand-in is.
_QWEN2_AUDIO = {"architectures": ["Qwen2AudioForConditionalGeneration"], "model_type": "qwen2_audio",
                "audio_token_index": _AUDIO, "torch_dtype": "float16",
                "audio_config": {"model_type": "qwen2_audio_encoder", "d_model": 256, "encoder_layers": 1,
                                 "encoder_attention_heads": 4, "encoder_ffn_dim": 256, "num_mel_bins": 128,
                                 "max_source_positions": 1500},
                "text_config": {**{k: v for k, v in LLAMA.items() if k != "architectures"}, "model_type": "qwen2"}}
#: What a checkpoint folder holds for each audio model: the model configuration; the feature extractor
#: (Whisper's: 30 s at 16 kHz, 80 mel bins for Whisper, 128 for Qwen2-Audio); the tokenizer's special
#: tokens and class.
_CHECKPOINTS = {
    "whisper": {"config": _WHISPER, "mel_bins": 80, "processor": "WhisperProcessor", "attention_mask": False,
                "special_tokens": ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>",
                                   "<|notimestamps|>"],
                "tokenizer": {"tokenizer_class": "WhisperTokenizer",
                              "model_max_length": _WHISPER["max_target_positions"],
                              **{name: "<|endoftext|>" for name in ("bos_token", "eos_token", "unk_token", "pad_token")}}},
    "qwen2_audio": {"config": _QWEN2_AUDIO, "mel_bins": 128, "processor": "Qwen2AudioProcessor", "attention_mask": True,
                    "special_tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_bos|>",
                                       "<|audio_eos|>", "<|AUDIO|>"],
                    "tokenizer": {"tokenizer_class": "Qwen2TokenizerFast", "model_max_length": 4096,
                                  "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}},
}


def write_checkpoint(model_dir: Path, name: str) -> None:
    """What ``ModelConfig`` and an audio model's multimodal processor read from a checkpoint folder: the
    model configuration, the feature extractor's settings and a byte-level tokenizer, made here because
    the processor refuses to start without one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    checkpoint = _CHECKPOINTS[name]
    (model_dir / "config.json").write_text(json.dumps(checkpoint["config"]))
    (model_dir / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": checkpoint["mel_bins"],
        "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400, "n_samples": 480000,
        "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
        "return_attention_mask": checkpoint["attention_mask"], "processor_class": checkpoint["processor"]}))
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(checkpoint["special_tokens"])
    tokenizer.save(str(model_dir / "tokenizer.json"))
    (model_dir / "tokenizer_config.json").write_text(json.dumps(checkpoint["tokenizer"]))


def sizes_of(config: dict) -> dict:
    """The workload with the configuration's own ``sizes`` in place of the shared ones."""
    return {**WORKLOAD, **config.get("sizes", {})}


#: The audio clips a multimodal prompt may carry: (identifier, placeholder tokens). Two are as long
#: as each other, so that prompts alike token for token differ only in their audio.
_CLIPS = (("clip-0", 50), ("clip-1", 50), ("clip-2", 25))


def prompts_of(rng: random.Random, count: int, first_wave: int, audio: bool = False) -> list[list]:
    """Prompts of 5 to 300 tokens, most starting with one of three shared prefixes; half of the second
    wave repeats a prompt of the first, as a next turn (with 5 to 60 more tokens) or unchanged. With
    ``audio``, half of the parts (the shared prefixes, the rest of a prompt, a next turn's addition)
    carry one clip, an ``(identifier, length)`` item among the tokens, at a random place."""

    def part(tokens: list) -> list:
        if audio and rng.random() < 0.5:
            tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(_CLIPS))
        return tokens

    prefixes = [part([rng.randrange(3, 1000) for _ in range(rng.randrange(20, 120))]) for _ in range(3)]
    prompts: list[list] = []
    for i in range(count):
        if i >= first_wave and rng.random() < 0.5:
            turn = prompts[rng.randrange(first_wave)]
            prompts.append(turn + part([rng.randrange(3, 1000) for _ in range(rng.choice([0, rng.randrange(5, 60)]))]))
            continue
        head = rng.choice(prefixes) if rng.random() < 0.7 else []
        prompts.append(head + part([rng.randrange(3, 1000) for _ in range(rng.randrange(5, 180))]))
    return prompts


def clips_in_prompts(config: dict) -> bool:
    """Whether the configuration's prompts carry audio clips among their tokens (Qwen2-Audio's)."""
    return config.get("checkpoint") == "qwen2_audio"


def request_audio(config: dict, i: int, prompt: list) -> tuple[list[int], list[tuple[str, int, int]]]:
    """Request ``i``'s token ids and its audio items as (identifier, offset, length): the prompt's own
    clips, or, for an encoder-decoder model, one item of Whisper's encoder tokens placed at the start
    as its processor does, whose encoder output the cross-attention layers read."""
    tokens, clips = with_placeholders(prompt)
    if config.get("checkpoint") == "whisper":
        clips = [(f"audio-{i}", 0, _WHISPER_ENCODER_TOKENS)]
    return tokens, clips


def with_placeholders(prompt: list) -> tuple[list[int], list[tuple[str, int, int]]]:
    """A prompt's token ids, each clip written as Qwen2-Audio's processor writes it (its placeholder
    tokens between the audio begin and end tokens), and each clip's (identifier, offset, length)."""
    tokens: list[int] = []
    clips = []
    for piece in prompt:
        if isinstance(piece, int):
            tokens.append(piece)
            continue
        identifier, length = piece
        tokens.append(_AUDIO_BOS)
        clips.append((identifier, len(tokens), length))
        tokens += [_AUDIO] * length + [_AUDIO_EOS]
    return tokens, clips


def kind_of(config: dict) -> str | None:
    """The configuration with default settings that runs the same kind of model (the same layers, less
    a drafter's); None for a configuration of default settings."""
    if not config.get("settings"):
        return None
    layers = [kind for kind in config["layers"] if not kind.startswith("draft_") and kind != "hidden_state"]
    return next(name for name, other in CONFIGS.items() if not other.get("settings") and other["layers"] == layers)
