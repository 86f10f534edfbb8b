#include "launch/image_job.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "actors/pipeline.h"
#include "launch/process.h"
#include "media/image.h"
#include "media/source.h"

namespace brigade::launch {
namespace {

struct Sample {
  std::uint64_t id = 0;
  const std::string* path = nullptr;
};

struct Encoded {
  std::uint64_t id = 0;
  const std::string* path = nullptr;
  std::vector<std::uint8_t> bytes;
};

struct Decoded {
  std::uint64_t id = 0;
  media::Tensor image;
};

struct Batch {
  std::vector<std::uint64_t> ids;
  media::Tensor data;  // [N, 224, 224, 3] uint8
};

Batch collate(std::vector<Decoded> items) {
  Batch b;
  const auto& shape = items.front().image.shape();
  std::vector<std::int64_t> batch_shape{static_cast<std::int64_t>(items.size())};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
  b.data = media::Tensor::empty(media::DType::uint8, batch_shape);
  const std::size_t stride = items.front().image.nbytes();
  auto* out = static_cast<std::uint8_t*>(b.data.data());
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::memcpy(out + i * stride, items[i].image.data(), stride);
    b.ids.push_back(items[i].id);
  }
  return b;
}

}  // namespace

std::vector<std::string> list_image_files(const std::string& dir) {
  namespace fs = std::filesystem;
  static const std::vector<std::string> kExtensions{".jpg", ".jpeg", ".png", ".webp", ".bmp"};
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    auto ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (std::find(kExtensions.begin(), kExtensions.end(), ext) != kExtensions.end()) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

JobSummary run_image_job(const JobOptions& o,
                         const std::function<void(const std::vector<std::uint64_t>&)>& on_batch) {
  const int threads = o.threads > 0 ? o.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Sample> samples;
  samples.reserve(o.files.size());
  for (std::size_t i = 0; i < o.files.size(); ++i) samples.push_back({i, &o.files[i]});
  const auto eval = media::imagenet_eval_options();
  auto pipeline =
      actors::PipelineBuilder()
          .add_source(std::move(samples))
          .pipe([](Sample s) { return Encoded{s.id, s.path, media::read_file(*s.path)}; },
                {.concurrency = o.read_concurrency, .output_order = o.order,
                 .executor = actors::Executor::io, .name = "read"})
          .pipe([eval](Encoded e) {
                  return Decoded{e.id, media::load_image(media::Source::memory(e.bytes, *e.path), eval)};
                },
                {.concurrency = o.decode_concurrency > 0 ? o.decode_concurrency : threads,
                 .output_order = o.order, .name = "decode"})
          .aggregate(static_cast<std::size_t>(o.batch_size), {.name = "batch"})
          .pipe(collate, {.output_order = o.order, .name = "collate"})
          .add_sink(4)
          .build({.num_threads = threads, .max_failures = o.max_failures,
                  .log_stats_at_end = false});
  JobSummary s;
  std::optional<double> first;
  std::uint64_t first_samples = 0;
  for (auto& batch : pipeline) {
    s.seconds = process_seconds();
    if (!first) {
      first = s.seconds;
      first_samples = batch.ids.size();
    }
    s.samples += batch.ids.size();
    ++s.batches;
    if (on_batch) on_batch(batch.ids);
    if (o.stop_after_batches >= 0 && static_cast<std::int64_t>(s.batches) >= o.stop_after_batches) {
      pipeline.stop();
      break;
    }
  }
  s.time_to_first_batch_s = first.value_or(0);
  if (first && s.seconds > *first) s.samples_per_s = (s.samples - first_samples) / (s.seconds - *first);
  s.stats = pipeline.stats();
  s.failed = s.stats.failures;
  for (const auto& st : s.stats.stages) s.filtered += st.filtered;
  return s;
}

}  // namespace brigade::launch
