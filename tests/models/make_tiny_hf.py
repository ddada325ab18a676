#!/usr/bin/env python3
"""make_tiny_hf.py - writes a tiny Hugging Face Llama directory, as save_pretrained does, for `megatrain train` tests.

    python3 tests/models/make_tiny_hf.py --out DIR

DIR gets config.json, model.safetensors (bf16) and a byte-level BPE tokenizer
(tokenizer.json, tokenizer_config.json, special_tokens_map.json) trained on a fixed
text, with <s> and </s>: everything `megatrain train --model DIR` reads; and that text
as DIR/sample.txt, a corpus that does not change (the README trains on it). Seeded, so
the same versions of torch, transformers and tokenizers give the same files.
Needs torch, transformers and tokenizers.
"""
import argparse
import os

TEXT = """The quick brown fox jumps over the lazy dog. A model that does not fit in
memory trains one layer at a time, its weights streamed in and its gradients out.
Every tensor has a home: the device, pinned host memory or the disk.
""" * 4


def make_tokenizer(vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator([TEXT], trainer=trainer)
    return tokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--vocab", type=int, default=320)
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=make_tokenizer(args.vocab), bos_token="<s>",
                                        eos_token="</s>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=88, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    with open(os.path.join(args.out, "sample.txt"), "w") as f:
        f.write(TEXT * 8)
    print(f"make_tiny_hf.py: wrote {args.out} (vocab {len(tokenizer)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, bf16)")


if __name__ == "__main__":
    main()
