// HostThreads.h - the runtime's persistent pool of host threads for data-parallel loops (host AdamW).
#pragma once

#include <cstddef>
#include <functional>

namespace megatrain::runtime {

// The number of host threads parallel loops use: MEGATRAIN_HOST_THREADS when
// set (a positive integer; Error otherwise), else std::thread::hardware_concurrency()
// (1 when unknown). Read once, on the first call.
unsigned hostThreadCount();

// Runs task(0) .. task(tasks - 1), each exactly once, on the pool's
// hostThreadCount() - 1 workers and the calling thread, and returns when all
// have finished. Tasks run in any order and concurrently; `task` must not
// throw (a task that does ends the program). The workers start on the first call that needs them.
//
// Thread safety: any thread may call it; concurrent calls run one after the
// other (each waits for the pool). A call from inside a task (nested) runs its
// tasks on the calling thread, in order. With one thread, or tasks <= 1,
// everything runs on the calling thread.
void hostParallelFor(unsigned tasks, const std::function<void(unsigned)>& task);

// Splits [0, count) into `chunks` contiguous ranges whose boundaries are
// multiples of 16 elements (a 64-byte line of f32) and runs run(begin, end) for
// each non-empty one through hostParallelFor.
void hostParallelRanges(size_t count, unsigned chunks, const std::function<void(size_t, size_t)>& run);

// memset and memcpy over the host threads when `bytes` is large (a tensor of
// a big model: one thread does not reach the memory's bandwidth), else inline.
void hostParallelMemset(void* dst, int value, size_t bytes);
void hostParallelMemcpy(void* dst, const void* src, size_t bytes);

}  // namespace megatrain::runtime
