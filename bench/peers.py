#!/usr/bin/env python3
"""peers.py - the PyTorch peers megatrain is measured against, on one GPU.

    python3 bench/peers.py --mode gpu            [--microbatches 4] [--steps 10] [--warmup 2]
    python3 bench/peers.py --mode fsdp2-offload  [--microbatches 4] [--steps 6]  [--warmup 2]
    python3 bench/peers.py --mode compile        [--microbatches 4] [--steps 10] [--warmup 3]
    python3 bench/peers.py --mode deepspeed-offload [--microbatches 4] [--steps 5] [--warmup 2]
    python3 bench/peers.py --mode gpu --dry-run  # the config and parameter count, no GPU

The model is transformers' LlamaForCausalLM built from a config (random init, seeded),
by default the Llama-shaped 1.36B model of the project's device notes: hidden 2048,
24 layers, 16 heads, intermediate 5632, vocabulary 32000, untied embeddings.

--mode gpu: everything on the GPU. fp32 master weights, bf16 autocast, SDPA attention,
  torch's fused AdamW on the GPU.
--mode compile: --mode gpu with the model wrapped in torch.compile (default options); the
  first steps compile, so give it a --warmup of 3 or more.
--mode deepspeed-offload: DeepSpeed ZeRO-3 in a one-rank group with parameters and optimizer
  state offloaded to pinned CPU memory (offload_param, offload_optimizer), bf16, DeepSpeed's
  CPU AdamW (built at first use). The model is built under deepspeed.zero.Init, so its
  parameters are partitioned as they are made. DeepSpeed is not a test requirement: on the
  GPU machine bench/deepspeed_setup.sh installs it from packages fetched on a machine with
  a network.
--mode fsdp2-offload: FSDP2 (`fully_shard`, per decoder layer and the root) with
  CPUOffloadPolicy and a bf16 MixedPrecisionPolicy (fp32 gradient reduction) in a
  single-process group of world size 1: parameters, gradients and AdamW state live in
  pinned host memory, torch's fused AdamW runs on the CPU.

Every optimizer step runs --microbatches forward/backward passes of [batch, seq] random
tokens (gradient accumulation, each loss scaled by 1/N), then one AdamW step. The first
--warmup steps are not timed. Prints one JSON line (and writes it to --json when given):
median step time, tokens/s, model TFLOP/s (6 x params x tokens / step time), peak
device memory (torch.cuda.max_memory_allocated and max_memory_reserved since the model
was set up), parameter count, every step's time and the losses.
"""
import argparse
import json
import os
import statistics
import sys
import time

MODES = ["gpu", "compile", "fsdp2-offload", "fsdp2-offload-default", "deepspeed-offload"]
LLAMA_1B3 = dict(hidden=2048, layers=24, heads=16, intermediate=5632, vocab=32000)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=MODES, required=True,
                   help="fsdp2-offload-default: FSDP2 with CPU offload and torch's default "
                        "(not fused) AdamW on the host, as a plain torch.optim.AdamW(params) runs")
    p.add_argument("--hidden", type=int, default=LLAMA_1B3["hidden"])
    p.add_argument("--layers", type=int, default=LLAMA_1B3["layers"])
    p.add_argument("--heads", type=int, default=LLAMA_1B3["heads"])
    p.add_argument("--intermediate", type=int, default=LLAMA_1B3["intermediate"])
    p.add_argument("--vocab", type=int, default=LLAMA_1B3["vocab"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--microbatches", type=int, default=1, help="gradient accumulation (default 1)")
    p.add_argument("--steps", type=int, default=10, help="optimizer steps, warm-up included (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="first steps not timed (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--precision", choices=["bf16", "tf32", "fp32"], default="bf16",
                   help="bf16: bf16 autocast (gpu) or bf16 parameters (fsdp2-offload); "
                        "tf32/fp32: fp32 compute with or without TF32 matmuls (default bf16)")
    p.add_argument("--dry-run", action="store_true",
                   help="build the model on the meta device, print config and parameter count, exit")
    p.add_argument("--json", help="also write the result line to this file")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: --mode gpu's loop on the CPU, to check the script at a tiny config "
                        "where there is no GPU (no memory figures)")
    args = p.parse_args(argv)
    for name in ("hidden", "layers", "heads", "intermediate", "vocab", "batch", "seq", "microbatches", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.device == "cpu" and args.mode not in ("gpu", "compile"):
        p.error("--device cpu runs only --mode gpu's and --mode compile's loops")
    if not 0 <= args.warmup < args.steps:
        p.error(f"--warmup must be in [0, --steps): {args.warmup} of {args.steps}")
    return args


def llama_params(hidden, layers, intermediate, vocab, **_):
    """Parameters of an untied Llama with full multi-head attention: embeddings and
    lm_head, per layer q/k/v/o, gate/up/down and two RMSNorm weights, the final norm."""
    per_layer = 4 * hidden * hidden + 3 * hidden * intermediate + 2 * hidden
    return 2 * vocab * hidden + layers * per_layer + hidden


def make_config(args):
    import transformers as tf
    return tf.LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                          num_attention_heads=args.heads, num_key_value_heads=args.heads,
                          intermediate_size=args.intermediate, max_position_embeddings=args.seq,
                          tie_word_embeddings=False, use_cache=False, attention_dropout=0.0)


def build_model(args, device):
    import torch
    import transformers as tf
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = tf.LlamaForCausalLM._from_config(make_config(args), attn_implementation="sdpa",
                                                 dtype=torch.float32)
    model.config.use_cache = False
    model.train()
    return model


def dry_run(args):
    model = build_model(args, "meta")
    counted = sum(p.numel() for p in model.parameters())
    expected = llama_params(**vars(args))
    result = {"mode": args.mode, "dry_run": True, "params": counted, "params_formula": expected,
              "tokens_per_step": args.batch * args.seq * args.microbatches,
              "config": {k: getattr(args, k) for k in ("hidden", "layers", "heads", "intermediate", "vocab",
                                                       "batch", "seq", "microbatches", "precision")},
              "attn_implementation": model.config._attn_implementation}
    if counted != expected:
        raise SystemExit(f"peers.py: the model has {counted} parameters, the formula says {expected}")
    return result


def one_rank_env():
    """The environment of a process group of one rank on this machine."""
    import socket
    with socket.socket() as s:  # a free port for the one-rank rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)), ("RANK", "0"),
                       ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(key, value)


def setup_distributed():
    """A process group of one rank on this machine, for FSDP2."""
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(0)
    if not dist.is_initialized():
        one_rank_env()
        dist.init_process_group(backend="cpu:gloo,cuda:nccl", rank=0, world_size=1)
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cuda", (1,))


def prepare_deepspeed(args):
    """ZeRO-3 with parameters and optimizer state in pinned CPU memory, one rank."""
    import torch
    import transformers as tf
    try:
        import deepspeed
    except ImportError as error:
        raise SystemExit(f"peers.py: --mode deepspeed-offload needs deepspeed ({error}); "
                         "bench/deepspeed_setup.sh installs it offline")
    torch.cuda.set_device(0)
    one_rank_env()
    deepspeed.init_distributed(dist_backend="nccl")
    config = {
        "train_micro_batch_size_per_gpu": args.batch,
        "gradient_accumulation_steps": args.microbatches,
        "bf16": {"enabled": args.precision == "bf16"},
        "zero_optimization": {"stage": 3,
                              "offload_param": {"device": "cpu", "pin_memory": True},
                              "offload_optimizer": {"device": "cpu", "pin_memory": True}},
        "optimizer": {"type": "AdamW", "params": {"lr": args.lr, "betas": [args.beta1, args.beta2],
                                                  "eps": args.eps, "weight_decay": args.weight_decay}},
        "steps_per_print": 1 << 30,
    }
    torch.manual_seed(args.seed)
    with deepspeed.zero.Init(config_dict_or_path=config):
        model = tf.LlamaForCausalLM._from_config(make_config(args), attn_implementation="sdpa",
                                                 dtype=torch.float32)
    model.config.use_cache = False
    model.train()
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                   config=config)
    optimizer.kind = type(optimizer).__name__ + " (host: " + type(
        getattr(optimizer, "optimizer", optimizer)).__name__ + ")"
    return engine, optimizer


def prepare(args):
    """The model, its optimizer and the autocast context of the chosen mode."""
    import contextlib
    import torch
    dev = args.device
    if args.mode == "deepspeed-offload":
        engine, optimizer = prepare_deepspeed(args)
        return engine, optimizer, contextlib.nullcontext
    torch.backends.cuda.matmul.allow_tf32 = args.precision != "fp32"
    torch.backends.cudnn.allow_tf32 = args.precision != "fp32"
    adamw = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps, weight_decay=args.weight_decay)

    def make_optimizer(params):
        # torch's fused AdamW (on the GPU, or on the CPU for the offloaded states); the
        # result says which kind ran, should this torch refuse the fused one.
        params = list(params)
        if args.mode == "fsdp2-offload-default":
            optimizer = torch.optim.AdamW(params, **adamw)
            optimizer.kind = "default (foreach/for-loop)"
            return optimizer
        try:
            optimizer = torch.optim.AdamW(params, fused=True, **adamw)
            optimizer.kind = "fused"
        except (RuntimeError, ValueError) as error:
            print(f"peers.py: fused AdamW refused ({error}); using foreach", file=sys.stderr)
            optimizer = torch.optim.AdamW(params, foreach=True, **adamw)
            optimizer.kind = "foreach"
        return optimizer
    model = build_model(args, dev)
    if args.mode in ("gpu", "compile"):
        optimizer = make_optimizer(model.parameters())
        autocast = (lambda: torch.autocast(dev, dtype=torch.bfloat16)) if args.precision == "bf16" \
            else contextlib.nullcontext
        if args.mode == "compile":
            model = torch.compile(model)
        return model, optimizer, autocast
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    mesh = setup_distributed()
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    policy = dict(mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32),
                  offload_policy=CPUOffloadPolicy(pin_memory=True))
    for layer in model.model.layers:
        fully_shard(layer, **policy)
    fully_shard(model, **policy)  # the embeddings, final norm and lm_head
    # The sharded parameters now live in pinned host memory; so does the AdamW state.
    optimizer = make_optimizer(model.parameters())
    return model, optimizer, contextlib.nullcontext


def train(args):
    import torch
    dev = args.device
    cuda = dev == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("peers.py: no CUDA device (use --dry-run to check the config without one)")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    setup_start = time.perf_counter()
    model, optimizer, autocast = prepare(args)
    # ZeRO-3 partitions parameters as they are made: ds_numel is a parameter's full count.
    params = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
    generator = torch.Generator(device=dev)
    generator.manual_seed(args.seed)
    sync()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    setup_s = time.perf_counter() - setup_start

    tokens_per_step = args.batch * args.seq * args.microbatches
    times, losses = [], []
    for step in range(args.steps):
        batches = [torch.randint(0, args.vocab, (args.batch, args.seq), device=dev, generator=generator)
                   for _ in range(args.microbatches)]
        sync()
        start = time.perf_counter()
        total = 0.0
        if args.mode == "deepspeed-offload":
            # The engine scales each loss by 1 / gradient_accumulation_steps in backward and
            # steps the optimizer at the last micro-batch.
            for ids in batches:
                loss = model(input_ids=ids, labels=ids).loss
                model.backward(loss)
                model.step()
                total += loss.detach() / args.microbatches
        else:
            for ids in batches:
                with autocast():
                    loss = model(input_ids=ids, labels=ids).loss / args.microbatches
                loss.backward()
                total += loss.detach()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - start)
        losses.append(float(total))
        print(f"peers.py {args.mode}: step {step + 1}/{args.steps} loss {losses[-1]:.4f} "
              f"{times[-1]:.3f} s", file=sys.stderr, flush=True)

    timed = times[args.warmup:]
    median = statistics.median(timed)
    tokens_per_s = tokens_per_step / median
    return {
        "system": "pytorch-" + args.mode,
        "mode": args.mode,
        "precision": args.precision,
        "optimizer": "AdamW " + optimizer.kind + (" (host)" if args.mode.startswith("fsdp2-offload") else ""),
        "params": params,
        "tokens_per_step": tokens_per_step,
        "microbatches": args.microbatches,
        "batch": args.batch,
        "seq": args.seq,
        "steps": args.steps,
        "warmup": args.warmup,
        "median_step_s": median,
        "tokens_per_s": tokens_per_s,
        "model_tflops": 6.0 * params * tokens_per_s / 1e12,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
        "setup_s": setup_s,
        "step_times_s": times,
        "losses": losses,
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
        "gpu": torch.cuda.get_device_name(0) if cuda else "none (cpu)",
    }


def main(argv):
    args = parse_args(argv)
    result = dry_run(args) if args.dry_run else train(args)
    line = json.dumps(result)
    print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    if args.mode in ("fsdp2-offload", "fsdp2-offload-default", "deepspeed-offload") and not args.dry_run:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
