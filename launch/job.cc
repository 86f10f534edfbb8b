#include "launch/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "actors/pipeline.h"
#include "actors/sampler.h"
#include "launch/process.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/source.h"
#include "media/video.h"
#include "transport/checkpoint.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;

struct Encoded {
  std::uint64_t id = 0;
  std::vector<std::uint8_t> bytes;
};

struct Decoded {
  std::uint64_t id = 0;
  media::Tensor data;
};

struct Batch {
  std::vector<std::uint64_t> ids;
  media::Tensor data;
};

constexpr int kClipFrames = 8;
constexpr int kSide = 224;

// Rethrown with the sample's id and path, so that the engine's failure log and the
// failure records name the sample (the cause keeps the media error code).
[[noreturn]] void fail_sample(std::uint64_t id, const std::string& path) {
  try {
    throw;
  } catch (const media::MediaError& e) {
    throw std::runtime_error(fmt::format("sample {} ({}): {} [{}]", id, path, e.cause(),
                                         media::error_code_name(e.code())));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("sample {} ({}): {}", id, path, e.what()));
  }
}

// [H, W, C] -> [C, H, W] of one uint8 image into `out`.
void hwc_to_chw(const std::uint8_t* in, std::uint8_t* out, std::int64_t h, std::int64_t w,
                std::int64_t c) {
  const std::int64_t plane = h * w;
  for (std::int64_t p = 0; p < plane; ++p) {
    for (std::int64_t k = 0; k < c; ++k) out[k * plane + p] = in[p * c + k];
  }
}

// Stacks the decoded items into one tensor [N, ...]; NCHW moves the channel axis of
// every image (the last three axes) in front of its rows.
Batch collate(std::vector<Decoded> items, Layout layout) {
  Batch b;
  const auto& shape = items.front().data.shape();
  std::vector<std::int64_t> out_shape{static_cast<std::int64_t>(items.size())};
  out_shape.insert(out_shape.end(), shape.begin(), shape.end());
  const std::size_t n = out_shape.size();
  if (layout == Layout::nchw)
    std::rotate(out_shape.begin() + n - 3, out_shape.begin() + n - 1, out_shape.end());
  b.data = media::Tensor::empty(media::DType::uint8, out_shape);
  const std::size_t stride = items.front().data.nbytes();
  const std::int64_t h = shape[shape.size() - 3], w = shape[shape.size() - 2], c = shape.back();
  const std::size_t image = static_cast<std::size_t>(h * w * c);
  auto* out = static_cast<std::uint8_t*>(b.data.data());
  b.ids.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto* in = static_cast<const std::uint8_t*>(items[i].data.data());
    if (layout == Layout::nhwc) {
      std::memcpy(out + i * stride, in, stride);
    } else {
      for (std::size_t off = 0; off < stride; off += image)
        hwc_to_chw(in + off, out + i * stride + off, h, w, c);
    }
    b.ids.push_back(items[i].id);
  }
  return b;
}

std::unique_ptr<actors::DistributedSampler> make_sampler(const RunConfig& c, const Dataset& d) {
  const auto hash = actors::hash_sample_identities(d.identities);
  if (c.shuffle) {
    return std::make_unique<actors::DistributedRandomSampler>(
        d.files.size(),
        actors::RandomOptions{
            .rank = *c.rank, .world_size = *c.world_size, .seed = c.seed, .identity_hash = hash});
  }
  return std::make_unique<actors::DistributedDeterministicSampler>(
      d.files.size(), actors::DeterministicOptions{
                          .rank = *c.rank, .world_size = *c.world_size, .identity_hash = hash});
}

auto build_pipeline(const RunConfig& c, const Dataset& d, actors::DistributedSampler& sampler) {
  const auto* files = &d.files;
  const auto order = c.order;
  const bool video = c.kind == MediaKind::video;
  media::ImageOptions image = media::imagenet_eval_options();
  if (video) {
    image.width = image.height = image.shorter_side = kSide;  // shorter side 224, crop 224
  }
  auto decode = [files, image, video](Encoded e) {
    try {
      const auto source = media::Source::memory(e.bytes, (*files)[e.id]);
      if (!video) return Decoded{e.id, media::load_image(source, image)};
      media::VideoOptions options{.frames = media::FrameSelection::evenly_spaced(kClipFrames),
                                  .image = image};
      return Decoded{e.id, media::load_video(source, options)};
    } catch (...) {
      fail_sample(e.id, (*files)[e.id]);
    }
  };
  return actors::PipelineBuilder()
      .add_source(std::ref(sampler))
      .pipe(
          [files](actors::SampleId s) {
            try {
              return Encoded{s.id, media::read_file((*files)[s.id])};
            } catch (...) {
              fail_sample(s.id, (*files)[s.id]);
            }
          },
          {.concurrency = c.read_concurrency,
           .output_order = order,
           .executor = actors::Executor::io,
           .name = "read"})
      .pipe(decode, {.concurrency = *c.decode_concurrency, .output_order = order, .name = "decode"})
      .aggregate(static_cast<std::size_t>(*c.batch_size), {.name = "batch"})
      .pipe([layout = c.layout](
                std::vector<Decoded> items) { return collate(std::move(items), layout); },
            {.output_order = order, .name = "collate"})
      .add_sink(4)
      .build(
          {.num_threads = *c.threads, .max_failures = c.failure_budget, .log_stats_at_end = false});
}

// What a resume starts from: the epoch, and the commits of that epoch already made.
struct ResumePoint {
  std::uint64_t epoch = 0;
  actors::CommitState committed{};
  bool restored = false;  // the sampler holds a restored state
  std::uint64_t generation = 0;
};

ResumePoint resume(const RunConfig& c, actors::DistributedSampler& sampler) {
  ResumePoint r;
  if (c.resume_from.empty()) return r;
  transport::LoadedCheckpoint loaded;
  try {
    loaded = transport::load_checkpoint(c.resume_from, *c.rank, *c.world_size,
                                        {.expected = sampler.fingerprint()});
  } catch (const transport::CheckpointError& e) {
    if (e.kind() == transport::CheckpointErrorKind::conflict) {
      throw ConfigError(
          fmt::format("--resume-from {}: the sampling settings conflict with the "
                      "checkpoint: {}",
                      c.resume_from, e.reason()));
    }
    throw;
  }
  r.generation = loaded.generation;
  if (loaded.state.remaining() == 0) {
    r.epoch = loaded.state.epoch + 1;
  } else {
    sampler.restore(loaded.state);
    r.epoch = loaded.state.epoch;
    r.committed = loaded.state.committed;
    r.restored = true;
  }
  spdlog::info(
      "brigade: resuming from {} (generation {}, saved at world size {}): epoch {}, "
      "{} of {} samples of this rank left",
      c.resume_from, loaded.generation, loaded.saved_world_size, r.epoch,
      r.restored ? loaded.state.remaining() : 0, r.restored ? loaded.state.share() : 0);
  return r;
}

}  // namespace

Dataset list_folder(const std::string& dir, MediaKind kind) {
  static const std::vector<std::string> kImages{".jpg", ".jpeg", ".png", ".webp", ".bmp"};
  static const std::vector<std::string> kVideos{".mp4", ".mkv", ".webm", ".avi", ".mov"};
  const auto& extensions = kind == MediaKind::video ? kVideos : kImages;
  Dataset d;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) throw ConfigError(fmt::format("data {}: {}", dir, ec.message()));
  for (; it != end; it.increment(ec)) {
    if (ec) throw ConfigError(fmt::format("data {}: {}", dir, ec.message()));
    if (!it->is_regular_file()) continue;
    auto ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) {
      d.files.push_back(it->path().string());
    }
  }
  if (d.files.empty()) {
    std::string names;
    for (const auto& e : extensions) names += " " + e;
    throw ConfigError(fmt::format("data {}: no {} files ({} ) found", dir, to_string(kind), names));
  }
  std::sort(d.files.begin(), d.files.end());
  for (const auto& f : d.files)
    d.identities.push_back(fs::path(f).lexically_relative(dir).string());
  return d;
}

Dataset read_list(const std::string& list_file) {
  std::ifstream in(list_file);
  if (!in) throw ConfigError(fmt::format("list {}: cannot read the file", list_file));
  const auto folder = fs::path(list_file).parent_path();
  Dataset d;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    std::string entry = line.substr(first, last - first + 1);
    fs::path p(entry);
    d.files.push_back(p.is_relative() ? (folder / p).string() : entry);
    d.identities.push_back(std::move(entry));
  }
  if (d.files.empty()) throw ConfigError(fmt::format("list {}: no paths in the file", list_file));
  return d;
}

JobSummary run_job(const RunConfig& c, const Dataset& d, const JobHooks& hooks) {
  auto sampler = make_sampler(c, d);
  const ResumePoint start = resume(c, *sampler);
  JobSummary s;
  const std::uint64_t generation = start.generation + 1;
  auto save = [&](const actors::CommitState& committed) {
    if (c.checkpoint_dir.empty()) return;
    s.checkpoint =
        transport::write_checkpoint(c.checkpoint_dir, sampler->state(committed, generation))
            .string();
  };
  if (start.epoch >= c.epochs) {
    spdlog::info(
        "brigade: the checkpoint in {} is of a completed job ({} epochs): nothing to deliver",
        c.resume_from, c.epochs);
    s.end = JobEnd::already_complete;
    return s;
  }
  auto pipeline = build_pipeline(c, d, *sampler);
  std::optional<double> first;
  std::uint64_t first_samples = 0;
  const double t0 = process_seconds();
  auto last_report = t0 - 1;
  const auto interrupted = [&] { return hooks.interrupt && hooks.interrupt->load() != 0; };
  for (std::uint64_t epoch = start.epoch; epoch < c.epochs; ++epoch) {
    const bool restored = epoch == start.epoch && start.restored;
    if (!restored) sampler->set_epoch(epoch);
    pipeline.start(restored ? start.committed : actors::CommitState{});
    const std::uint64_t expected =
        s.samples + sampler->size() * (c.epochs - epoch) -
        (restored ? sampler->size() - sampler->state(start.committed).remaining() : 0);
    actors::CommitState committed = restored ? start.committed : actors::CommitState{};
    for (;;) {
      const bool stop =
          c.stop_after_batches >= 0 && static_cast<std::int64_t>(s.batches) >= c.stop_after_batches;
      if (stop || interrupted()) {
        s.end = stop ? JobEnd::stopped : JobEnd::interrupted;
        committed = pipeline.committed();
        pipeline.stop();
        break;
      }
      auto r = pipeline.next(std::chrono::milliseconds(100));
      const double now = process_seconds();
      if (r.status == actors::NextStatus::item) {
        auto& batch = *r.item;
        s.seconds = now;
        if (!first) {
          first = now;
          first_samples = batch.ids.size();
        }
        s.samples += batch.ids.size();
        ++s.batches;
        committed = pipeline.committed();
        if (hooks.on_batch) hooks.on_batch(batch.ids);
      }
      if (hooks.on_progress && now - last_report >= 0.1) {
        last_report = now;
        auto st = pipeline.stats();
        hooks.on_progress({s.samples, expected, s.failed + st.failures, now - t0});
      }
      if (r.status == actors::NextStatus::end) break;
    }
    const auto st = pipeline.stats();
    s.stats = st;
    s.failed += st.failures;
    for (const auto& stage : st.stages) s.filtered += stage.filtered;
    if (s.end != JobEnd::finished) {
      save(committed);
      break;
    }
    if (epoch + 1 == c.epochs) save(pipeline.committed());
  }
  s.time_to_first_batch_s = first.value_or(0);
  if (first && s.seconds > *first)
    s.samples_per_s = (s.samples - first_samples) / (s.seconds - *first);
  return s;
}

}  // namespace brigade::launch
