"""Reading a checkpoint written by this trainer (best.pt, last.pt, epochN.pt), for the scripts that
turn it into another trainer's checkpoint (to_yolov5.py, to_ultralytics.py). Each function ends the
program with `fail(message)` on bad input."""
import os
import zipfile


def read(path, fail):
    """The checkpoint's dict, with its 'model' state_dict."""
    import torch
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        fail(f"{path}: not a checkpoint written by train (not a torch.save zip archive)")
    try:  # this trainer's checkpoints hold only tensors, numbers and strings
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any unreadable file ends the same way
        fail(f"{path}: not a checkpoint written by train (it holds pickled objects)")
    if not isinstance(ck, dict) or not isinstance(ck.get("model"), dict):
        fail(f"{path}: no 'model' weights dict; is it a checkpoint written by train?")
    return ck


def last_layer(state_dict):
    """The index of the model's last layer, its detection head."""
    return max(int(k.split(".")[1]) for k in state_dict if k.startswith("model."))


def load_weights(model, state_dict, fail, hint=""):
    """Loads the weights (as float32) into model; every entry must fit."""
    try:
        missing, unexpected = model.load_state_dict(
            {k: v.float() for k, v in state_dict.items()}, strict=False)
    except RuntimeError as e:  # shapes differ: another model size
        missing, unexpected = [str(e).splitlines()[-1].strip()], []
    if missing or unexpected:
        fail(f"the weights do not fit the model YAML: missing {missing[:5]}, unexpected "
             f"{unexpected[:5]}{hint}")


def save(obj, path):
    """torch.save through a temporary file, so path is never left half written."""
    import torch
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)
