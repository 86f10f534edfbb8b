#pragma once

// Batch memory of `brigade run` (internal to launch/; see launch/loader/decode.h for how a
// batch is filled).
//
// MEMORY. Batch tensors come from a BatchPool: memory returns to the pool when the
// last view of a batch is dropped, so the steady state allocates nothing and touches
// no fresh pages (measured: without it, decoding into fresh batch memory was slower
// than decode-then-copy).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "media/tensor.h"

namespace brigade::launch::detail {

/// Recycles equally sized buffers (up to 16 free ones). Thread-safe; a buffer may
/// outlive the pool (it is then freed). Create with std::make_shared.
class BatchPool : public std::enable_shared_from_this<BatchPool> {
 public:
  /// An allocator drawing from this pool (it keeps the pool alive).
  media::Allocator allocator();

 private:
  std::shared_ptr<void> take(std::size_t nbytes);
  void give_back(std::size_t nbytes, std::shared_ptr<void> block);

  static constexpr std::size_t kMaxFree = 16;
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::shared_ptr<void>>> free_;
};

/// [H, W, C] -> [C, H, W] of one uint8 image into `out`.
void hwc_to_chw(const std::uint8_t* in, std::uint8_t* out, std::int64_t h, std::int64_t w,
                std::int64_t c);

}  // namespace brigade::launch::detail
