#pragma once

// How `brigade run` builds batches (internal to launch/; see job.h for the pipeline).
//
// DECODE INTO THE BATCH (input order). SlotAssigner gives each sample, in sampler
// order, its slot in a batch buffer; decode tasks write sample i straight into
// data[i] (disjoint slices: concurrent writers need no lock); GatherSlots collects
// the n slots of a batch and compacts the good ones to the front. A failure is
// recorded in its Slot instead of thrown, so that every slot reaches GatherSlots and
// each batch leaves with exactly its own samples' source positions.
//
// DECODE THEN COPY (completion order). Each sample decodes into a tensor of its own;
// collate() copies a group of them into one batch tensor.
//
// MEMORY. Batch tensors come from a BatchPool: memory returns to the pool when the
// last view of a batch is dropped, so the steady state allocates nothing and touches
// no fresh pages (measured: without it, decoding into fresh batch memory was slower
// than decode-then-copy).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/sampler.h"
#include "launch/config.h"
#include "media/tensor.h"

namespace brigade::launch::detail {

/// A delivered batch: ids[i] is the sample in data[i].
struct Batch {
  std::vector<std::uint64_t> ids;
  media::Tensor data;                        // [n, ...] uint8, n = ids.size()
  std::vector<std::string> failures{};       // samples of this batch that failed (slots)
  std::vector<std::string> failed_stages{};  // … and in which stage ("read", "decode")
};

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

/// A batch under construction.
struct BatchBuffer {
  media::Tensor data;  // [n, ...sample shape] uint8
};

/// One sample of a batch under construction, as it travels read → decode → gather.
struct Slot {
  std::shared_ptr<BatchBuffer> batch;
  std::size_t index = 0;  // in the batch
  std::size_t count = 0;  // slots of the batch
  std::uint64_t id = 0;
  std::vector<std::uint8_t> bytes{};  // the file, between read and decode
  std::string error{};                // why the sample failed ("" if it did not)
  std::string error_stage{};          // "read" or "decode"
};

/// Allocates a batch buffer every `batch_size` samples and hands out its slots in
/// order. Used by one stage of concurrency 1 right after the source (input order), so
/// batch k holds exactly the run's samples k·n … k·n+n-1; reset() before each run
/// drops a partial batch of the previous one. Not thread-safe.
class SlotAssigner {
 public:
  SlotAssigner(std::vector<std::int64_t> sample_shape, std::size_t batch_size,
               media::Allocator allocator)
      : shape_(std::move(sample_shape)),
        batch_size_(batch_size),
        allocator_(std::move(allocator)) {}
  void reset() {
    current_.reset();
    next_ = 0;
  }
  Slot assign(const actors::SampleId& sample);

 private:
  std::vector<std::int64_t> shape_;
  std::size_t batch_size_;
  media::Allocator allocator_;
  std::shared_ptr<BatchBuffer> current_;
  std::size_t next_ = 0;
};

/// The aggregator after decode: collects the slots of one batch (they arrive in input
/// order) and emits the batch when all `count` are in (flush: a run's last, partial
/// one), good samples compacted to the front and failures listed.
struct GatherSlots {
  std::vector<Slot> slots{};
  std::optional<Batch> accumulate(Slot s);
  std::optional<Batch> flush();
  Batch finish();
};

/// A sample decoded into a tensor of its own (decode-then-copy path).
struct Decoded {
  std::uint64_t id = 0;
  media::Tensor data;  // [..., H, W, C]
};

/// Stacks the decoded items into one tensor [N, ...] from `allocator`; NCHW moves the
/// channel axis of every image (the last three axes) in front of its rows.
Batch collate(std::vector<Decoded> items, Layout layout, const media::Allocator& allocator);

/// [H, W, C] -> [C, H, W] of one uint8 image into `out`.
void hwc_to_chw(const std::uint8_t* in, std::uint8_t* out, std::int64_t h, std::int64_t w,
                std::int64_t c);

}  // namespace brigade::launch::detail
