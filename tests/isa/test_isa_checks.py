"""The ISA checks catch what they exist for: tests/isa/isa_scan.py on small binaries built here
with and without the hazard, tests/isa/isa_regions.py on a copy of src/backends/cpu with a rule
broken. (A check that cannot fail proves nothing.)"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SCAN = os.path.join(HERE, "isa_scan.py")
REGIONS = os.path.join(HERE, "isa_regions.py")

# The mechanism in miniature: a file compiled with -mavx2 instantiates a std template
# the rest of the program also uses, and the linker keeps one copy for both.
LEAKY_ISA = r"""
#include <immintrin.h>
#include <numeric>
namespace minfer::cpu::avx2 {
float kernel(const float* p, int n) {
  __m256 s = _mm256_loadu_ps(p);
  return _mm256_cvtss_f32(s) + std::accumulate(p, p + n, 0.0f);
}
}
"""
GENERIC = r"""
#include <numeric>
namespace minfer::cpu::avx2 { float kernel(const float* p, int n); }
__attribute__((noinline)) float tokenize(const float* p, int n) { return std::accumulate(p, p + n, 0.0f); }
// The kernel through a table (a pointer taken, as kernels-avx2.cpp does), never called directly.
float (*volatile table)(const float*, int) = &minfer::cpu::avx2::kernel;
int main(int argc, char**) {
  float x[8] = {};
  return argc > 5 ? static_cast<int>(table(x, 8)) : static_cast<int>(tokenize(x, argc));
}
"""
# The same code in an ISA region (what src/backends/cpu/isa-begin.h and isa-end.h expand to).
REGION_ISA = LEAKY_ISA.replace("namespace minfer::cpu::avx2 {",
                               '#pragma GCC push_options\n#pragma GCC target("avx2,fma,f16c")\n'
                               "namespace minfer::cpu::avx2 {", 1) + "#pragma GCC pop_options\n"
# AVX-512 code in the avx2 namespace: what an AVX2-only CPU would die on inside its own table.
WRONG_TABLE = r"""
#include <immintrin.h>
namespace minfer::cpu::avx2 {
float kernel(const float* p, int) { return _mm512_reduce_add_ps(_mm512_loadu_ps(p)); }
}
"""


def build(tmp, name, isa_src, flags, generic=GENERIC):
    isa = tmp / f"{name}-isa.cpp"
    isa.write_text(isa_src)
    main = tmp / f"{name}-main.cpp"
    main.write_text(generic)
    out = tmp / name
    # -O0: nothing inlined, the std template emitted out of line in both objects (as the ASan
    # build's -O1 did with std::vector<unsigned>::resize), its float adds VEX-encoded where
    # compiled with -mavx2. The ISA object first, as in the failing link.
    subprocess.run(["g++", "-std=c++20", "-O0", *flags, "-c", str(isa), "-o", str(isa) + ".o"], check=True)
    subprocess.run(["g++", "-std=c++20", "-O0", "-c", str(main), "-o", str(main) + ".o"], check=True)
    subprocess.run(["g++", str(isa) + ".o", str(main) + ".o", "-o", str(out)], check=True)
    return out


def scan(path):
    return subprocess.run([sys.executable, SCAN, str(path)], capture_output=True, text=True)


def test_scan_names_a_std_template_compiled_with_isa_flags(tmp_path):
    r = scan(build(tmp_path, "leaky", LEAKY_ISA, ["-mavx2", "-mfma"]))
    assert r.returncode == 1, r.stdout
    assert "std::accumulate<float const*, float>" in r.stdout and "runs on every CPU" in r.stdout, r.stdout


def test_scan_passes_the_same_code_in_an_isa_region(tmp_path):
    r = scan(build(tmp_path, "region", REGION_ISA, []))
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[-1].endswith(", 0 outside the dispatch"), r.stdout
    assert "0 functions with ISA code" not in r.stdout  # the kernel itself was seen


def test_scan_names_avx512_code_in_the_avx2_table(tmp_path):
    r = scan(build(tmp_path, "wrongtable", WRONG_TABLE, ["-mavx512f"]))
    assert r.returncode == 1, r.stdout
    assert "minfer::cpu::avx2::kernel" in r.stdout and "EVEX (AVX-512)" in r.stdout, r.stdout


def test_scan_names_baseline_code_calling_a_kernel_directly(tmp_path):
    # What a static initializer or a forgotten cpuid check does: the kernel runs on every CPU.
    direct = GENERIC.replace("static_cast<int>(table(x, 8))", "static_cast<int>(minfer::cpu::avx2::kernel(x, 8))")
    r = scan(build(tmp_path, "direct", REGION_ISA, [], direct))
    assert r.returncode == 1, r.stdout
    assert "main [main]" in r.stdout and "a call into" in r.stdout, r.stdout


def test_scan_names_sse4_popcnt_code_outside_the_tables(tmp_path):
    # Legacy-encoded instructions past SSE2: qemu's Nehalem has them, older CPUs do not.
    src = tmp_path / "pop.cpp"
    src.write_text("__attribute__((noinline)) int bits(unsigned long v) { return __builtin_popcountl(v); }\n"
                   "int main(int argc, char**) { return bits(static_cast<unsigned long>(argc)) - 1; }\n")
    subprocess.run(["g++", "-O1", "-mpopcnt", str(src), "-o", str(tmp_path / "pop")], check=True)
    r = scan(tmp_path / "pop")
    assert r.returncode == 1 and "bits(unsigned long)" in r.stdout and "SSE3-4.2/POPCNT" in r.stdout, r.stdout


def copy_cpu(tmp_path):
    dst = tmp_path / "src" / "backends" / "cpu"
    shutil.copytree(os.path.join(ROOT, "src", "backends", "cpu"), dst)
    return dst


def regions(tmp_path):
    return subprocess.run([sys.executable, REGIONS, str(tmp_path)], capture_output=True, text=True)


def test_regions_pass_on_the_tree(tmp_path):
    copy_cpu(tmp_path)
    r = regions(tmp_path)
    assert r.returncode == 0, r.stdout


def test_regions_refuse_a_std_header_inside_a_region(tmp_path):
    cpu = copy_cpu(tmp_path)
    f = cpu / "silu-avx512.cpp"
    f.write_text(f.read_text().replace('#include "backends/cpu/isa-begin.h"\n',
                                       '#include "backends/cpu/isa-begin.h"\n#include <map>\n'))
    r = regions(tmp_path)
    assert r.returncode == 1 and "silu-avx512.cpp" in r.stdout and "<map>" in r.stdout, r.stdout


def test_regions_refuse_file_wide_isa_flags(tmp_path):
    cpu = copy_cpu(tmp_path)
    cm = cpu / "CMakeLists.txt"
    cm.write_text(cm.read_text() + '\nset_source_files_properties(gemm-avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2")\n')
    r = regions(tmp_path)
    assert r.returncode == 1 and "ISA flags for a whole file" in r.stdout, r.stdout


def test_regions_refuse_an_isa_header_outside_a_region(tmp_path):
    cpu = copy_cpu(tmp_path)
    f = cpu / "ops-attn.cpp"
    f.write_text('#include "backends/cpu/gemm-tiles.h"\n' + f.read_text())
    r = regions(tmp_path)
    assert r.returncode == 1 and "outside an ISA region" in r.stdout, r.stdout


def test_what_the_scan_names_is_a_sigill_on_an_older_cpu(tmp_path):
    # The generic path only (main calls tokenize(), never the kernel): the leaked copy dies on a
    # CPU without AVX, the region build runs. qemu-user comes from scripts/setup.sh.
    leaky = build(tmp_path, "leaky", LEAKY_ISA, ["-mavx2", "-mfma"])
    region = build(tmp_path, "region", REGION_ISA, [])
    old = subprocess.run(["qemu-x86_64", "-cpu", "Nehalem", str(leaky)], capture_output=True)
    assert old.returncode == -4 or b"Illegal instruction" in old.stderr, (old.returncode, old.stderr)
    ok = subprocess.run(["qemu-x86_64", "-cpu", "Nehalem", str(region)], capture_output=True)
    assert ok.returncode == 0, (ok.returncode, ok.stderr)


def test_regions_refuse_code_outside_the_isa_namespace(tmp_path):
    # A declaration in the region gets the ISA too: a function defined after isa-end.h would be
    # compiled for AVX2 under a name no table owns.
    cpu = copy_cpu(tmp_path)
    f = cpu / "rope-row-avx2.cpp"
    f.write_text(f.read_text().replace('namespace minfer::cpu::avx2 {', 'float helper(float);\nnamespace minfer::cpu::avx2 {', 1))
    r = regions(tmp_path)
    assert r.returncode == 1 and "float helper(float);" in r.stdout and "outside namespace" in r.stdout, r.stdout
