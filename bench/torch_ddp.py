# bench/torch_ddp.py: PyTorch's data-parallel training throughput of a
# torchvision network, one process per GPU, for bench/scaling.sh.
#
#   torchrun --standalone --nproc_per_node N bench/torch_ddp.py --config bf16_compile
#
# Each rank trains DistributedDataParallel(model) on its own synthetic batch
# held on its GPU (channels_last, SGD with momentum), warm-up steps first,
# then --steps timed between CUDA events after a barrier.  Configurations:
# bf16_compile (torch.compile of the DDP model under bf16 autocast: the
# fastest on one H200), fp16_compile (the same with fp16 and a GradScaler),
# amp_fp16 (eager, fp16 autocast and a GradScaler).  Rank 0 prints one JSON
# line: the configuration, the world size, every rank's images/s, their sum
# and the largest peak memory in GiB.
import argparse
import json
import os

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel

CONFIGS = ("bf16_compile", "fp16_compile", "amp_fp16")


def main():
    ap = argparse.ArgumentParser(description="DDP training throughput (run under torchrun)")
    ap.add_argument("--config", choices=CONFIGS, default="bf16_compile")
    ap.add_argument("--arch", default="resnet50")
    ap.add_argument("--batch", type=int, default=256, help="images per GPU")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    a = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)

    model = getattr(torchvision.models, a.arch)().cuda().to(memory_format=torch.channels_last)
    ddp = DistributedDataParallel(model, device_ids=[local], gradient_as_bucket_view=True)
    net = torch.compile(ddp) if a.config.endswith("_compile") else ddp
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    dtype = torch.bfloat16 if a.config.startswith("bf16") else torch.float16
    scaler = torch.amp.GradScaler() if dtype == torch.float16 else None
    crit = torch.nn.CrossEntropyLoss()
    gen = torch.Generator(device="cuda").manual_seed(1000 + rank)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", generator=gen).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device="cuda", generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype):
            loss = crit(net(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(a.steps):
        step()
    end.record()
    torch.cuda.synchronize()
    rate = a.batch * a.steps * 1000.0 / start.elapsed_time(end)
    peak = torch.cuda.max_memory_allocated() / 2**30
    got = [None] * world
    dist.all_gather_object(got, (rate, peak))
    if rank == 0:
        print(json.dumps({"config": a.config, "arch": a.arch, "world": world, "batch_per_gpu": a.batch,
                          "per_rank": [round(r, 1) for r, _ in got], "images_per_s": round(sum(r for r, _ in got), 1),
                          "peak_gib": round(max(p for _, p in got), 2), "torch": torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
