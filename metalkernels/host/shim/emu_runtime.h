// emu_runtime.h: the state the fiber runner shares with kernel code.
//
// A dispatch (Desc) is filled in by the Go side and handed to emu_dispatch.
// Each worker runs whole threadgroups (Group); inside a threadgroup every
// thread is a Fiber on its own stack, and the kernel's generated entry point
// reads its position and arguments from the current fiber (emu::cur, one per
// OS thread, switched with the fiber). Barriers and SIMD-group collectives
// call back into the runner (emu_runtime.cc), which switches to the next
// ready fiber until everyone the barrier waits for has arrived.
#pragma once

#include <cstddef>
#include <cstdint>

namespace emu {

constexpr int kMaxBuffers = 31;
constexpr int kSimdWidth = 32;
constexpr int kMaxThreads = 1024;
// Apple GPUs give a threadgroup 32 KiB; a kernel that asks for more fails on
// a Mac, so the emulator refuses it too.
constexpr uint32_t kThreadgroupMemory = 32 * 1024;

// Desc is one dispatch, laid out for the Go side (desc.go writes it): keep
// the two in step.
struct Desc {
    void (*fn)();                 // 0: generated entry point
    uint32_t groups[3];           // 8: threadgroups per grid
    uint32_t threads[3];          // 20: threads per threadgroup
    uint64_t seed;                // 32: 0 = thread order, else shuffled
    uint64_t buf[kMaxBuffers];    // 40: [[buffer(n)]] addresses
    uint32_t tglen[kMaxBuffers];  // 288: [[threadgroup(n)]] lengths
    uint32_t nthreads;            // 412: OS threads to use (0 = all)
    char err[1024];               // 416: first fault, NUL-terminated
    uint64_t buflen[kMaxBuffers]; // 1440: bound lengths, for fault messages
};

// Position attribute kinds, as the generator names them.
enum Pos {
    kThreadPositionInGrid,
    kThreadgroupPositionInGrid,
    kThreadPositionInThreadgroup,
    kThreadIndexInThreadgroup,
    kThreadsPerThreadgroup,
    kThreadgroupsPerGrid,
    kThreadsPerGrid,
    kSimdgroupIndexInThreadgroup,
    kThreadIndexInSimdgroup,
    kSimdgroupsPerThreadgroup,
    kThreadsPerSimdgroup,
    kThreadIndexInQuadgroup,
    kQuadgroupIndexInThreadgroup,
};

// Collective kinds: lanes that meet at one SIMD-group barrier must all be
// doing the same thing, or the kernel's control flow diverged.
enum Op {
    kOpBarrier = 1,
    kOpReduce,
    kOpScan,
    kOpShuffle,
    kOpVote,
    kOpMatrix,
    kOpQuad,
};

struct Group;

struct Fiber {
    void* sp;            // saved stack pointer while switched out
    Group* g;
    uint32_t tid;        // thread_index_in_threadgroup
    uint32_t local[3];   // thread_position_in_threadgroup
    uint32_t lane;       // thread_index_in_simdgroup
    uint32_t sg;         // simdgroup_index_in_threadgroup
    uint32_t tg_off;     // bump offset for threadgroup variable declarations
    int state;           // see emu_runtime.cc
    int op;              // collective this fiber waits in
    const char* where;   // name of what it waits in, for deadlock reports
};

struct Simd {
    int size;            // lanes in this SIMD group (32 but in a partial last one)
    int live;            // lanes not yet returned
    int arrived;
    int op;
    uint32_t mask;       // lanes present at the last completed collective
    uint32_t phase;      // slot buffer in use, flips per collective
    alignas(16) unsigned char slots[2][kSimdWidth][16];
    // A reduction's result, computed by the first lane to resume and read
    // by the others (per slot row; cleared when the row is released).
    alignas(16) unsigned char cache[2][16];
    uint8_t cached[2];
};

struct Group {
    const Desc* d;
    uint32_t pos[3];     // threadgroup_position_in_grid
    uint32_t size[3];    // threads per threadgroup
    int n;               // threads
    int nsimd;
    Fiber* fibers;
    Simd* simd;
    unsigned char* shared;   // threadgroup memory
    uint32_t tgoff[kMaxBuffers]; // offsets of [[threadgroup(n)]] arguments
    uint32_t params_end;     // where body declarations start
    uint32_t filled;         // high-water mark of pattern-filled bytes
    unsigned char fill;      // pattern byte (0 in thread order)
};

// cur is the running fiber of this OS thread.
extern thread_local Fiber* cur;

}  // namespace emu

extern "C" {
// Runner entry points the kernel side calls.
void emu_tg_barrier();
// emu_simd_xchg writes n bytes of v into the lane's slot, waits for the SIMD
// group and returns the slot row of that collective; *mask gets the lanes
// that took part.
const unsigned char (*emu_simd_xchg(int op, const void* v, size_t n, uint32_t* mask))[16];
void* emu_tg_alloc(size_t size, size_t align);
[[noreturn]] void emu_fault(const char* msg);
}
