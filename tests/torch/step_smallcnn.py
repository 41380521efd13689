"""step_smallcnn.py - `netrun step` end to end without torch: random
smallcnn weights (names and shapes from the model's IR after dce) and a
batch, written here; one step; the outputs must all be there with the
right shapes, finite, and the update must have moved the weights.

usage: step_smallcnn.py NETC NETRUN ROOT WORKDIR
"""
import math
import random
import re
import subprocess
import sys

import st_io

BATCH, CLASSES = 3, 10


def weights_of(netc, model):
    """[(name, kind, shape)] of every param and state, KCRS, from the dce dump."""
    ir = subprocess.run([netc, model, "--print-after=dce", "--no-loc"], check=True,
                        capture_output=True, text=True).stdout
    out = []
    for m in re.finditer(r"^\s*(param|state) @(\S+) : f32\[([0-9,]*)\]", ir, re.M):
        out.append((m.group(2), m.group(1), [int(d) for d in m.group(3).split(",") if d]))
    return out


def main():
    netc, netrun, root, work = sys.argv[1:5]
    model = f"{root}/models/smallcnn.net"
    rng = random.Random(5)
    weights = weights_of(netc, model)
    fails = []
    if len(weights) < 10:
        fails.append(f"only {len(weights)} weights in the dump")
    tensors = {}
    for name, _, shape in weights:
        n = st_io.numel(shape)
        if name.endswith("running_var"):
            vals = [1.0 + rng.random() for _ in range(n)]
        else:
            vals = [rng.gauss(0, 0.3) for _ in range(n)]
        tensors[name] = ("F32", shape, st_io.pack("F32", vals))
    tensors["bn1.num_batches_tracked"] = ("I64", [], st_io.pack("I64", [0]))
    st_io.write(f"{work}/w.safetensors", tensors)
    image = [rng.gauss(0, 1) for _ in range(BATCH * 28 * 28)]
    labels = [rng.randrange(CLASSES) for _ in range(BATCH)]
    st_io.write(f"{work}/in.safetensors", {"image": ("F32", [BATCH, 1, 28, 28], st_io.pack("F32", image)),
                                           "label": ("I64", [BATCH], st_io.pack("I64", labels))})
    for precision in ("fp32", "fp16"):
        out = f"{work}/out_{precision}.safetensors"
        r = subprocess.run([netrun, "step", model, "--weights", f"{work}/w.safetensors", "--inputs",
                            f"{work}/in.safetensors", "--out", out, "--lr", "0.5", "--loss-scale", "128",
                            "--precision", precision], capture_output=True, text=True)
        print(r.stdout.strip(), r.stderr.strip())
        if r.returncode != 0:
            fails.append(f"{precision}: netrun step exited {r.returncode}")
            continue
        res = st_io.read(out)
        loss = st_io.floats(res["loss"])
        if res["loss"][1] != [] or not math.isfinite(loss[0]) or loss[0] <= 0:
            fails.append(f"{precision}: loss {res['loss'][1]} {loss}")
        if res["logits"][:2] != ("F32", [BATCH, CLASSES]):
            fails.append(f"{precision}: logits {res['logits'][:2]}")
        for name, kind, shape in weights:
            for key in [name] + ([name + ".grad", name + ".momentum_buffer"] if kind == "param" else []):
                t = res.get(key)
                if t is None or t[:2] != ("F32", shape):
                    fails.append(f"{precision}: '{key}' is {t[:2] if t else 'missing'}, want F32{shape}")
                elif not all(math.isfinite(v) for v in st_io.floats(t)):
                    fails.append(f"{precision}: '{key}' is not finite")
            if kind == "param" and name in res:
                before, after = st_io.floats(tensors[name]), st_io.floats(res[name])
                grad, buf = st_io.floats(res[name + ".grad"]), st_io.floats(res[name + ".momentum_buffer"])
                # first SGD step from a zero buffer: buf = g + wd*w, w' = w - lr*buf
                err = max(abs(b - (g + 1e-4 * w)) for b, g, w in zip(buf, grad, before))
                err2 = max(abs(a - (w - 0.5 * b)) for a, w, b in zip(after, before, buf))
                if err > 1e-4 or err2 > 1e-4:
                    fails.append(f"{precision}: '{name}' update does not follow SGD ({err:.3g}, {err2:.3g})")
                if all(g == 0 for g in grad):
                    fails.append(f"{precision}: '{name}.grad' is all zero")
        extra = set(res) - {"loss", "logits"} - {w[0] for w in weights} - \
            {w[0] + s for w in weights if w[1] == "param" for s in (".grad", ".momentum_buffer")} - \
            ({"loss_scale", "loss_scale_good_steps"} if precision == "fp16" else set())
        if extra:
            fails.append(f"{precision}: unexpected outputs {sorted(extra)}")
    # a weights file that does not fit is refused, naming the tensor
    bad = dict(tensors)
    del bad["fc.bias"]
    st_io.write(f"{work}/bad.safetensors", bad)
    r = subprocess.run([netrun, "step", model, "--weights", f"{work}/bad.safetensors", "--inputs",
                        f"{work}/in.safetensors", "--out", f"{work}/bad_out.safetensors"],
                       capture_output=True, text=True)
    if r.returncode != 1 or "missing 'fc.bias'" not in r.stderr:
        fails.append(f"missing fc.bias: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    for f in fails:
        print("FAIL:", f)
    print(f"{'FAILED' if fails else 'ok'}: netrun step on smallcnn ({len(fails)} problems)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
