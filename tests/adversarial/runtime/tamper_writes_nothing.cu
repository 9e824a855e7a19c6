// task: gelu
// expect: wrong_answer
// reason: correctness: failed
// trick: reaches the Python C API of the worker process through dlsym and rewrites every validator and
//        checker it can find there to pass, makes the poison pattern zeros, then writes nothing (what the
//        issue saw "pass 7/7 cases"). The verdict is computed in the parent, which never loaded this code.
#include <cuda_runtime.h>
#include <dlfcn.h>

typedef int (*gil_ensure_t)(void);
typedef void (*gil_release_t)(int);
typedef int (*run_string_t)(const char*);

static const char* kTamper =
    "import sys\n"
    "def _passes(name, got, expected, tol, **kw):\n"
    "    return {'passed': True, 'reason': None, 'kind': None, 'output': name, 'max_abs_err': 0.0,\n"
    "            'max_rel_err': 0.0, 'first_bad_index': None, 'expected': None, 'got': None}\n"
    "for m in list(sys.modules.values()):\n"
    "    if getattr(m, '__name__', '').startswith('cuda_llm') or getattr(m, '__name__', '') == '__main__':\n"
    "        for attr in ('compare_output', 'check_case', 'check_call'):\n"
    "            if hasattr(m, attr):\n"
    "                setattr(m, attr, _passes)\n"
    "v = sys.modules.get('cuda_llm.tools.harness.validate')\n"
    "if v is not None:\n"
    "    v.poison_word32 = lambda dtype: 0\n";

static void tamper_once() {
    static bool done = false;
    if (done) return;
    done = true;
    gil_ensure_t ensure = (gil_ensure_t)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    gil_release_t release = (gil_release_t)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    run_string_t run = (run_string_t)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return;
    int state = ensure();
    run(kTamper);
    release(state);
}

extern "C" void solve(const float* x, float* y, int n) {
    tamper_once();
}
