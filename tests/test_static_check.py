"""Static checks: the entry point's signature, forbidden library calls and host-side tricks."""

from __future__ import annotations

import pytest

from cuda_llm.tasks import load_all, load_task
from cuda_llm.tools.compiler.static_check import canonical_type, check_source, strip_comments

KERNEL = "__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n"
GOOD = KERNEL + 'extern "C" void solve(const float* x, float* y, int n) { k<<<1, 32>>>(x, y, n); }\n'


@pytest.fixture(scope="module")
def gelu():
    return load_task("gelu").task


def rules(source, task, **kw):
    return [(i.rule, i.line) for i in check_source(source, task, **kw)]


def test_good_candidate_has_no_issues(gelu):
    assert check_source(GOOD, gelu) == []


@pytest.mark.parametrize(
    "signature",
    [
        'extern "C" void solve(float const* __restrict__ in, float* __restrict__ out, const int count)',
        'extern "C" void solve(const float *x, float *const y, int)',
        'extern "C"   void\nsolve(const float x[], float y[], int n)',
        'extern "C" __host__ void solve(const float* x, float* y, int n)',
    ],
)
def test_equivalent_spellings_are_accepted(gelu, signature):
    src = KERNEL + signature + " { k<<<1, 32>>>(0, 0, 0); }\n"
    assert check_source(src, gelu) == []


def test_extern_c_block_and_earlier_declaration_are_accepted(gelu):
    block = KERNEL + 'extern "C" {\nvoid solve(const float* x, float* y, int n) { k<<<1, 1>>>(x, y, n); }\n}\n'
    assert check_source(block, gelu) == []
    declared = KERNEL + 'extern "C" void solve(const float*, float*, int);\nvoid solve(const float* x, float* y, int n) {}\n'
    assert check_source(declared, gelu) == []


@pytest.mark.parametrize(
    "signature, needle",
    [
        ('extern "C" void solve(const float* x, float* y, float n)', "parameter 3 (n) is `float`, it must be `int`"),
        ('extern "C" void solve(float* x, float* y, int n)', "parameter 1 (x) is `float*`, it must be `const float*`"),
        ('extern "C" void solve(const double* x, float* y, int n)', "parameter 1 (x) is `const double*`"),
        ('extern "C" void solve(float* y, const float* x, int n)', "wrong order"),
        ('extern "C" void solve(const float* x, float* y)', "takes 2 parameter(s)"),
        ('extern "C" void solve(const float* x, float* y, int n, int m)', "takes 4 parameter(s)"),
        ('void solve(const float* x, float* y, int n)', 'not extern "C"'),
        ('extern "C" int solve(const float* x, float* y, int n)', "must return void, not int"),
        ('extern "C" static void solve(const float* x, float* y, int n)', "'static'"),
        ('extern "C" __global__ void solve(const float* x, float* y, int n)', "host function"),
    ],
)
def test_wrong_signature_is_caught(gelu, signature, needle):
    src = KERNEL + "\n" + signature + " {\n}\n"
    issues = check_source(src, gelu)
    assert issues and all(i.rule == "signature" for i in issues)
    assert any(needle in i.message for i in issues), [i.message for i in issues]
    assert issues[0].line == 3
    assert gelu.signature in issues[0].message          # says exactly what to write


def test_missing_entry(gelu):
    (issue,) = check_source(KERNEL + 'extern "C" void run(const float* x, float* y, int n) {}\n', gelu)
    assert issue.rule == "missing-entry" and gelu.signature in issue.message
    (decl,) = check_source(KERNEL + 'extern "C" void solve(const float* x, float* y, int n);\n', gelu)
    assert decl.rule == "missing-entry" and "declared but never defined" in decl.message and decl.line == 2
    # a call or a comment is not a definition
    only_call = KERNEL + "// extern \"C\" void solve(const float* x, float* y, int n) {}\nvoid f() { solve(0, 0, 0); }\n"
    assert [i.rule for i in check_source(only_call, gelu)] == ["missing-entry"]


def test_other_entry_names_and_uint_types():
    sort = load_task("sort_u32").task
    ok = 'extern "C" void solve(const unsigned* keys_in, unsigned int* keys_out, int n) {}\n'
    assert check_source(ok, sort) == []
    bad = 'extern "C" void solve(const int* keys_in, unsigned int* keys_out, int n) {}\n'
    assert [i.rule for i in check_source(bad, sort)] == ["signature"]


FORBIDDEN = [
    ("cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, 0, x, n, x, n, 0, y, n);", "cublasSgemm"),
    ("cublasLtMatmul(0);", "cublasLtMatmul"),
    ("cudnnConvolutionForward(0);", "cudnnConvolutionForward"),
    ("thrust::transform(x, x + n, y, f);", "thrust::transform"),
    ("thrust :: reduce(x, x + n);", "thrust::reduce"),
    ("cub::DeviceReduce::Sum(tmp, bytes, x, y, n);", "cub::DeviceReduce"),
    ("cub::DeviceRadixSort::SortKeys(0);", "cub::DeviceRadixSort"),
    ("cutlass::gemm::device::Gemm<float> op;", "cutlass::gemm::device"),
    ("cufftExecC2C(0);", "cufftExecC2C"),
    ("cusparseSpMV(0);", "cusparseSpMV"),
    ("cusolverDnSgetrf(0);", "cusolverDnSgetrf"),
]


def _with_body(stmt: str) -> str:
    return KERNEL + 'extern "C" void solve(const float* x, float* y, int n) {\n    ' + stmt + "\n}\n"


@pytest.mark.parametrize("stmt, name", FORBIDDEN)
def test_each_forbidden_library_call(gelu, stmt, name):
    issues = check_source(_with_body(stmt), gelu)
    assert [(i.rule, i.line) for i in issues] == [("forbidden-library", 3)], issues
    assert issues[0].message.startswith(name) and "your own CUDA kernels" in issues[0].message
    assert check_source(_with_body(stmt), gelu, allow_libraries=True) == []


@pytest.mark.parametrize("header", ["cublas_v2.h", "cudnn.h", "thrust/sort.h", "cub/device/device_reduce.cuh", "cufft.h"])
def test_forbidden_headers(gelu, header):
    src = f"#include <{header}>\n" + GOOD
    assert rules(src, gelu) == [("forbidden-library", 1)]
    assert rules(f'#include "{header}"\n' + GOOD, gelu) == [("forbidden-library", 1)]


def test_block_level_cub_is_allowed(gelu):
    src = "#include <cub/cub.cuh>\n" + _with_body("using R = cub::BlockReduce<float, 256>; cub::WarpReduce<float>* w = 0;")
    assert check_source(src, gelu) == []


HOST_TRICKS = [
    ("if (fork() == 0) {}", "fork"),
    ("vfork();", "vfork"),
    ('system("nvidia-smi");', "system"),
    ('std::system("ls");', "std::system"),
    ('FILE* p = popen("ls", "r");', "popen"),
    ('execvp("ls", 0);', "execvp"),
    ('execl("/bin/ls", "ls", 0);', "execl"),
    ("posix_spawn(0, 0, 0, 0, 0, 0);", "posix_spawn"),
    ("sleep(1);", "sleep"),
    ("usleep(100);", "usleep"),
    ("nanosleep(&ts, 0);", "nanosleep"),
    ("std::this_thread::sleep_for(std::chrono::milliseconds(1));", "this_thread::sleep_for"),
    ('FILE* f = fopen("cache.bin", "rb");', "fopen"),
    ('std::ifstream in("cache.bin");', "std::ifstream"),
    ('std::ofstream out("x");', "std::ofstream"),
    ('int fd = open("/tmp/x", 0);', "open"),
    ('const char* e = getenv("HOME");', "getenv"),
    ('void* h = dlopen("libcublas.so", 1);', "dlopen"),
    ("signal(11, 0);", "signal"),
    ("std::thread t([] {}); t.detach();", "std::thread"),
    ("pthread_create(0, 0, 0, 0);", "pthread_create"),
    ("cudaDeviceReset();", "cudaDeviceReset"),
    ("if (n < 0) exit(1);", "exit"),
    ("std::exit(2);", "std::exit"),
    ("abort();", "abort"),
    ("_exit(0);", "_exit"),
    ("quick_exit(0);", "quick_exit"),
    ("syscall(39);", "syscall"),
    ("int s = socket(2, 1, 0);", "socket"),
    ("PyRun_SimpleString(0);", "PyRun_SimpleString"),
    ("cudaIpcOpenMemHandle(0, h, 1);", "cudaIpcOpenMemHandle"),
]


@pytest.mark.parametrize("stmt, name", HOST_TRICKS)
def test_each_host_trick(gelu, stmt, name):
    issues = check_source(_with_body(stmt), gelu, allow_libraries=True)
    assert [(i.rule, i.line) for i in issues] == [("host-trick", 3)], issues
    assert issues[0].message.startswith(name)
    assert ":" in issues[0].message and len(issues[0].message) > len(name) + 20   # says what to do instead


def test_constructor_attribute_and_macros_are_caught(gelu):
    ctor = "__attribute__((constructor)) static void early() {}\n" + GOOD
    assert rules(ctor, gelu) == [("host-trick", 1)]
    macro = "#define WAIT() usleep(10)\n" + GOOD
    assert rules(macro, gelu) == [("host-trick", 1)]


def test_no_false_alarms_on_comments_strings_and_lookalikes(gelu):
    src = (
        "#include <cuda_runtime.h>\n#include <cstdio>\n#include <unistd.h>\n"
        "// cublasSgemm would be faster; thrust::sort too; never call system(\"x\") or sleep(1)\n"
        "/* cudnnConvolutionForward(...); fopen(\"f\"); cub::DeviceReduce::Sum */\n"
        "__device__ void backoff() { __nanosleep(100); }\n"
        "__global__ void k(const float* x, float* y, int n) { int open_count = 0; float sleep_ms = 1.0f;\n"
        "  y[0] = x[0] + open_count + sleep_ms; }\n"
        'extern "C" void solve(const float* x, float* y, int n) {\n'
        '    const char* msg = "cublasCreate failed; fork() and exec not used; thrust::copy";\n'
        "    char c = '\\'';\n"
        '    if (n < 0) { printf("system(%s) getenv(%d) exit(1)\\n", msg, c); return; }\n'
        "    cudaStream_t s; cudaStreamCreate(&s); k<<<1, 1, 0, s>>>(x, y, n); cudaStreamSynchronize(s);\n"
        "    cudaStreamDestroy(s); assert(n >= 0);\n"
        "}\n"
    )
    assert check_source(src, gelu) == []


def test_strip_keeps_lines_and_extern_c():
    src = 'a /* x\n y */ b "s\\"t" // c\nextern "C" void f();\nR"(raw\n"quote)"\'z\''
    out = strip_comments(src)
    assert out.count("\n") == src.count("\n") and len(out) == len(src)
    assert "/*" not in out and " y " not in out and "s\\" not in out and "raw" not in out and 'extern "C"' in out and "'z'" not in out
    assert strip_comments("int a = 1'000'000; // c") == "int a = 1'000'000;     "


def test_canonical_type():
    assert canonical_type("float const * __restrict__ x") == "const float*"
    assert canonical_type("const float* const p") == "const float*"
    assert canonical_type("unsigned n") == "unsigned int"
    assert canonical_type("half* h") == "__half*"
    assert canonical_type("int") == "int"
    assert canonical_type("const float x[]") == "const float*"


def test_builtin_baselines_pass_and_library_yardsticks_need_the_flag():
    loaded = load_all()
    assert len(loaded) >= 8
    for lt in loaded:
        task = lt.task
        assert check_source(task.baseline_path.read_text(), task) == [], task.name
        if task.library_path is not None:
            lib = task.library_path.read_text()
            assert [i for i in check_source(lib, task, allow_libraries=True)] == [], task.name
            if task.library_links:
                assert any(i.rule == "forbidden-library" for i in check_source(lib, task)), task.name


def test_macros_that_spell_the_signature_are_expanded(gelu):
    src = '#define EXPORT extern "C"\n#define REAL float\n' + KERNEL + "EXPORT void solve(const REAL* x, REAL* y, int n) {}\n"
    assert check_source(src, gelu) == []
    wrong = "#define EXPORT\n" + KERNEL + "EXPORT void solve(const float* x, float* y, int n) {}\n"
    assert [i.rule for i in check_source(wrong, gelu)] == ["signature"]


L2_SETTINGS = [
    "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);",
    "cudaCtxResetPersistingL2Cache();",
    "cudaStreamAttrValue a; a.accessPolicyWindow.num_bytes = 1 << 20;",
    "cudaStreamSetAttribute(0, cudaStreamAttributeAccessPolicyWindow, &a);",
    "cudaDeviceSetLimit((cudaLimit)6, 1 << 20);",
    "cudaDeviceSetLimit(static_cast<cudaLimit>(0x06), 1 << 20);",
]


@pytest.mark.parametrize("stmt", L2_SETTINGS)
def test_persisting_l2_and_access_policy_windows_are_refused(gelu, stmt):
    issues = check_source(_with_body(stmt), gelu)
    assert issues and all(i.rule == "l2-persistence" and i.line == 3 for i in issues), issues
    assert "persisting-L2" in issues[0].message


def test_safe_device_limits_are_allowed(gelu):
    assert check_source(_with_body("cudaDeviceSetLimit(cudaLimitStackSize, 4096);"), gelu) == []
    assert check_source(_with_body("cudaDeviceSetLimit( cudaLimitMallocHeapSize , 1 << 20);"), gelu) == []


def test_driver_entry_points_only_by_the_tma_names(gelu):
    ok = 'void* f; cudaDriverEntryPointQueryResult q; cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);'
    assert check_source(_with_body(ok), gelu) == []
    for bad in ('cudaGetDriverEntryPointByVersion("cuCtxSetLimit", &f, 12000, 0, &q);',
                'cudaGetDriverEntryPoint(name, &f, 0);',
                'cuGetProcAddress("cuMemAlloc", &f, 12000, 0, 0);'):
        issues = check_source(_with_body("void* f; cudaDriverEntryPointQueryResult q; const char* name = 0; " + bad), gelu)
        assert [(i.rule, i.line) for i in issues] == [("driver-entry-point", 3)], (bad, issues)
        assert "cuTensorMapEncodeTiled" in issues[0].message


@pytest.mark.parametrize("asm", [
    'asm volatile("syscall" ::: "rax");',
    'asm volatile("mov $60, %%eax\\n\\t" "sys" "call" ::: "rax");',     # split literal
    '__asm__("int $0x80");',
    'asm(".byte 0x0f, 0x05");',
])
def test_host_inline_asm_that_makes_system_calls_is_refused(gelu, asm):
    issues = check_source(_with_body(asm), gelu)
    assert [(i.rule, i.line) for i in issues] == [("host-asm", 3)], issues


def test_ptx_inline_asm_and_asm_labels(gelu):
    ptx = KERNEL.replace("y[i] = x[i];", 'unsigned lane; asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane)); y[i] = x[i] + lane;')
    assert check_source(ptx + 'extern "C" void solve(const float* x, float* y, int n) {}\n', gelu) == []
    label = 'extern "C" void quit(int) __asm__("exit");\n' + GOOD
    assert [i.rule for i in check_source(label, gelu)] == ["host-asm"]


def test_includes_outside_the_toolkit_are_refused(gelu):
    for inc in ('#include "/etc/passwd"', '#include "../reference.py"', "#include </proc/self/environ>"):
        assert rules(inc + "\n" + GOOD, gelu) == [("include", 1)], inc
