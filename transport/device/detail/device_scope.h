#pragma once
// What DeviceScope (cuda/error.h) does with the calling thread's current CUDA device,
// decided without CUDA so that the rule is tested in every build.
//
// THE RULE. A thread that already has a current context (a consumer's thread: PyTorch
// chose its device) gets that device back when the scope ends. A thread without one (a
// fresh thread: a decode, copy or deleter thread of Brigade's, or a consumer's that
// never used CUDA) gets the scope's device set once and kept: cudaGetDevice answers 0
// there without a context, and setting 0 "back" would create GPU 0's primary context
// (hundreds of MB; since CUDA 12 cudaSetDevice creates it) from every thread of every
// rank using cuda:1..N, or fail in EXCLUSIVE_PROCESS mode and leave an error pending
// that a later launch reports as its own. The next scope on that thread then finds the
// device current and sets nothing.

#include <optional>

namespace brigade::transport::detail {

struct DeviceScopePlan {
  bool set = false;              // cudaSetDevice(target) on entry
  std::optional<int> restore{};  // cudaSetDevice(*restore) on exit
};

/// `current`: the device of the thread's current context; nullopt when it has none.
constexpr DeviceScopePlan plan_device_scope(int target, std::optional<int> current) {
  if (!current) return {.set = true};
  if (*current == target) return {};
  return {.set = true, .restore = current};
}

}  // namespace brigade::transport::detail
