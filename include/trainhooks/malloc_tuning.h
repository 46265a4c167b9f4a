// Malloc tuning: the glibc settings under which LibTorch's CPU steps run at full speed, applied
// by the library so that no training program has to.
//
// LibTorch allocates each step's activations and gradients with malloc. With glibc's defaults,
// blocks above the dynamic mmap threshold come from mmap and go back at free, and the top of the
// heap is trimmed as soon as 128 KiB are free: each step maps, faults in page by page (the kernel
// clears every 4 KiB) and unmaps the same memory again. Measured on the Fashion-MNIST CNN, that is
// 30-44 % of the step (docs/benchmarks.md). The first Session of a process therefore sets
//   M_MMAP_THRESHOLD = 128 MiB  (blocks below it come from the heap and are reused: also an
//                               evaluation batch's largest activation, e.g. 1,000 images through
//                               a 32-channel 3x3 convolution, 86 MB, which at 64 MiB was mapped,
//                               faulted in and unmapped at every batch, twice as slow)
//   M_TRIM_THRESHOLD = 256 MiB  (up to that much freed memory stays in the process)
// the same as GLIBC_TUNABLES=glibc.malloc.mmap_threshold=134217728:glibc.malloc.trim_threshold=
// 268435456. The cost: a process keeps up to 256 MiB of freed memory (RSS) instead of returning
// it at once.
//
// The library leaves malloc alone when the user chose otherwise:
//   - TRAINHOOKS_MALLOC_TUNING=0 in the environment;
//   - set_malloc_tuning(false) called before the first Session;
//   - GLIBC_TUNABLES naming a glibc.malloc.mmap_threshold or glibc.malloc.trim_threshold, or
//     MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ set (glibc's own ways: they stay in force);
//   - a C library other than glibc (nothing to tune).
//
//   th::set_malloc_tuning(false);   // before any Session: keep glibc's defaults
#pragma once

#include <cstddef>
#include <string>

namespace trainhooks {

// What apply_malloc_tuning() did, or would do.
enum class MallocTuning {
  kNotYet,        // no Session has been created yet
  kApplied,       // the two settings above are in force
  kOffByEnv,      // TRAINHOOKS_MALLOC_TUNING=0
  kOffByCall,     // set_malloc_tuning(false)
  kUserSettings,  // GLIBC_TUNABLES or MALLOC_*_ names its own thresholds
  kUnsupported,   // not glibc
};

inline constexpr std::size_t kMallocMmapThreshold = std::size_t{128} << 20;
inline constexpr std::size_t kMallocTrimThreshold = std::size_t{256} << 20;

// Before the first Session: whether the library may tune malloc (default true). Later calls have
// no effect on settings already applied.
void set_malloc_tuning(bool enabled);

// Applies the tuning once per process, unless one of the reasons above says not to; Session's
// constructor calls it. A program that does LibTorch work before its first Session (timing,
// preprocessing) calls it first to have that tuned too. Thread-safe; later calls return the first
// call's outcome.
MallocTuning apply_malloc_tuning();

// The outcome so far (kNotYet before the first apply_malloc_tuning()).
MallocTuning malloc_tuning();

// "applied", "off (TRAINHOOKS_MALLOC_TUNING=0)", ...: for logs and reports.
std::string describe(MallocTuning tuning);

}  // namespace trainhooks
