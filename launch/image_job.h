#pragma once

// The image job of `brigade run`: list files → read bytes (io stage) → decode with
// the ImageNet eval transform (shorter side 256, center crop 224, RGB; cpu stage) →
// batch → collate into one contiguous uint8 NHWC tensor → consumer.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/options.h"
#include "actors/stats.h"

namespace brigade::launch {

struct JobOptions {
  std::vector<std::string> files;  // sample id = index
  int batch_size = 32;
  int threads = 0;               // cpu threads; 0 = cores
  int read_concurrency = 8;      // io threads reading files
  int decode_concurrency = 0;    // 0 = threads
  actors::Order order = actors::Order::input;
  actors::FailureBudget max_failures{};
  std::int64_t stop_after_batches = -1;  // < 0: run to the end
};

struct JobSummary {
  std::uint64_t samples = 0;
  std::uint64_t batches = 0;
  std::uint64_t failed = 0;
  std::uint64_t filtered = 0;
  double seconds = 0;                // process start to the last batch
  double time_to_first_batch_s = 0;  // process start to the first batch
  double samples_per_s = 0;          // after the first batch
  actors::PipelineStats stats;
};

/// Runs one epoch. `on_batch(ids)` sees every delivered batch's sample ids.
/// Throws actors::PipelineFailure when the failure budget is exceeded.
JobSummary run_image_job(const JobOptions& options,
                         const std::function<void(const std::vector<std::uint64_t>&)>& on_batch);

/// Files under `dir` (recursively) with an image extension, sorted by path.
std::vector<std::string> list_image_files(const std::string& dir);

}  // namespace brigade::launch
