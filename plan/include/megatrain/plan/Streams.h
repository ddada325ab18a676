// Streams.h - the names of a plan's streams (docs/plan.md, "Streams"): what the compiler's
// emitter writes and what the simulator and the runtime look for.
#pragma once

namespace megatrain::plan {

inline constexpr const char* kComputeStream = "compute";    // kernels
inline constexpr const char* kHostToDeviceStream = "h2d";   // copies to the device
// The fetches of host-resident parameters' compute copies: copies to the device too, over the
// same link as h2d's, on a queue of their own so that a fetch never waits behind a prefetch
// that waits for its bytes.
inline constexpr const char* kParamFetchStream = "fetch";
inline constexpr const char* kDeviceToHostStream = "d2h";   // copies off it
inline constexpr const char* kHostStream = "host";          // host tasks
inline constexpr const char* kOptimizerStream = "optimizer";  // device-resident updates, on their own stream
inline constexpr const char* kDiskStream = "disk";          // copies between the disk tier and its staging

}  // namespace megatrain::plan
