"""Fetches ONNX Runtime's shared libraries from PyPI wheels (build stage).

    python3 fetch-ort.py DEST REQUIREMENT...

`pip download --no-deps` gets the wheels of the requirements (binaries
only, for this interpreter and platform: list every wheel, pinned); the
shared libraries of the `onnxruntime*` wheels (`onnxruntime/capi/lib*.so*`)
and of NVIDIA's runtime wheels (`nvidia/*/lib/lib*.so*`) are written flat
into DEST.
"""
import glob
import os
import subprocess
import sys
import tempfile
import zipfile


def wanted(name: str) -> bool:
    base = os.path.basename(name)
    if not base.startswith("lib") or ".so" not in base:
        return False
    parts = name.split("/")
    if parts[0] == "onnxruntime" and parts[1:2] == ["capi"]:
        return True
    return parts[0] == "nvidia" and len(parts) >= 3 and parts[-2] == "lib"


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    dest, requirements = sys.argv[1], sys.argv[2:]
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
             "--no-cache-dir", "--no-deps", "--only-binary=:all:", "-d", tmp, *requirements],
            check=True,
        )
        count = 0
        for wheel in sorted(glob.glob(os.path.join(tmp, "*.whl"))):
            if not os.path.basename(wheel).startswith(("onnxruntime", "nvidia")):
                continue
            with zipfile.ZipFile(wheel) as z:
                for member in z.namelist():
                    if not wanted(member):
                        continue
                    target = os.path.join(dest, os.path.basename(member))
                    with z.open(member) as src, open(target, "wb") as out:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
                    count += 1
    if count == 0:
        print(f"no ONNX Runtime library in the wheels of {requirements}", file=sys.stderr)
        return 1
    for name in sorted(os.listdir(dest)):
        print(f"{name} {os.path.getsize(os.path.join(dest, name))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
