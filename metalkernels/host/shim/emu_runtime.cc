// emu_runtime.cc: the fiber runner.
//
// emu_dispatch runs a dispatch's threadgroups on the calling thread and a
// pool of worker threads, which take threadgroups from a shared counter.
// One worker runs one threadgroup at a time: its threads are fibers, each
// running until it waits in a barrier or a SIMD-group collective; when the
// last thread a barrier waits for arrives, the waiting fibers become ready
// again. A waiting fiber hands control straight to the next ready one — the
// first in thread order, or a seeded random one, so that code which is only
// correct in one order (a missing barrier) gives different bits under
// different seeds. The worker's own stack runs the scheduler loop, which
// starts the first fiber, takes back control when a fiber finishes, and
// reports a deadlock when threads still wait but none is ready (a barrier
// not every thread reaches).
//
// Context switches are a few instructions of assembly on x86-64 and arm64,
// ELF and Mach-O alike (saving the callee-saved registers; the FP control
// words are left alone, since every fiber of the process runs with the same
// ones and kernels cannot change them); other platforms use ucontext.
// Apple's makecontext is not used even where it exists: on arm64 it clears
// the whole stack before the first switch and passes its arguments as
// 32-bit ints. Signals are blocked on every thread
// while it runs fibers, so no asynchronous signal handler (the Go
// runtime's included) ever runs on a fiber stack; memory faults stay
// deliverable and become dispatch errors (on_fault).
#if defined(__APPLE__)
#define _XOPEN_SOURCE 700  // ucontext on macOS
#define _DARWIN_C_SOURCE 1
#endif
#include "emu_runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <ucontext.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if !((defined(__x86_64__) || defined(__aarch64__)) && (defined(__ELF__) || defined(__APPLE__)))
#define EMU_UCONTEXT 1
#endif

namespace emu {
thread_local Fiber* cur = nullptr;
}

using emu::Desc;
using emu::Fiber;
using emu::Group;
using emu::Simd;

namespace {

enum State { kReady = 0, kWaitGroup, kWaitSimd, kDone };

// Fiber stacks: kernels keep a few KB of locals (a lane's share of a tile,
// simdgroup matrices at 256 B each); 64 KiB leaves room for deep inlining,
// and a guard page below each stack turns an overflow into a fault.
constexpr size_t kStackSize = 64 * 1024;

// StackLayout places the fiber stacks in one mapping of slots, each an
// inaccessible guard followed by the usable stack, both whole pages of the
// machine's page size (4 KiB on x86-64 and most Linux arm64 systems, 16 KiB
// on Apple silicon): mprotect works on whole pages, so a guard of less than
// a page, or one not starting on a page, would take part of a usable stack
// with it or not be set at all. Stacks grow down, into their own guard.
// The guard is at least 64 KiB: an arm64 kernel's frame is not probed page
// by page (clang before 18 does not implement -fstack-clash-protection
// there, and GCC assumes a 64 KiB guard), so a frame that outgrows the
// stack by up to that much still lands in its own guard rather than in the
// stack below. Guards cost address space only.
constexpr size_t kGuardMin = 64 * 1024;

struct StackLayout {
    size_t guard;   // bytes of guard at the start of each slot
    size_t usable;  // bytes of stack above it
    size_t stride;  // bytes per slot
};

StackLayout stack_layout(size_t page) {
    StackLayout l;
    l.guard = (kGuardMin + page - 1) / page * page;
    l.usable = (kStackSize + page - 1) / page * page;
    l.stride = l.guard + l.usable;
    return l;
}

size_t page_size() {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? size_t(p) : size_t(getpagesize());
}

const StackLayout kStacks = stack_layout(page_size());

struct Worker;
void register_worker(Worker* w);

struct Worker {
#ifdef EMU_UCONTEXT
    ucontext_t sched_ctx;
    std::vector<ucontext_t> ctx;
#endif
    void* sched_sp = nullptr;
    unsigned char* stacks = nullptr;
    int nstacks = 0;   // stacks mapped
    int nguarded = 0;  // of those, the first nguarded have their guard set
    std::vector<Fiber> fibers;
    std::vector<Simd> simd;
    unsigned char* shared = nullptr;
    std::vector<int> ready;
    size_t head = 0;
    // Stacks are handed to fibers when they first run and returned when
    // they finish, most recently freed first: a threadgroup without
    // barriers runs all its fibers on one stack that stays in cache.
    std::vector<int> free_stacks;
    std::vector<int> stack_of;
    uint64_t rng = 0;
    bool shuffle = false;
    int live = 0;
    int arrived = 0;
    int done = 0;
    bool faulted = false;
    char msg[768];
    Group g;
    // Fault trapping: while running is set, a SIGSEGV/SIGBUS whose stack
    // pointer lies in this worker's fiber stacks jumps back to run_group.
    sigjmp_buf jb;
    volatile bool running = false;
    volatile int current = -1;
    uintptr_t fault_addr = 0;
    int fault_sig = 0;

    Worker() {
        fibers.resize(emu::kMaxThreads);
        stack_of.resize(emu::kMaxThreads);
        free_stacks.reserve(emu::kMaxThreads);
        simd.resize(emu::kMaxThreads / emu::kSimdWidth);
        ready.reserve(emu::kMaxThreads);
        // Room past the 32 KiB limit so that a kernel over it is reported
        // cleanly by emu_tg_alloc instead of overrunning.
        shared = static_cast<unsigned char*>(mmap(nullptr, 2 * emu::kThreadgroupMemory, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    }

    // ensure_stacks makes the first n stacks ready: a dispatch of n threads
    // per threadgroup uses stacks 0 to n-1.
    bool ensure_stacks(int n) {
        if (!stacks) {
            // Reserve the full set once: address space is cheap, and only
            // pages a fiber touches are ever committed.
            void* p = mmap(nullptr, kStacks.stride * emu::kMaxThreads, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) return false;
            stacks = static_cast<unsigned char*>(p);
            nstacks = emu::kMaxThreads;
            register_worker(this);
#ifdef EMU_UCONTEXT
            ctx.resize(emu::kMaxThreads);
#endif
        }
        // Guards are set as stacks come into use, so that a worker of
        // small threadgroups splits its mapping into few regions (each guard
        // is one, and the kernel limits a process's count). mmap returns
        // page-aligned memory and every slot is whole pages, so each guard
        // starts on a page; a guard that cannot be set is an error, not a
        // stack without one.
        for (; nguarded < n; nguarded++) {
            if (mprotect(stacks + size_t(nguarded) * kStacks.stride, kStacks.guard, PROT_NONE) != 0) return false;
        }
        return true;
    }

    uint64_t next_rand() {
        // splitmix64
        uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

thread_local Worker* tw = nullptr;

// The signal handler finds the faulting worker by its stack pointer, so it
// needs no thread-local storage (unsafe to touch in a handler).
constexpr int kMaxWorkers = 512;
Worker* registry[kMaxWorkers];
std::atomic<int> nregistry{0};

void register_worker(Worker* w) {
    int i = nregistry.load();
    if (i < kMaxWorkers) {
        registry[i] = w;
        nregistry.store(i + 1, std::memory_order_release);
    }
}

struct sigaction old_segv, old_bus;

uintptr_t fault_sp(void* ucv) {
    ucontext_t* uc = static_cast<ucontext_t*>(ucv);
#if defined(__linux__) && defined(__x86_64__)
    return uintptr_t(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__linux__) && defined(__aarch64__)
    return uintptr_t(uc->uc_mcontext.sp);
#elif defined(__APPLE__) && defined(__aarch64__)
    return uintptr_t(uc->uc_mcontext->__ss.__sp);
#elif defined(__APPLE__) && defined(__x86_64__)
    return uintptr_t(uc->uc_mcontext->__ss.__rsp);
#else
    (void)uc;
    return 0;
#endif
}

// on_fault turns a memory fault inside a kernel into a dispatch error: it
// jumps back to the scheduler of the worker whose fiber faulted, which
// abandons the threadgroup. Kernel code is plain computation (no locks, no
// allocation), so leaving it mid-way is safe. Faults anywhere else go to the
// handler that was installed before (the Go runtime's).
void on_fault(int sig, siginfo_t* si, void* uc) {
    uintptr_t sp = fault_sp(uc);
    int n = nregistry.load(std::memory_order_acquire);
    for (int i = 0; i < n; i++) {
        Worker* w = registry[i];
        uintptr_t lo = reinterpret_cast<uintptr_t>(w->stacks);
        uintptr_t hi = lo + size_t(w->nstacks) * kStacks.stride;
        if (w->running && sp >= lo && sp < hi) {
            w->fault_addr = reinterpret_cast<uintptr_t>(si->si_addr);
            w->fault_sig = sig;
            siglongjmp(w->jb, 1);
        }
    }
    struct sigaction* old = sig == SIGSEGV ? &old_segv : &old_bus;
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) old->sa_sigaction(sig, si, uc);
        return;
    }
    if (old->sa_handler == SIG_IGN) return;
    if (old->sa_handler == SIG_DFL) {
        // Returning re-executes the faulting instruction under the default
        // action.
        signal(sig, SIG_DFL);
        return;
    }
    old->sa_handler(sig);
}

void install_fault_handler() {
    static bool done = false;
    if (done) return;
    done = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sigemptyset(&sa.sa_mask);
    // SA_NODEFER: the handler leaves by siglongjmp without restoring the
    // signal mask, so the signal must not be blocked while it runs.
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
}

// Pool threads need their own signal stack: a fiber that overflows its
// stack cannot run the handler there.
void set_alt_stack() {
    stack_t st;
    st.ss_size = 64 * 1024;
    st.ss_sp = mmap(nullptr, st.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    st.ss_flags = 0;
    if (st.ss_sp != MAP_FAILED) sigaltstack(&st, nullptr);
}

}  // namespace

// ---------------------------------------------------------------- context switch

extern "C" __attribute__((visibility("hidden"))) void emu_fiber_main(Fiber* f);

#ifndef EMU_UCONTEXT
// emu_switch_ctx saves the callee-saved registers on the current stack,
// stores the stack pointer in *save, and resumes the context whose stack
// pointer is to. A fiber's first switch resumes the frame init_fiber built,
// whose return address is emu_fiber_tramp and whose first saved register
// (rbx, x19) holds the Fiber*.
extern "C" void emu_switch_ctx(void** save, void* to);
extern "C" void emu_fiber_tramp();

// Symbol spelling: Mach-O prefixes C names with an underscore and has no
// .type/.size; ELF hides with .hidden, Mach-O with .private_extern.
#if defined(__APPLE__)
#define EMU_ASM_SYM(n) "_" #n
#define EMU_ASM_BEGIN(n) ".globl _" #n "\n.private_extern _" #n "\n.p2align 4\n_" #n ":\n"
#define EMU_ASM_END(n) "\n"
#else
#define EMU_ASM_SYM(n) #n
#define EMU_ASM_BEGIN(n) ".globl " #n "\n.hidden " #n "\n.type " #n ", %function\n.p2align 4\n" #n ":\n"
#define EMU_ASM_END(n) ".size " #n ", .-" #n "\n"
#endif

#if defined(__x86_64__)
// The System V ABI's callee-saved registers: rbx, rbp, r12-r15.
asm(".text\n"
    EMU_ASM_BEGIN(emu_switch_ctx)
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    EMU_ASM_END(emu_switch_ctx)
    EMU_ASM_BEGIN(emu_fiber_tramp)
    "    movq %rbx, %rdi\n"
    "    call " EMU_ASM_SYM(emu_fiber_main) "\n"
    "    ud2\n"
    EMU_ASM_END(emu_fiber_tramp));
#elif defined(__aarch64__)
// AAPCS64 (and Apple's arm64 ABI, which follows it here): x19-x28, the
// frame pointer x29, the link register x30 and the low halves d8-d15 of
// v8-v15 are callee-saved; x18 is the platform register on Apple systems
// and is left alone. The frame is 20 words (160 bytes, keeping sp 16-byte
// aligned): x19..x30 at [0, 96), d8..d15 at [96, 160).
constexpr int kSwitchFrameWords = 20;
asm(".text\n"
    EMU_ASM_BEGIN(emu_switch_ctx)
    "    sub sp, sp, #160\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mov x9, sp\n"
    "    str x9, [x0]\n"
    "    mov sp, x1\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #160\n"
    "    ret\n"
    EMU_ASM_END(emu_switch_ctx)
    // Entered by emu_switch_ctx's ret with sp at the stack's 16-byte
    // aligned top and x29 = 0, which ends the frame chain for unwinders.
    EMU_ASM_BEGIN(emu_fiber_tramp)
    "    mov x0, x19\n"
    "    bl " EMU_ASM_SYM(emu_fiber_main) "\n"
    "    brk #1\n"
    EMU_ASM_END(emu_fiber_tramp));
#endif
#endif

namespace {

void init_fiber(Worker* w, int i, Fiber* f) {
    unsigned char* base = w->stacks + size_t(i) * kStacks.stride + kStacks.guard;
#ifdef EMU_UCONTEXT
    ucontext_t* c = &w->ctx[i];
    getcontext(c);
    c->uc_stack.ss_sp = base;
    c->uc_stack.ss_size = kStacks.usable;
    c->uc_link = nullptr;
    makecontext(c, (void (*)())emu_fiber_main, 1, f);
    f->sp = c;
#else
    uintptr_t top = (reinterpret_cast<uintptr_t>(base) + kStacks.usable) & ~uintptr_t(15);
    uint64_t* sp;
#if defined(__x86_64__)
    // After emu_switch_ctx's ret the stack pointer is top-16, 16-byte
    // aligned, so the trampoline's call sees the ABI's alignment.
    sp = reinterpret_cast<uint64_t*>(top - 16);
    *--sp = reinterpret_cast<uint64_t>(&emu_fiber_tramp);
    *--sp = 0;                                  // rbp
    *--sp = reinterpret_cast<uint64_t>(f);      // rbx: the trampoline's argument
    *--sp = 0;                                  // r12
    *--sp = 0;                                  // r13
    *--sp = 0;                                  // r14
    *--sp = 0;                                  // r15
#else
    // emu_switch_ctx's frame, lowest address first: x19 (the trampoline's
    // argument), x20-x28, x29 = 0, x30 = the trampoline, d8-d15 = 0. Its
    // ret leaves sp at top.
    sp = reinterpret_cast<uint64_t*>(top) - kSwitchFrameWords;
    memset(sp, 0, kSwitchFrameWords * sizeof(uint64_t));
    sp[0] = reinterpret_cast<uint64_t>(f);
    sp[11] = reinterpret_cast<uint64_t>(&emu_fiber_tramp);
#endif
    f->sp = sp;
#endif
}

inline void switch_in(Worker* w, Fiber* f) {
    emu::cur = f;
    w->current = int(f - w->fibers.data());
#ifdef EMU_UCONTEXT
    swapcontext(&w->sched_ctx, static_cast<ucontext_t*>(f->sp));
#else
    emu_switch_ctx(&w->sched_sp, f->sp);
#endif
}

inline void switch_out(Worker* w, Fiber* f) {
#ifdef EMU_UCONTEXT
    swapcontext(static_cast<ucontext_t*>(f->sp), &w->sched_ctx);
#else
    emu_switch_ctx(&f->sp, w->sched_sp);
#endif
}

// start_stack gives a fiber that has not run yet a stack.
inline void start_stack(Worker* w, int i) {
    if (w->stack_of[i] < 0) {
        w->stack_of[i] = w->free_stacks.back();
        w->free_stacks.pop_back();
        init_fiber(w, w->stack_of[i], &w->fibers[i]);
    }
}

int pick(Worker* w);

// yield leaves a fiber that now waits (or, if the barrier it arrived at let
// it go, may go on) for the next ready fiber, directly rather than through
// the scheduler: half the switches per barrier. With nothing ready it goes
// back to the scheduler, which then reports the deadlock.
void yield(Worker* w, Fiber* f) {
    int i = pick(w);
    if (i < 0) {
        switch_out(w, f);
        return;
    }
    Fiber* next = &w->fibers[i];
    if (next == f) return;
    start_stack(w, i);
    emu::cur = next;
    w->current = i;
#ifdef EMU_UCONTEXT
    swapcontext(static_cast<ucontext_t*>(f->sp), static_cast<ucontext_t*>(next->sp));
#else
    emu_switch_ctx(&f->sp, next->sp);
#endif
}

const char* op_name(int op) {
    switch (op) {
        case emu::kOpBarrier: return "simdgroup_barrier";
        case emu::kOpReduce: return "a SIMD-group reduction (simd_sum/max/min/…)";
        case emu::kOpScan: return "a SIMD-group prefix scan";
        case emu::kOpShuffle: return "a SIMD-group shuffle or broadcast";
        case emu::kOpVote: return "a SIMD-group vote (simd_ballot/any/all)";
        case emu::kOpMatrix: return "a simdgroup_matrix operation";
        case emu::kOpQuad: return "a quad-group function";
    }
    return "a SIMD-group function";
}

void set_fault(Worker* w, const char* fmt, ...) {
    if (w->faulted) return;
    w->faulted = true;
    const Group& g = w->g;
    int k = snprintf(w->msg, sizeof w->msg, "threadgroup (%u,%u,%u): ", g.pos[0], g.pos[1], g.pos[2]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg + k, sizeof w->msg - k, fmt, ap);
    va_end(ap);
}

void make_ready(Worker* w, Fiber* f) {
    f->state = kReady;
    w->ready.push_back(int(f - w->fibers.data()));
}

void release_group(Worker* w) {
    w->arrived = 0;
    for (int i = 0; i < w->g.n; i++)
        if (w->fibers[i].state == kWaitGroup) make_ready(w, &w->fibers[i]);
}

void release_simd(Worker* w, int sg) {
    Simd& s = w->simd[sg];
    uint32_t mask = 0;
    int first = sg * emu::kSimdWidth;
    int last = first + emu::kSimdWidth < w->g.n ? first + emu::kSimdWidth : w->g.n;
    for (int i = first; i < last; i++) {
        if (w->fibers[i].state == kWaitSimd) {
            mask |= 1u << (i - first);
            make_ready(w, &w->fibers[i]);
        }
    }
    s.mask = mask;
    s.arrived = 0;
    s.op = 0;
    s.cached[s.phase] = 0;
    // The next collective writes the other slot row: lanes released here
    // may not have read this one yet.
    s.phase ^= 1u;
}

int pick(Worker* w) {
    if (w->head >= w->ready.size()) {
        w->ready.clear();
        w->head = 0;
        return -1;
    }
    if (w->shuffle) {
        size_t span = w->ready.size() - w->head;
        size_t j = w->head + size_t(w->next_rand() % span);
        int t = w->ready[j];
        w->ready[j] = w->ready[w->head];
        w->ready[w->head] = t;
    }
    return w->ready[w->head++];
}

void describe_deadlock(Worker* w) {
    // Name up to a few waiting threads and what they wait in.
    char buf[512];
    int k = 0;
    int shown = 0, waiting = 0;
    for (int i = 0; i < w->g.n; i++) {
        Fiber& f = w->fibers[i];
        if (f.state == kDone) continue;
        waiting++;
        if (shown < 4) {
            const char* what = f.state == kWaitGroup ? "threadgroup_barrier" : op_name(f.op);
            k += snprintf(buf + k, sizeof buf - k, "%sthread %d (SIMD group %u lane %u) in %s", shown ? "; " : "", i,
                          f.sg, f.lane, what);
            if (k >= int(sizeof buf)) k = int(sizeof buf) - 1;
            shown++;
        }
    }
    set_fault(w,
              "deadlock: %d of %d threads wait forever (%s%s) and %d have returned; every thread must reach "
              "each threadgroup_barrier (none may return before it), and every live lane of a SIMD group the "
              "same SIMD-group functions in the same order",
              waiting, w->g.n, buf, waiting > shown ? "; …" : "", w->g.n - waiting);
}

void describe_memory_fault(Worker* w, const Desc* d) {
    const Fiber& f = w->fibers[w->current];
    char where[256];
    uintptr_t a = w->fault_addr;
    uintptr_t lo = reinterpret_cast<uintptr_t>(w->stacks);
    uintptr_t hi = lo + size_t(w->nstacks) * kStacks.stride;
    snprintf(where, sizeof where, "address %#lx is outside every bound buffer", (unsigned long)a);
    if (a >= lo && a < hi) {
        snprintf(where, sizeof where,
                 "the thread overflowed its %zu KiB stack (large local arrays, deep recursion)", kStacks.usable / 1024);
    } else {
        for (int i = 0; i < emu::kMaxBuffers; i++) {
            uint64_t b = d->buf[i], len = d->buflen[i];
            if (b == 0) continue;
            if (a >= b + len && a < b + len + (1u << 20)) {
                snprintf(where, sizeof where, "address %#lx is %llu bytes past the end of [[buffer(%d)]] (%llu bytes)",
                         (unsigned long)a, (unsigned long long)(a - b - len), i, (unsigned long long)len);
                break;
            }
            if (a < b && b - a <= (1u << 20)) {
                snprintf(where, sizeof where, "address %#lx is %llu bytes before the start of [[buffer(%d)]] (%llu bytes)",
                         (unsigned long)a, (unsigned long long)(b - a), i, (unsigned long long)len);
                break;
            }
        }
    }
    set_fault(w, "%s in thread %u (position in threadgroup %u,%u,%u): %s",
              w->fault_sig == SIGBUS ? "bus error" : "memory fault", f.tid, f.local[0], f.local[1], f.local[2], where);
}

// run_group runs one threadgroup to completion (or a fault).
void run_group(Worker* w, const Desc* d, uint32_t x, uint32_t y, uint32_t z, uint64_t linear) {
    Group& g = w->g;
    g.d = d;
    g.pos[0] = x;
    g.pos[1] = y;
    g.pos[2] = z;
    int n = g.n;
    w->shuffle = d->seed != 0;
    if (w->shuffle) {
        w->rng = d->seed ^ (linear * 0xd1342543de82ef95ull);
        w->next_rand();
        g.fill = uint8_t(w->next_rand() | 1);
    } else {
        g.fill = 0;
    }
    // Pattern-fill the [[threadgroup(n)]] arguments; body declarations are
    // filled as they are first allocated.
    if (g.params_end) memset(g.shared, g.fill, g.params_end);
    g.filled = g.params_end;

    w->live = n;
    w->arrived = 0;
    w->done = 0;
    w->faulted = false;
    w->ready.clear();
    w->head = 0;
    for (int s = 0; s < g.nsimd; s++) {
        Simd& sm = w->simd[s];
        int lanes = n - s * emu::kSimdWidth;
        sm.live = lanes < emu::kSimdWidth ? lanes : emu::kSimdWidth;
        sm.size = sm.live;
        sm.arrived = 0;
        sm.op = 0;
        sm.mask = 0;
        sm.phase = 0;
        sm.cached[0] = sm.cached[1] = 0;
    }
    for (int i = 0; i < n; i++) {
        Fiber* f = &w->fibers[i];
        f->g = &g;
        f->tid = uint32_t(i);
        f->local[0] = uint32_t(i) % g.size[0];
        f->local[1] = (uint32_t(i) / g.size[0]) % g.size[1];
        f->local[2] = uint32_t(i) / (g.size[0] * g.size[1]);
        f->lane = uint32_t(i) % emu::kSimdWidth;
        f->sg = uint32_t(i) / emu::kSimdWidth;
        f->tg_off = g.params_end;
        f->state = kReady;
        f->op = 0;
        w->stack_of[i] = -1;
        w->ready.push_back(i);
    }
    w->free_stacks.clear();
    for (int i = n - 1; i >= 0; i--) w->free_stacks.push_back(i);
    if (sigsetjmp(w->jb, 0) != 0) {
        // A fiber faulted (on_fault jumped here); the rest of the
        // threadgroup is abandoned.
        w->running = false;
        emu::cur = nullptr;
        describe_memory_fault(w, d);
        return;
    }
    w->running = true;
    for (;;) {
        if (w->faulted) break;
        int i = pick(w);
        if (i < 0) break;
        start_stack(w, i);
        switch_in(w, &w->fibers[i]);
        // Control comes back from whichever fiber finished (or found
        // nothing ready): fibers pass control among themselves at barriers.
        int back = w->current;
        if (w->fibers[back].state == kDone) w->free_stacks.push_back(w->stack_of[back]);
    }
    w->running = false;
    emu::cur = nullptr;
    if (!w->faulted && w->done < n) describe_deadlock(w);
}

// ---------------------------------------------------------------- the pool

struct Job {
    const Desc* d;
    uint64_t total;
    std::atomic<uint64_t> next{0};
    std::atomic<bool> faulted{false};
    std::mutex err_mu;
};

void prepare(Worker* w, const Desc* d) {
    Group& g = w->g;
    g.size[0] = d->threads[0];
    g.size[1] = d->threads[1];
    g.size[2] = d->threads[2];
    g.n = int(d->threads[0] * d->threads[1] * d->threads[2]);
    g.nsimd = (g.n + emu::kSimdWidth - 1) / emu::kSimdWidth;
    g.fibers = w->fibers.data();
    g.simd = w->simd.data();
    g.shared = w->shared;
    uint32_t off = 0;
    for (int i = 0; i < emu::kMaxBuffers; i++) {
        g.tgoff[i] = off;
        off += (d->tglen[i] + 15u) & ~15u;
    }
    g.params_end = off;
}

void run_share(Worker* w, Job* job) {
    tw = w;
    const Desc* d = job->d;
    prepare(w, d);
    uint64_t gx = d->groups[0], gy = d->groups[1];
    for (;;) {
        if (job->faulted.load(std::memory_order_relaxed)) break;
        uint64_t idx = job->next.fetch_add(1, std::memory_order_relaxed);
        if (idx >= job->total) break;
        uint32_t x = uint32_t(idx % gx), y = uint32_t((idx / gx) % gy), z = uint32_t(idx / (gx * gy));
        run_group(w, d, x, y, z, idx);
        if (w->faulted) {
            std::lock_guard<std::mutex> lk(job->err_mu);
            if (!job->faulted.load()) {
                snprintf(const_cast<Desc*>(d)->err, sizeof d->err, "%s", w->msg);
                job->faulted.store(true);
            }
            break;
        }
    }
    tw = nullptr;
}

struct Pool {
    std::mutex mu;
    std::condition_variable wake, idle;
    std::vector<std::thread> threads;
    std::vector<Worker*> workers;
    Job* job = nullptr;
    uint64_t gen = 0;
    int want = 0;     // workers asked to take part in this generation
    int running = 0;  // of those, still working

    void grow(int n) {
        while (int(threads.size()) < n) {
            int id = int(threads.size());
            workers.push_back(new Worker());
            threads.emplace_back([this, id] { loop(id); });
            threads.back().detach();
        }
    }

    void loop(int id) {
        set_alt_stack();
        Worker* w = workers[id];
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            wake.wait(lk, [&] { return gen != seen && id < want; });
            seen = gen;
            Job* j = job;
            lk.unlock();
            run_share(w, j);
            lk.lock();
            if (--running == 0) idle.notify_one();
        }
    }
};

// stacks_error reports a failed ensure_stacks (errno from mmap or mprotect).
void stacks_error(Desc* d) {
    snprintf(d->err, sizeof d->err,
             "cannot map fiber stacks (%zu KiB each with a %zu KiB guard): %s; the process is out of address space "
             "or of memory map regions (vm.max_map_count on Linux)",
             kStacks.usable / 1024, kStacks.guard / 1024, strerror(errno));
}

std::mutex dispatch_mu;
Pool* pool = nullptr;
Worker* caller = nullptr;

}  // namespace

extern "C" {

void emu_fiber_main(Fiber* f) {
    f->g->d->fn();
    Worker* w = tw;
    f->state = kDone;
    w->done++;
    w->live--;
    Simd& s = w->simd[f->sg];
    s.live--;
    // Lanes that returned no longer take part in SIMD-group functions (they
    // are inactive, as on Apple GPUs). A threadgroup barrier, though, must
    // be reached by every thread of the group (MSL's rule), so a returned
    // thread leaves the others waiting: the scheduler reports the deadlock.
    if (s.arrived > 0 && s.arrived == s.live) release_simd(w, int(f->sg));
    switch_out(w, f);
    __builtin_trap();
}

void emu_tg_barrier() {
    Fiber* f = emu::cur;
    Worker* w = tw;
    f->state = kWaitGroup;
    w->arrived++;
    if (w->arrived == w->g.n) release_group(w);
    yield(w, f);
}

const unsigned char (*emu_simd_xchg(int op, const void* v, size_t n, uint32_t* mask))[16] {
    Fiber* f = emu::cur;
    Worker* w = tw;
    Simd& s = w->simd[f->sg];
    if (s.arrived > 0 && s.op != op) {
        set_fault(w, "lanes of SIMD group %u reached different SIMD-group functions (%s and %s): SIMD-group "
                     "functions need uniform control flow within the SIMD group",
                  f->sg, op_name(s.op), op_name(op));
        f->state = kDone;
        switch_out(w, f);
    }
    s.op = op;
    uint32_t ph = s.phase;
    if (n) memcpy(s.slots[ph][f->lane], v, n);
    f->state = kWaitSimd;
    f->op = op;
    s.arrived++;
    if (s.arrived == s.live) release_simd(w, int(f->sg));
    yield(w, f);
    // The mask is read before this lane's next collective, which cannot
    // complete (and overwrite it) without this lane.
    *mask = s.mask;
    return s.slots[ph];
}

void* emu_tg_alloc(size_t size, size_t align) {
    Fiber* f = emu::cur;
    Group* g = f->g;
    uint64_t off = (uint64_t(f->tg_off) + align - 1) & ~uint64_t(align - 1);
    if (off + size > emu::kThreadgroupMemory) {
        set_fault(tw, "threadgroup memory of %llu bytes exceeds Apple GPUs' 32 KiB (declared variables plus "
                      "[[threadgroup(n)]] arguments)",
                  (unsigned long long)(off + size));
        f->state = kDone;
        switch_out(tw, f);
    }
    f->tg_off = uint32_t(off + size);
    if (f->tg_off > g->filled) {
        memset(g->shared + g->filled, g->fill, f->tg_off - g->filled);
        g->filled = f->tg_off;
    }
    return g->shared + off;
}

void emu_fault(const char* msg) {
    Fiber* f = emu::cur;
    set_fault(tw, "%s", msg);
    f->state = kDone;
    switch_out(tw, f);
    __builtin_trap();
}

// emu_dispatch runs one dispatch to completion; 0 on success, 1 with d->err
// set on a fault or invalid sizes.
__attribute__((visibility("default"))) int emu_dispatch(Desc* d) {
    d->err[0] = 0;
    uint64_t nthr = uint64_t(d->threads[0]) * d->threads[1] * d->threads[2];
    if (nthr == 0 || nthr > uint64_t(emu::kMaxThreads)) {
        snprintf(d->err, sizeof d->err, "%llu threads per threadgroup: must be 1 to %d",
                 (unsigned long long)nthr, emu::kMaxThreads);
        return 1;
    }
    uint64_t total = uint64_t(d->groups[0]) * d->groups[1] * d->groups[2];
    if (total == 0) return 0;
    uint64_t tgmem = 0;
    for (int i = 0; i < emu::kMaxBuffers; i++) tgmem += (d->tglen[i] + 15u) & ~15u;
    if (tgmem > emu::kThreadgroupMemory) {
        snprintf(d->err, sizeof d->err,
                 "[[threadgroup(n)]] arguments total %llu bytes, over Apple GPUs' 32 KiB",
                 (unsigned long long)tgmem);
        return 1;
    }
    std::lock_guard<std::mutex> lk(dispatch_mu);
    // Block signals while fibers run on this thread; the pool's threads
    // inherit the full mask when they are created here.
    // Memory faults stay deliverable, so that on_fault can report them.
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    install_fault_handler();

    if (!caller) caller = new Worker();
    bool ok = caller->ensure_stacks(int(nthr));
    int want = int(d->nthreads ? d->nthreads : std::thread::hardware_concurrency());
    if (want < 1) want = 1;
    if (uint64_t(want) > total) want = int(total);
    Job job;
    job.d = d;
    job.total = total;
    if (!ok) {
        stacks_error(d);
    } else if (want == 1) {
        run_share(caller, &job);
    } else {
        if (!pool) pool = new Pool();
        pool->grow(want - 1);
        for (int i = 0; i < want - 1 && ok; i++) ok = pool->workers[i]->ensure_stacks(int(nthr));
        if (ok) {
            {
                std::lock_guard<std::mutex> plk(pool->mu);
                pool->job = &job;
                pool->want = want - 1;
                pool->running = want - 1;
                pool->gen++;
            }
            pool->wake.notify_all();
            run_share(caller, &job);
            std::unique_lock<std::mutex> plk(pool->mu);
            pool->idle.wait(plk, [] { return pool->running == 0; });
            pool->job = nullptr;
        } else {
            stacks_error(d);
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return d->err[0] ? 1 : 0;
}

// Checks of the fiber stacks, for tests. emu_stack_layout writes the layout
// for a page size: guard, usable and slot bytes.
__attribute__((visibility("default"))) void emu_stack_layout(size_t page, size_t* out) {
    StackLayout l = stack_layout(page);
    out[0] = l.guard;
    out[1] = l.usable;
    out[2] = l.stride;
}

// emu_check_stacks maps the calling thread's fiber stacks as a dispatch
// does and checks them against this machine's page size: every guard page
// is inaccessible, and every usable stack can be written from end to end
// (as Apple's makecontext clears a ucontext stack before the first switch).
// The kernel does the accesses (read from /dev/zero into the stack, write
// from a guard into a pipe), so a bad page gives EFAULT, not a fault. 0 if
// all holds; 1 with err set otherwise.
__attribute__((visibility("default"))) int emu_check_stacks(char* err, size_t n) {
    std::lock_guard<std::mutex> lk(dispatch_mu);
    err[0] = 0;
    size_t page = page_size();
    const StackLayout& l = kStacks;
    if (l.guard < page || l.guard % page || l.usable < kStackSize || l.usable % page) {
        snprintf(err, n, "stack layout (guard %zu, usable %zu bytes) is not in whole pages of %zu bytes", l.guard,
                 l.usable, page);
        return 1;
    }
    if (!caller) caller = new Worker();
    if (!caller->ensure_stacks(emu::kMaxThreads)) {
        snprintf(err, n, "cannot map fiber stacks with %zu-byte guards: %s", l.guard, strerror(errno));
        return 1;
    }
    int zero = open("/dev/zero", O_RDONLY);
    int fds[2];
    if (zero < 0 || pipe(fds) != 0) {
        snprintf(err, n, "opening /dev/zero and a pipe: %s", strerror(errno));
        if (zero >= 0) close(zero);
        return 1;
    }
    for (int i = 0; i < caller->nguarded && !err[0]; i++) {
        unsigned char* slot = caller->stacks + size_t(i) * l.stride;
        for (size_t off = 0; off < l.guard; off += page) {
            errno = 0;
            if (write(fds[1], slot + off, 1) != -1 || errno != EFAULT) {
                snprintf(err, n, "stack %d: guard page at +%zu of its slot is accessible", i, off);
                break;
            }
        }
        unsigned char* st = slot + l.guard;
        for (size_t done = 0; done < l.usable && !err[0];) {
            ssize_t r = read(zero, st + done, l.usable - done);
            if (r <= 0) {
                snprintf(err, n, "stack %d: byte %zu of its %zu usable bytes cannot be written: %s", i, done,
                         l.usable, strerror(errno));
                break;
            }
            done += size_t(r);
        }
        madvise(st, l.usable, MADV_DONTNEED);
    }
    close(zero);
    close(fds[0]);
    close(fds[1]);
    return err[0] ? 1 : 0;
}

}  // extern "C"

static_assert(offsetof(Desc, groups) == 8, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, threads) == 20, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, seed) == 32, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, buf) == 40, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, tglen) == 288, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, nthreads) == 412, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, err) == 416, "Desc layout: keep desc.go in step");
static_assert(offsetof(Desc, buflen) == 1440, "Desc layout: keep desc.go in step");
