#!/usr/bin/env python3
"""make_hf_fixture.py - builds the tiny Hugging Face Llama in tests/models/hf/tiny_llama and its references.

    python3 tests/models/make_hf_fixture.py            # writes tests/models/hf/tiny_llama/
    python3 tests/models/make_hf_fixture.py --out DIR

What it writes, and why:
- A Llama (hidden 64, 2 layers, 4 heads, 2 key/value heads, vocab 300, tied embeddings) with
  seeded random weights, saved by `save_pretrained` in bf16 safetensors: the format a user's
  checkpoint has. Tied embeddings make the checkpoint hold `model.embed_tokens.weight` only,
  so loading it exercises the tie rule of megatrain-run --weights (docs/runtime.md).
- A byte-level BPE tokenizer trained with the `tokenizers` package on text generated here
  (a few KB, seeded), wrapped as a fast tokenizer with <s> and </s>: tokenizer.json and
  tokenizer_config.json, which --export-hf copies.
- references/: `input_ids.npy` (int64 [2, 32], the tokenized text), `first_loss.npy`
  (PyTorch's next-token cross-entropy of the saved weights upcast to fp32, on those ids)
  and `logits.npy` (the same forward's logits, fp32), for tests/e2e/hf_weights.sh.
- README.md with the versions of torch, transformers and tokenizers that made it.

Deterministic for a given set of versions; the files are small (about 100 KB).
"""
import argparse
import json
import os
import random

VOCAB = 300
BATCH, SEQ = 2, 32

WORDS = ("the a model trains on one GPU with state in host memory and on disk while weights stream "
         "in layer by layer gradients flow out optimizer updates overlap backward compute tokens per "
         "step loss falls slowly then faster plans are static verified before they run").split()


def corpus(seed=0, sentences=300):
    """A few KB of sentences drawn from WORDS, seeded: enough for the BPE merges to be stable."""
    rng = random.Random(seed)
    lines = []
    for _ in range(sentences):
        n = rng.randint(5, 14)
        words = [rng.choice(WORDS) for _ in range(n)]
        lines.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?"]))
    return lines


def train_tokenizer(lines, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)
    return fast


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf", "tiny_llama"))
    args = p.parse_args()

    import numpy as np
    import tokenizers
    import torch
    import transformers as tf

    os.makedirs(args.out, exist_ok=True)
    lines = corpus()
    tokenizer = train_tokenizer(lines, args.out)
    vocab = len(tokenizer)

    config = tf.LlamaConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=176, max_position_embeddings=128,
                            tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                            eos_token_id=tokenizer.eos_token_id, rms_norm_eps=1e-5)
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(config)
    with torch.no_grad():
        # Norm weights away from 1, so a loader that ignores them is caught.
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
    model = model.to(torch.bfloat16)
    model.generation_config = tf.GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                                                  eos_token_id=tokenizer.eos_token_id)
    model.save_pretrained(args.out, safe_serialization=True)

    # References: the saved weights, upcast to fp32, as megatrain loads them.
    ids = tokenizer(" ".join(lines), add_special_tokens=True)["input_ids"][:BATCH * SEQ]
    ids = torch.tensor(ids, dtype=torch.int64).reshape(BATCH, SEQ)
    ref = tf.AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32)
    ref.eval()
    with torch.no_grad():
        out = ref(input_ids=ids, labels=ids)
    refs = os.path.join(args.out, "references")
    os.makedirs(refs, exist_ok=True)
    np.save(os.path.join(refs, "input_ids.npy"), ids.numpy())
    np.save(os.path.join(refs, "first_loss.npy"), np.array(out.loss.item(), dtype=np.float64))
    np.save(os.path.join(refs, "logits.npy"), out.logits.float().numpy())

    versions = {"torch": torch.__version__, "transformers": tf.__version__,
                "tokenizers": tokenizers.__version__, "numpy": np.__version__}
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("# tiny_llama: a Hugging Face Llama for the weights tests\n\n"
                "Made by `python3 tests/models/make_hf_fixture.py` (run it again to remake it).\n"
                "A LlamaForCausalLM (hidden 64, 2 layers, 4 heads, 2 key/value heads, intermediate 176,\n"
                f"vocab {vocab}, tied embeddings) with seeded random weights, saved by `save_pretrained` as\n"
                "bf16 safetensors, and a byte-level BPE tokenizer trained on the script's generated text.\n\n"
                "references/: input_ids.npy (int64 [2, 32]), first_loss.npy (PyTorch's next-token\n"
                "cross-entropy of these weights upcast to fp32), logits.npy (that forward's logits).\n\n"
                "Versions:\n\n")
        for k, v in versions.items():
            f.write(f"- {k} {v}\n")
    print(f"wrote {args.out}: vocab {vocab}, first loss {out.loss.item():.6f}, versions {json.dumps(versions)}")


if __name__ == "__main__":
    main()
