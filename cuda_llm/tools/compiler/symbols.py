"""What a linked candidate may call: its undefined dynamic symbols against an allowlist, and its kernels'
names against the libraries that would do the work.

Source rules can be dodged (names built by token pasting, asm labels, function pointers handed around);
the linker cannot: every function the shared object calls outside itself is an undefined dynamic symbol.
A candidate may use the CUDA runtime, libc/libm math, memory and formatting functions, and what the C++
runtime needs (operator new/delete, exceptions, guards for local statics, std:: helpers). Anything else
(dlopen/dlsym, system/exec*/fork/popen, syscall, files and sockets, exit/abort, getenv, threads, sleeps,
the Python C API...) is refused with the symbol's name and what to do instead. ``exit`` itself is
allowed at this level only because nvcc's host stubs for ``__device__`` functions call it; the source
rules refuse ``exit`` written in the candidate (static_check).

Device-wide CUB and thrust algorithms are recognised by what was instantiated: they launch kernels of
their own, named in the ``cub::`` or ``thrust::`` namespaces, however the source spelled the call (``using
namespace cub;``, aliases, macros). Block- and warp-level CUB and cooperative groups run inside the
candidate's own kernels and create none (``cub::...::EmptyKernel``, which every CUB include
instantiates, does nothing and is ignored).

Reading the symbols uses pyelftools; the rules are pure functions over names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cuda_llm.results import CompileResult, KernelResources, StaticIssue
from cuda_llm.tools.compiler.ptxas import demangle_names

# ------------------------------------------------------------------------------------------ allowlist
_ALLOWED_EXACT = {
    # the CUDA runtime's registration and launch entry points (nvcc generates calls to these)
    "atexit",   # nvcc's module registration on some toolkits
    # TMA descriptors (through the runtime's driver entry point; listed in case a build links libcuda)
    "cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cuTensorMapEncodeIm2colWide", "cuTensorMapReplaceAddress",
    "cuGetProcAddress", "cuGetProcAddress_v2", "cuGetErrorString", "cuGetErrorName",
    # loader and C runtime plumbing every shared object has
    "__gmon_start__", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable", "__cxa_finalize",
    "__stack_chk_fail", "__stack_chk_guard", "__errno_location", "__tls_get_addr", "__dso_handle",
    "__assert_fail", "__assert_perror_fail",
    # nvcc's host stubs of __device__ functions end in exit(); exit written in the source is refused there
    "exit",
    # memory and strings
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign",
    "memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strnlen", "strcmp", "strncmp", "strcpy",
    "strncpy", "strcat", "strncat", "strchr", "strrchr", "strstr", "strtok", "strerror", "strdup",
    # formatting to the console (no file can be opened; stdout/stderr are the only streams)
    "printf", "fprintf", "vprintf", "vfprintf", "sprintf", "snprintf", "vsprintf", "vsnprintf", "puts", "fputs",
    "putchar", "fputc", "putc", "fflush", "fwrite", "perror", "stdout", "stderr",
    # numbers and sorting
    "abs", "labs", "llabs", "div", "ldiv", "atoi", "atol", "atoll", "atof", "strtol", "strtoll", "strtoul",
    "strtoull", "strtof", "strtod", "strtold", "qsort", "bsearch", "rand", "srand", "rand_r",
    # clocks (reading them changes nothing)
    "time", "clock", "clock_gettime", "gettimeofday",
    # what std::mutex and std::call_once compile to
    "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock", "pthread_mutex_init",
    "pthread_mutex_destroy", "pthread_once", "pthread_key_create", "pthread_getspecific", "pthread_setspecific",
    # C++ runtime
    "__gxx_personality_v0", "__cxa_atexit", "__cxa_thread_atexit", "__cxa_thread_atexit_impl",
}
_ALLOWED_PATTERNS = (
    re.compile(r"^(cuda|__cuda)\w*$"),                                  # CUDA runtime API and nvcc's glue
    re.compile(r"^__\w+_chk$"),                                          # _FORTIFY_SOURCE variants (__memcpy_chk...)
    re.compile(r"^__cxa_\w+$"),                                          # exceptions, guards, pure virtual
    re.compile(r"^_Unwind_\w+$"),
    re.compile(r"^_Zn[wa]\w*$|^_Zd[la]\w*$"),                            # operator new / new[] / delete / delete[]
    re.compile(r"^_ZSt\d*__throw_\w+$|^_ZSt\d+__throw_\w+$"),           # std::__throw_length_error...
    re.compile(r"^_ZT[VIS]N10__cxxabiv1\w+$"),                           # typeinfo vtables of the C++ ABI
    # libm: sin, sinf, sinl, __sin_finite..., frexp, ldexp, modf, nan...
    re.compile(r"^(__)?(a?(sin|cos|tan)h?|atan2|exp(2|10|m1)?|log(2|10|1p|b)?|ilogb|pow|sqrt|cbrt|hypot|"
               r"f?abs|floor|ceil|trunc|l?l?round|l?l?rint|nearbyint|fmod|remainder|remquo|fma|fmax|fmin|fdim|"
               r"frexp|ldexp|scalbl?n|modf|copysign|nan|erfc?|[lt]gamma|nextafter|nexttoward|sincos|j[01n]|y[01n])"
               r"[fl]?(_finite)?$"),
)
# std:: names (mangled _ZNSt / _ZSt / _ZNKSt) are allowed except these families
_STD_DENIED = re.compile(
    r"thread|filesystem|fstream|filebuf|__basic_file|random_device|this_thread|system_error.*_M_|"
    r"basic_[io]fstream|basic_fstream|_Sp_locker|condition_variable")

# ------------------------------------------------------------------------------------------ refusals
@dataclass(frozen=True)
class _Family:
    pattern: re.Pattern[str]
    what: str
    advice: str


_DENIED: tuple[_Family, ...] = (
    _Family(re.compile(r"^_?Py\w*|^_Py\w*"), "the Python C API",
            "a candidate must never reach into the process that loads it; compute in CUDA kernels only"),
    _Family(re.compile(r"^(dlopen|dlsym|dlvsym|dlmopen|dlclose|dlerror|dladdr1?|dlinfo|dl_iterate_phdr)$"),
            "dynamic loading", "do not load libraries or look up symbols at run time; the harness refuses code it cannot see"),
    _Family(re.compile(r"^(system|popen|pclose|v?fork|clone\d*|execl[ep]?|execv(p|pe|e)?|fexecve|posix_spawnp?|"
                       r"wait(pid|id)?|wait[34])$"),
            "process creation", "do the work in CUDA kernels launched from solve; starting programs is not allowed"),
    _Family(re.compile(r"^(syscall|__syscall\w*|ptrace|prctl|seccomp|personality)$"), "raw system calls",
            "a candidate makes no system calls of its own; use the CUDA runtime"),
    _Family(re.compile(r"^(_exit|_Exit|quick_exit|abort|at_quick_exit|on_exit)$"),
            "ending the process", "return from solve; errors are reported by the harness through cudaGetLastError"),
    _Family(re.compile(r"^(f?open(64|at|at64)?|creat(64)?|freopen(64)?|fdopen|fopencookie|fmemopen|tmpfile(64)?|"
                       r"mkstemp\w*|read|write|pread(64)?|pwrite(64)?|readv|writev|close|lseek(64)?|"
                       r"mmap(64)?|munmap|mprotect|mremap|shm_open|shm_unlink|f?stat(64)?|lstat(64)?|__xstat\w*|"
                       r"__fxstat\w*|statx|access|unlink(at)?|remove|rename(at)?|mkdir(at)?|rmdir|opendir|readdir(64)?|"
                       r"closedir|f?truncate(64)?|ioctl|fcntl(64)?|dup[23]?|pipe2?|fread|fgets|fgetc|getc|getchar|"
                       r"scanf|fscanf|sscanf|getline|getdelim|chdir|getcwd|realpath|symlink|link|chmod|chown|"
                       r"inotify_\w+|eventfd|memfd_create)$"),
            "file access", "all inputs arrive as device pointers; do not read or write files"),
    _Family(re.compile(r"^(socket|socketpair|connect|bind|listen|accept4?|send(to|msg)?|recv(from|msg)?|"
                       r"getaddrinfo|freeaddrinfo|gethostbyname\w*|getsockopt|setsockopt|shutdown|poll|select|"
                       r"epoll_\w+)$"),
            "network access", "a candidate computes on the GPU only; no sockets"),
    _Family(re.compile(r"^(getenv|secure_getenv|setenv|unsetenv|putenv|clearenv|environ|__environ)$"),
            "environment variables", "solve must depend only on its arguments; do not read the environment"),
    _Family(re.compile(r"^(pthread_(create|detach|join|cancel|kill|exit)|thrd_create)$|^_ZNSt6thread"),
            "host threads", "solve must queue all its work before it returns; no host threads"),
    _Family(re.compile(r"^(sleep|usleep|nanosleep|clock_nanosleep|sched_yield|pause|alarm|setitimer)$"),
            "sleeping or waiting", "solve must return as soon as its work is queued; sleeps distort the timing"),
    _Family(re.compile(r"^(signal|sigaction|sigprocmask|kill|raise|tgkill|sigaltstack|setjmp|longjmp|_setjmp|__longjmp_chk)$"),
            "signals", "do not install signal handlers or send signals; a crash must be reported, not hidden"),
    _Family(re.compile(r"^(cublas|cudnn|cufft|cusparse|cusolver|curand|cutensor|nvjpeg|npp)\w*"),
            "a vendor library that does the work",
            "write the computation as your own CUDA kernels; the harness refuses libraries that do the work"),
    _Family(re.compile(r"^cuda(Ipc\w*|DeviceReset|LibraryLoad\w*|Library\w*|ProfilerStart|ProfilerStop|"
                       r"CtxResetPersistingL2Cache)$"),
            "a CUDA runtime call outside the contract",
            "the harness owns the device: no resets, no other processes' memory, no code loaded at run time"),
)
_LIBRARY_FAMILY = "a vendor library that does the work"
_LIBRARY_ADVICE = "write the computation as your own CUDA kernels; the harness refuses libraries that do the work"


def _is_std(name: str) -> bool:
    """A mangled name in namespace std (``St``) or one of its abbreviations (``So`` ostream, ``Ss`` string...)."""
    return bool(re.match(r"^_Z(?:N|NK|T[ISVT])?S[tsaiod]", name))


def classify_symbol(name: str) -> tuple[str, str] | None:
    """None when a candidate may import ``name``; else (what it is, what to do instead)."""
    base = name.split("@", 1)[0]
    for fam in _DENIED:
        if fam.pattern.search(base):
            return fam.what, fam.advice
    if base in _ALLOWED_EXACT or any(p.match(base) for p in _ALLOWED_PATTERNS):
        return None
    if _is_std(base):
        return None if not _STD_DENIED.search(base) else ("a C++ library facility outside the contract (threads, files)",
                                                          "use only what computes: containers, algorithms, std::min/max")
    return ("a function outside the candidate contract",
            "host code may call the CUDA runtime, math, memory and printf-style functions only; do the work in kernels")


def check_symbols(undefined: list[str], *, allow_libraries: bool = False) -> list[StaticIssue]:
    """One issue per refused undefined symbol (``rule="forbidden-symbol"``, or ``"forbidden-library"`` for
    vendor libraries, which ``allow_libraries`` accepts)."""
    issues: list[StaticIssue] = []
    refused = [(s, classify_symbol(s)) for s in undefined]
    refused = [(s, c) for s, c in refused if c is not None]
    if not refused:
        return []
    shown = demangle_names([s for s, _ in refused])
    for (_, (what, advice)), readable in zip(refused, shown):
        library = what == _LIBRARY_FAMILY
        if library and allow_libraries:
            continue
        rule = "forbidden-library" if library else "forbidden-symbol"
        issues.append(StaticIssue(rule=rule, message=f"{readable} ({what}): the compiled code calls it; {advice}"))
    return issues


# ------------------------------------------------------------------------------------------ kernels
_LIBRARY_KERNEL = re.compile(r"^(?:void\s+)?(?P<ns>cub|thrust|cutlass)\s*::")
_MANGLED_LIBRARY_KERNEL = re.compile(r"^_ZN(?:\d+)?(?P<ns>3cub|6thrust|7cutlass)")
_HARMLESS_KERNEL = re.compile(r"::EmptyKernel\b|EmptyKernel")


def check_kernels(kernels: list[KernelResources] | list[str]) -> list[StaticIssue]:
    """Kernels that a library instantiated: device-wide CUB/thrust algorithms or CUTLASS operators."""
    names = [k if isinstance(k, str) else k.name for k in kernels]
    issues: list[StaticIssue] = []
    seen: set[str] = set()
    for name in names:
        m = _LIBRARY_KERNEL.match(name) or _MANGLED_LIBRARY_KERNEL.match(name)
        if not m or _HARMLESS_KERNEL.search(name):
            continue
        ns = re.sub(r"\d", "", m.group("ns"))
        short = _short_kernel_name(name)
        if short in seen:
            continue
        seen.add(short)
        lib = {"cub": "device-wide CUB", "thrust": "thrust", "cutlass": "CUTLASS"}[ns]
        issues.append(StaticIssue(
            rule="forbidden-library",
            message=(f"{short} ({lib}): the build instantiates this library kernel, so a library algorithm does the "
                     f"work; {_LIBRARY_ADVICE} (block- and warp-level cub::Block*/cub::Warp* and cooperative groups "
                     f"are allowed)"),
        ))
    return issues


def _short_kernel_name(name: str) -> str:
    """``cub::CUB_300001_SM_900::detail::radix_sort::DeviceRadixSortOnesweepKernel<...>(...)`` ->
    ``cub::detail::radix_sort::DeviceRadixSortOnesweepKernel``."""
    name = re.sub(r"^void\s+", "", name)
    depth, out = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out)
    return re.sub(r"::(CUB|THRUST|_V)_\w+?(?=::)", "", text)


# ------------------------------------------------------------------------------------------ reading
def undefined_symbols(so_path: str | Path) -> list[str]:
    """Names of the undefined symbols in the shared object's dynamic symbol table, sorted.

    Read with pyelftools (a dependency); binutils' ``nm -D`` is the fallback where it is missing. Raises
    ``ValueError`` for a file that is not an ELF object and ``RuntimeError`` when neither reader exists."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
    except ImportError:
        return _undefined_with_nm(so_path)
    names: set[str] = set()
    try:
        with open(so_path, "rb") as fh:
            elf = ELFFile(fh)
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None:
                return []
            for sym in dynsym.iter_symbols():
                if sym.name and sym["st_shndx"] == "SHN_UNDEF":
                    names.add(sym.name)
    except ELFError as exc:
        raise ValueError(f"{so_path} is not an ELF shared object: {exc}") from exc
    return sorted(names)


def _undefined_with_nm(so_path: str | Path) -> list[str]:
    import shutil
    import subprocess

    nm = shutil.which("nm")
    if nm is None:
        raise RuntimeError("reading a candidate's symbols needs pyelftools (pip install pyelftools) or binutils' nm")
    proc = subprocess.run([nm, "-D", "--undefined-only", str(so_path)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ValueError(f"{so_path} is not an ELF shared object: {proc.stderr.strip()[:200]}")
    return sorted({line.split()[-1].split("@", 1)[0] for line in proc.stdout.splitlines() if line.strip()})


def check_build(comp: CompileResult, *, allow_libraries: bool = False) -> list[StaticIssue]:
    """Everything the build products refuse: rules found in the preprocessed source, undefined symbols
    outside the allowlist, and library kernels. ``allow_libraries`` (the yardsticks' ``--library`` mode)
    accepts vendor libraries and device-wide CUB/thrust."""
    issues = [i for i in comp.source_issues if not (allow_libraries and i.rule == "forbidden-library")]
    issues += check_symbols(comp.undefined_symbols, allow_libraries=allow_libraries)
    if not allow_libraries:
        issues += check_kernels(comp.kernels)
    seen: set[tuple[str, str]] = set()
    unique = []
    for i in issues:
        if (i.rule, i.message) not in seen:
            seen.add((i.rule, i.message))
            unique.append(i)
    return unique
