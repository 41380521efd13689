"""names.py [--source RESNET_PY VERSION] MODEL...: torchvision's state_dict of
each model, one tensor a line (name and shape), as
tests/netc/torchvision/MODEL.names (check_names.sh compares netc's parameters
and state with these files, without torch).

    python3 names.py resnext50_32x4d > resnext50_32x4d.names

uses the installed torch and torchvision.  Without torch,

    python3 names.py --source torchvision/models/resnet.py 0.29.2 resnext50_32x4d

runs torchvision's own resnet.py (e.g. unzipped from its wheel) on a stand-in
for torch.nn that records only the shapes each module registers: the same
names and shapes, in the same order.  The checked-in files were made so."""
import math
import re
import sys
import types
from collections import OrderedDict

HEADER = "# torchvision {}: models.{}(weights=None).state_dict(), one tensor a line: name and shape"


def stand_in_nn():
    """Module, Conv2d, BatchNorm2d, Linear, Sequential and the parameterless
    layers of torch.nn, keeping PyTorch's state_dict order: a module's own
    parameters, then its buffers, then its children's in registration order."""
    nn = types.ModuleType("torch.nn")

    class Module:
        def __init__(self):
            for k in ("_m", "_t"):
                object.__setattr__(self, k, OrderedDict())

        def __setattr__(self, k, v):
            if isinstance(v, Module):
                self._m[k] = v
            object.__setattr__(self, k, v)

        def tensor(self, k, *shape):
            self._t[k] = shape
            object.__setattr__(self, k, types.SimpleNamespace(shape=shape))

        def modules(self):
            yield self
            for m in self._m.values():
                yield from m.modules()

        def state_dict(self, prefix=""):
            out = OrderedDict((prefix + k, s) for k, s in self._t.items())
            for k, m in self._m.items():
                out.update(m.state_dict(prefix + k + "."))
            return out

    class Conv2d(Module):
        def __init__(self, cin, cout, kernel_size, stride=1, padding=0, groups=1, bias=True, dilation=1):
            super().__init__()
            self.tensor("weight", cout, cin // groups, kernel_size, kernel_size)
            if bias:
                self.tensor("bias", cout)
            else:
                object.__setattr__(self, "bias", None)

    class BatchNorm2d(Module):
        def __init__(self, c):
            super().__init__()
            for k in ("weight", "bias", "running_mean", "running_var"):
                self.tensor(k, c)
            self.tensor("num_batches_tracked")

    class Linear(Module):
        def __init__(self, i, o, bias=True):
            super().__init__()
            self.tensor("weight", o, i)
            self.tensor("bias", o)

    class Sequential(Module):
        def __init__(self, *ms):
            super().__init__()
            for i, m in enumerate(ms):
                setattr(self, str(i), m)

    class Layer(Module):
        def __init__(self, *a, **k):
            super().__init__()

    nn.Module, nn.Conv2d, nn.BatchNorm2d, nn.Linear, nn.Sequential = Module, Conv2d, BatchNorm2d, Linear, Sequential
    nn.ReLU = nn.MaxPool2d = nn.AdaptiveAvgPool2d = Layer
    nn.GroupNorm = type("GroupNorm", (Module,), {})
    nn.init = types.SimpleNamespace(kaiming_normal_=lambda *a, **k: None, constant_=lambda *a, **k: None)
    return nn


def from_source(path):
    """The model builders of torchvision's resnet.py at path, run without torch."""
    torch = types.ModuleType("torch")
    torch.nn = stand_in_nn()
    torch.Tensor = object
    sys.modules["torch"], sys.modules["torch.nn"] = torch, torch.nn
    src = re.sub(r"^from \.\.?[\w.]* import .*$", "", open(path).read(), flags=re.M)

    class WeightsEnum:
        @classmethod
        def verify(cls, w):
            return w

    ns = {"__name__": "resnet", "Weights": lambda **k: None, "WeightsEnum": WeightsEnum,
          "register_model": lambda *a, **k: (lambda f: f), "handle_legacy_interface": lambda **k: (lambda f: f),
          "_IMAGENET_CATEGORIES": [], "ImageClassification": lambda **k: None, "_log_api_usage_once": lambda m: None,
          "_ovewrite_named_param": lambda kw, k, v: kw.__setitem__(k, v)}
    exec(compile(src, path, "exec"), ns)
    return lambda name: OrderedDict((k, tuple(s)) for k, s in ns[name](weights=None).state_dict().items())


def main(argv):
    if argv[:1] == ["--source"]:
        build, version, names = from_source(argv[1]), argv[2], argv[3:]
    else:
        import torchvision
        version, names = torchvision.__version__, argv

        def build(name):
            sd = torchvision.models.get_model(name, weights=None).state_dict()
            return OrderedDict((k, tuple(t.shape)) for k, t in sd.items())

    for name in names:
        sd = build(name)
        print(HEADER.format(version, name))
        for k, s in sd.items():
            print(k, "[" + ",".join(map(str, s)) + "]")
        params = sum(math.prod(s) for k, s in sd.items() if not re.search(r"running_|num_batches", k))
        print(f"{name}: {params} parameters", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
