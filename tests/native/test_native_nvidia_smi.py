"""The mock nvidia-smi renders the real tool's layout per driver generation, and the
suite's parser reads every form it prints."""

from __future__ import annotations

import os

import pytest

from conftest import SEED_INVENTORY, run, tool
from gpushare_conformance.evidence.nvidia_smi import parse_nvidia_smi
from gpushare_conformance.sandbox import sandbox_env

# Lines of real captures (public issue threads), keyed by what they pin down.
REAL = {
    "470": {
        "header": "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |",
        "row1": "|   0  Tesla V100-SXM2...  On   | 00000000:00:09.0 Off |                    0 |",
        "row2": "| N/A   38C    P0    61W / 300W |    569MiB /  4309MiB |      2%      Default |",
        "rule": "|-------------------------------+----------------------+----------------------+",
        "procs": "|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |",
    },
    "535": {
        "header": "| NVIDIA-SMI 535.247.01             Driver Version: 535.247.01   CUDA Version: 12.2     |",
        "row1": "|   0  NVIDIA A10G                    Off | 00000000:00:1E.0 Off |                    0 |",
        "row2": "|  0%   26C    P0              60W / 300W |   8722MiB / 23028MiB |      0%      Default |",
        "rule": "|-----------------------------------------+----------------------+----------------------+",
        "procs": "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |",
    },
    "550": {
        "header": "| NVIDIA-SMI 550.135                Driver Version: 550.135        CUDA Version: 12.4     |",
        "row1": "|   0  Tesla P4                       Off |   00000000:86:00.0 Off |                  Off |",
        "row2": "| N/A   49C    P0             24W /   75W |    7719MiB /   8192MiB |      6%      Default |",
        "rule": "|-----------------------------------------+------------------------+----------------------+",
        "procs": "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
    },
    "580": {
        "rule": "+-----------------------------------------+------------------------+----------------------+",
    },
    "610": {
        "header": "| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |",
        "rule": "+-----------------------------------------+------------------------+----------------------+",
    },
}

REAL_HEADERS = {
    "535.247.01": REAL["535"]["header"],
    "550.135": REAL["550"]["header"],
    "570.133.20": "| NVIDIA-SMI 570.133.20             Driver Version: 570.133.20     CUDA Version: 12.8     |",
    "610.43.02": REAL["610"]["header"],
}

CASES = [
    ("440.33.01", "10.2", 79),
    ("470.82.01", "11.4", 79),
    ("535.247.01", "12.2", 89),
    ("550.135", "12.4", 91),
    ("570.133.20", "12.8", 91),
    ("580.65.06", "13.0", 91),
    ("610.43.02", "13.3", 91),
]


def bars(line: str) -> list[int]:
    return [i for i, c in enumerate(line) if c in "|+"]


def render(tmp_path, native_root, driver: str, cuda: str, isolation: bool = True) -> str:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f'driver_version: "{driver}"\ncuda_version: "{cuda}"\ngpus:\n'
        "  - name: Tesla V100-SXM2-16GB\n    memory_mib: 16160\n    pci_bus_id: 00000000:00:09.0\n"
        "  - name: NVIDIA A100-SXM4-40GB\n    memory_mib: 40536\n"
    )
    # The mock's process table of its own: the node-wide one lists the processes other
    # tests run on these physical cards meanwhile (pytest -n), which this node has not.
    base = dict(os.environ, GPUSHARE_MOCK_STATE_DIR=str(tmp_path / "state"))
    env = sandbox_env(
        inv,
        [0, 1],
        4096,
        isolation=isolation,
        base_env=base,
        usage_file=tmp_path / "usage",
        native_root=native_root,
    )
    proc = run([tool(native_root, "nvidia-smi")], env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("driver", "cuda", "width"), CASES)
def test_layout_matches_the_real_tool(tmp_path, native_root, driver, cuda, width):
    out = render(tmp_path, native_root, driver, cuda)
    lines = out.splitlines()
    assert lines[0].endswith("       ") and len(lines[0].rstrip()) == 24  # "Wed Dec  2 15:48:03 2026"
    assert all(len(line) == width for line in lines[1:]), [line for line in lines[1:] if len(line) != width]
    gen = driver.split(".")[0]
    real = REAL.get({"440": "470", "570": "550"}.get(gen, gen), {})
    if driver in REAL_HEADERS:  # a real capture of this very version exists
        assert lines[2] == REAL_HEADERS[driver]
    assert lines[3] == real["rule"]
    row1 = next(line for line in lines if line.startswith("|   0  "))
    row2 = lines[lines.index(row1) + 1]
    if "row1" in real:
        assert bars(row1) == bars(real["row1"]) and bars(row2) == bars(real["row2"])
    if "procs" in real and gen != "440":
        assert real["procs"] in lines
    has_mig_row = gen != "440"
    assert any(line.strip("| ").endswith("MIG M.") for line in lines) == has_mig_row
    name_cell = "Tesla V100-SXM2..." if width == 79 else "Tesla V100-SXM2-16GB"
    assert name_cell in row1
    assert "No running processes found" in out


@pytest.mark.parametrize(("driver", "cuda", "width"), CASES)
def test_parser_reads_every_generation(tmp_path, native_root, driver, cuda, width):
    report = parse_nvidia_smi(render(tmp_path, native_root, driver, cuda))
    assert report.format == "table"
    assert report.driver_version == driver and report.cuda_version == cuda
    assert [(g.index, g.memory_total_mib, g.memory_used_mib) for g in report.gpus] == [(0, 4096, 0), (1, 4096, 0)]
    bare = parse_nvidia_smi(render(tmp_path, native_root, driver, cuda, isolation=False))
    assert [g.memory_total_mib for g in bare.gpus] == [16160, 40536]


def test_exact_470_header_of_the_seed(tmp_path, native_root):
    lines = render(tmp_path, native_root, "470.161.03", "11.4").splitlines()
    assert lines[1:8] == [
        "+-----------------------------------------------------------------------------+",
        "| NVIDIA-SMI 470.161.03   Driver Version: 470.161.03   CUDA Version: 11.4     |",
        "|-------------------------------+----------------------+----------------------+",
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |",
        "|                               |                      |               MIG M. |",
        "|===============================+======================+======================|",
    ]
    assert lines[8] == "|   0  Tesla V100-SXM2...  On   | 00000000:00:09.0 Off |                    0 |"
    assert lines[9].endswith("|      0MiB /  4096MiB |      0%      Default |")


def test_query_list_and_errors(seed_env, native_root):
    smi = tool(native_root, "nvidia-smi")
    fields = "index,name,uuid,memory.total,memory.used,memory.free,pci.bus_id,driver_version"
    csv = run([smi, f"--query-gpu={fields}", "--format=csv"], seed_env).stdout.splitlines()
    assert csv[0] == (
        "index, name, uuid, memory.total [MiB], memory.used [MiB], memory.free [MiB], pci.bus_id, driver_version"
    )
    assert csv[1].startswith("0, Tesla V100-SXM2-16GB, GPU-") and csv[1].endswith(
        ", 4096 MiB, 0 MiB, 4096 MiB, 00000000:00:09.0, 470.82.01"
    )
    report = parse_nvidia_smi("\n".join(csv))
    assert [(g.index, g.memory_total_mib, g.bus_id) for g in report.gpus] == [
        (0, 4096, "00000000:00:09.0"),
        (1, 4096, "00000000:00:0A.0"),
    ]
    bare = run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"], seed_env).stdout
    assert bare.splitlines()[1].endswith(", 4096, 0, 4096, 00000000:00:0A.0, 470.82.01")
    assert [g.memory_total_mib for g in parse_nvidia_smi(bare, csv_fields=fields.split(",")).gpus] == [4096, 4096]
    listing = run([smi, "-L"], seed_env).stdout
    assert [g.uuid for g in parse_nvidia_smi(listing).gpus] == [line.split(", ")[2] for line in csv[1:]]
    unknown = run([smi, "--frobnicate"], seed_env)
    assert unknown.returncode == 2
    assert unknown.stdout.startswith("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
    field = run([smi, "--query-gpu=index,bogus", "--format=csv"], seed_env)
    assert field.returncode == 2 and 'Field "bogus" is not a valid field to query.' in field.stdout
    assert run([smi, "--query-gpu=index"], seed_env).returncode == 2  # --format is required
    help_text = run([smi, "-h"], seed_env)
    assert help_text.returncode == 0 and "NVIDIA System Management Interface -- v470.82.01" in help_text.stdout


def test_no_visible_cards(seed_env, native_root):
    env = dict(seed_env, NVIDIA_VISIBLE_DEVICES="none")
    proc = run([tool(native_root, "nvidia-smi")], env)
    assert proc.returncode == 6 and proc.stdout.strip() == "No devices were found"
    assert parse_nvidia_smi(proc.stdout).gpus == []


LOST_MESSAGE = "Unable to determine the device handle for GPU00000000:00:0A.0: GPU is lost.  Reboot the system to recover this GPU\n"


def test_a_lost_card_is_reported_and_left_out(seed_env, seed_inventory, native_root):
    """The seed's container sees cards 1 and 2; card 2 (container index 1) fell off the bus."""
    seed_inventory.write_text(
        SEED_INVENTORY.replace("pci_bus_id: 00000000:00:0A.0\n", "pci_bus_id: 00000000:00:0A.0\n    lost: true\n")
    )
    smi = tool(native_root, "nvidia-smi")
    table = run([smi], seed_env)
    assert table.returncode == 15 and table.stderr == LOST_MESSAGE
    assert [(g.index, g.bus_id) for g in parse_nvidia_smi(table.stdout).gpus] == [(0, "00000000:00:09.0")]
    assert "00:0A.0" not in table.stdout and "No running processes found" in table.stdout
    listing = run([smi, "-L"], seed_env)
    assert listing.returncode == 15 and listing.stderr == LOST_MESSAGE
    [line] = listing.stdout.splitlines()
    assert line.startswith("GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-")
    query = run([smi, "--query-gpu=index,pci.bus_id,count", "--format=csv,noheader"], seed_env)
    assert (query.returncode, query.stdout, query.stderr) == (15, "0, 00000000:00:09.0, 2\n", LOST_MESSAGE)
    # a container that sees only the lost card gets the message and no table
    alone = run([smi], dict(seed_env, NVIDIA_VISIBLE_DEVICES="2"))
    assert (alone.returncode, alone.stdout, alone.stderr) == (15, "", LOST_MESSAGE)
    # back on the bus: the usual table and exit 0
    seed_inventory.write_text(SEED_INVENTORY)
    assert run([smi], seed_env).returncode == 0
