"""`minfer --list-devices` (llama.cpp's flag): one line per device with its name, description,
memory and whether it is a software device, with any command; here lavapipe (scripts/setup.sh
installs it) must be listed as Vulkan0, software. Checked against vulkaninfo, Khronos' own tool,
where it is installed."""
import os
import re
import shutil
import subprocess

MINFER = os.environ.get("MINFER_BIN", "")
LINE = re.compile(r"^  (Vulkan\d+): (.+) \((\d+) MiB(, software)?\)$")


def run(*args):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, timeout=120)


def devices(out):
    lines = out.splitlines()
    assert lines and lines[0] == "Available devices:", out
    return [LINE.match(l) for l in lines[1:]]


def test_lists_lavapipe_as_a_software_vulkan_device():
    r = run("--list-devices")
    assert r.returncode == 0, r.stderr
    found = devices(r.stdout)
    assert found and all(found), r.stdout
    names = [m.group(1) for m in found]
    assert names == [f"Vulkan{i}" for i in range(len(names))], names
    lava = [m for m in found if m.group(2).startswith("llvmpipe")]
    assert lava and lava[0].group(4) == ", software" and int(lava[0].group(3)) > 0, r.stdout
    if shutil.which("vulkaninfo"):
        info = subprocess.run(["vulkaninfo", "--summary"], capture_output=True, text=True, timeout=120).stdout
        want = re.findall(r"deviceName\s*=\s*(.+)", info)
        assert [m.group(2) for m in found] == [w.strip() for w in want], (r.stdout, want)


def test_any_command_takes_it():
    for args in (["serve", "--list-devices"], ["bench", "x.gguf", "--list-devices"], ["no-such-model", "--list-devices"]):
        r = run(*args)
        assert r.returncode == 0 and r.stdout.startswith("Available devices:\n"), (args, r.stdout, r.stderr)
