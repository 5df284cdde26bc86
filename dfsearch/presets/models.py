"""Model presets: the shapes of published decoder-only transformers.

A model fills the LLM workload (``hidden_dim``, ``num_head``, ``head_dim``, ``num_layer``,
``seq_len``, ``vocab_size``) and the ``llm`` generator's layer (``num_kv_head``, ``ffn_dim``,
``gated_ffn``, ``num_expert``, ``top_k``). ``params`` is the published parameter count the
shape is checked against (tests/test_presets.py writes the count out).

>>> m = MODELS["llama3-70b"]
>>> m.hidden, m.heads, m.kv_heads, m.head_dim
(8192, 64, 8, 128)
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from dfsearch.presets.sourced import Source, Sourced

__all__ = ["ModelPreset", "MODELS", "model_named"]


@dataclass(frozen=True, slots=True)
class ModelPreset:
    """A transformer's shape. ``gated``: SwiGLU FFN (gate, up, down); ``num_expert`` > 0:
    a mixture of experts with ``top_k`` experts per token; ``tied``: the LM head reuses the
    embedding table; ``learned_positions``: a position-embedding table of ``seq_len`` rows;
    ``biases``: GEMMs and norms carry biases (GPT-3) or not (Llama, Mixtral)."""

    name: str
    aliases: tuple[str, ...]
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    gated: bool
    shape_source: Source
    shape_quote: str
    seq_len: Sourced  #: the sequence length of the cited training run (the workload default)
    params: Sourced  #: published parameter count, billions
    num_expert: int = 0
    top_k: int = 0
    tied: bool = False
    learned_positions: bool = False
    biases: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def sourced(self) -> tuple[Sourced, ...]:
        return (self.seq_len, self.params)


_LLAMA3 = Source("Llama Team, AI @ Meta, 'The Llama 3 Herd of Models' (2024), Table 3",
                 "https://arxiv.org/abs/2407.21783")
_LLAMA3_QUOTE = ("Layers 32 80 126 / Model Dimension 4,096 8192 16,384 / FFN Dimension 14,336 "
                 "28,672 53,248 / Attention Heads 32 64 128 / Key/Value Heads 8 8 8 / "
                 "Vocabulary Size 128,000")
_LLAMA2 = Source("jychen21/Habana-LLM-Viewer, models.py (mirrors the Hugging Face "
                 "meta-llama/Llama-2 configs; vocabulary from a printed LlamaForCausalLM, "
                 "'Embedding(32000, 4096)')",
                 "https://github.com/jychen21/Habana-LLM-Viewer/blob/"
                 "26f17077a584a5ae3c9bfc1295151b1882344caf/models.py")
_NEMO = Source("NVIDIA NeMo, docs/source/performance/performance_summary.md (NeMo 24.07 "
               "pre-training table, DGX-H100)",
               "https://github.com/NVIDIA/NeMo/blob/070a0bb168d405d653b9734c0017cf5078e77c0d/"
               "docs/source/performance/performance_summary.md")
_MEGATRON = Source("D. Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU "
                   "Clusters Using Megatron-LM', SC'21, section 5.3.2 and Table 2",
                   "https://arxiv.org/abs/2104.04473")
_MIXTRAL = Source("Hugging Face config of mistralai/Mixtral-8x7B-v0.1 (read via public training "
                  "configs that reproduce it)",
                  "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json")
_MIXTRAL_SIZE = Source("Mistral AI, 'Mixtral of experts' (2023), as quoted by the "
                       "nosana-ci/pipeline-templates Mixtral-8x7B-Instruct README",
                       "https://mistral.ai/news/mixtral-of-experts/")
_HF_7B = Source("Hugging Face meta-llama/Llama-2-7b-hf parameter count (as printed by PEFT's "
                "print_trainable_parameters in public notebooks)",
                "https://huggingface.co/meta-llama/Llama-2-7b-hf")


def _b(value: float, source: Source, quote: str, note: str = "") -> Sourced:
    return Sourced(value, "count", source, quote, note)


def _llama3(name: str, size: float, layers: int, hidden: int, heads: int, ffn: int,
            aliases: tuple[str, ...], seq_quote: str, size_quote: str) -> ModelPreset:
    return ModelPreset(
        name=name, aliases=aliases, layers=layers, hidden=hidden, heads=heads, kv_heads=8,
        ffn=ffn, vocab=128000, gated=True, shape_source=_LLAMA3, shape_quote=_LLAMA3_QUOTE,
        seq_len=Sourced(8192, "count", _NEMO if size < 400 else _LLAMA3, seq_quote,
                        "pre-training sequence length (long-context training later extends it)"),
        params=_b(size, _NEMO if size < 400 else _LLAMA3, size_quote,
                  "the size in the model's name; the paper's vocabulary is 128,000 tokens "
                  "(Hugging Face's config: 128,256)"),
    )


def _llama2(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int,
            params: Sourced, seq_quote: str) -> ModelPreset:
    return ModelPreset(
        name=name, aliases=(name.replace("llama2", "llama-2"),), layers=layers, hidden=hidden,
        heads=heads, kv_heads=kv, ffn=ffn, vocab=32000, gated=True, shape_source=_LLAMA2,
        shape_quote=(f'"hidden_size": {hidden}, "num_heads_q": {heads}, "num_heads_kv": {kv}, '
                     f'"intermediate_size": {ffn}, "mlp_with_gate": True, "num_layers_mlp": '
                     f"{layers}"),
        seq_len=Sourced(4096, "count", _NEMO, seq_quote, "pre-training sequence length"),
        params=params,
    )


def _catalogue() -> MappingProxyType:
    n3 = "| LLAMA3-{} | {} | 128 | 1 | 8192 |"
    n2 = "| LLAMA2-{} | {} | 128 | 1 | 4096 |"
    models = (
        _llama2("llama2-7b", 32, 4096, 32, 32, 11008,
                _b(6.738415616, _HF_7B, "all params: 6,738,415,616"), n2.format("7B", 8)),
        _llama2("llama2-13b", 40, 5120, 40, 40, 13824,
                _b(13, _NEMO, "| LLAMA2-13B |", "the size in the model's name"),
                n2.format("13B", 16)),
        _llama2("llama2-70b", 80, 8192, 64, 8, 28672,
                _b(70, _NEMO, "| LLAMA2-70B |", "the size in the model's name"),
                n2.format("70B", 64)),
        _llama3("llama3-8b", 8, 32, 4096, 32, 14336, ("llama3.1-8b", "llama-3-8b",
                "llama-3.1-8b"), n3.format("8B", 8), "| LLAMA3-8B |"),
        _llama3("llama3-70b", 70, 80, 8192, 64, 28672, ("llama3.1-70b", "llama3.3-70b",
                "llama-3-70b", "llama-3.1-70b"), n3.format("70B", 64), "| LLAMA3-70B |"),
        _llama3("llama3-405b", 405, 126, 16384, 128, 53248, ("llama3.1-405b", "llama-3.1-405b"),
                "8,192 8 1 16 64 8,192 32 16M 430 43%",
                "Llama 3 405B is trained on up to 16K H100 GPUs"),
        ModelPreset(
            name="gpt3-175b", aliases=("gpt-3-175b", "gpt3"), layers=96, hidden=12288, heads=96,
            kv_heads=96, ffn=4 * 12288, vocab=51200, gated=False, shape_source=_MEGATRON,
            shape_quote="96 layers, 96 attention heads, hidden size of 12288",
            seq_len=Sourced(2048, "count", _MEGATRON, "PTD-P | 174.6 | 96 | 1536 | 384 |",
                            "sequence length 2048 in the paper's GPT runs"),
            params=_b(174.6, _MEGATRON, "PTD-P | 174.6 | 96 | 1536 | 384 | 1 | 153 | 84",
                      "Megatron's count of GPT-3 175B with a vocabulary padded to 51,200"),
            tied=True, learned_positions=True, biases=True),
        ModelPreset(
            name="mixtral-8x7b", aliases=("mixtral",), layers=32, hidden=4096, heads=32,
            kv_heads=8, ffn=14336, vocab=32000, gated=True, shape_source=_MIXTRAL,
            shape_quote=("hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32, "
                         "num_experts_per_tok: 2, num_hidden_layers: 32, num_key_value_heads: 8, "
                         "num_local_experts: 8, vocab_size: 32000"),
            seq_len=Sourced(32768, "count", _MIXTRAL, "max_position_embeddings: 32768",
                            "the context window (no pre-training length was published)"),
            params=_b(46.7, _MIXTRAL_SIZE, "46.7B total parameters (12.9B active parameters)"),
            num_expert=8, top_k=2),
    )
    return MappingProxyType({m.name: m for m in models})


#: model preset name -> preset
MODELS = _catalogue()


def model_named(name: str) -> ModelPreset | None:
    """The model called ``name`` or one of its aliases (case-insensitive), else None."""
    key = name.lower()
    return next((m for m in MODELS.values() if key == m.name or key in m.aliases), None)
