#include "launch/loader/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>

#include "actors/pipeline.h"
#include "launch/loader/decode.h"
#include "launch/loader/detail/batch.h"
#include "launch/loader/detail/job_sampling.h"
#include "launch/loader/remote_ops.h"
#include "launch/loader/shards.h"
#include "transport/checkpoint/checkpoint.h"
#include "transport/device/device.h"
#include "transport/device/device_pool.h"

namespace brigade::launch {

std::unique_ptr<actors::DistributedSampler> make_sampler(const RunConfig& c, const Dataset& d) {
  const auto hash = d.identity_hash();
  if (c.shuffle && c.shuffle_window > 0 && !d.containers().empty()) {
    return std::make_unique<actors::DistributedBlockSampler>(
        d.size(), actors::BlockOptions{.rank = *c.rank,
                                       .world_size = *c.world_size,
                                       .seed = c.seed,
                                       .boundaries = container_boundaries(d),
                                       .window = c.shuffle_window,
                                       .tail = c.tail,
                                       .identity_hash = hash});
  }
  if (c.shuffle) {
    return std::make_unique<actors::DistributedRandomSampler>(
        d.size(), actors::RandomOptions{.rank = *c.rank,
                                        .world_size = *c.world_size,
                                        .seed = c.seed,
                                        .tail = c.tail,
                                        .identity_hash = hash});
  }
  return std::make_unique<actors::DistributedDeterministicSampler>(
      d.size(),
      actors::DeterministicOptions{
          .rank = *c.rank, .world_size = *c.world_size, .tail = c.tail, .identity_hash = hash});
}

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Reports to the engine the failures decode_batch found beyond those already reported
// upstream (samples that entered failed), and lists every failed id in the batch.
void report_failures(const DecodedBatch& decoded, std::span<const EncodedSample> samples,
                     const std::vector<bool>& entered_failed, actors::TaskContext& task,
                     JobBatch& out) {
  for (const auto& f : decoded.failures) {
    out.failed.push_back(samples[f.index].id);
    if (f.index < entered_failed.size() && entered_failed[f.index]) continue;
    task.fail(task.positions()[f.index], static_cast<const actors::SampleFailure&>(f));
  }
}

// One decode task: a batch of read samples into one pooled tensor. An allocation
// failure fails every sample of the batch (counted, within the budget), never the
// task as one failure for many samples.
JobBatch decode_task(const DecodeSpec& spec, std::vector<EncodedSample> samples,
                     const media::Allocator& allocator, actors::TaskContext& task) {
  std::vector<bool> entered_failed(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) entered_failed[i] = samples[i].failed();
  DecodedBatch decoded;
  try {
    decoded = decode_batch(spec, samples, allocator);
  } catch (const std::bad_alloc&) {
    std::size_t bytes = 1;
    for (auto d : sample_shape(spec)) bytes *= static_cast<std::size_t>(d);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      auto& s = samples[i];
      decoded.failures.push_back(BatchFailure{
          s.failed()
              ? *s.failure
              : actors::SampleFailure{.id = s.id,
                                      .path = s.path,
                                      .code = std::make_error_code(std::errc::not_enough_memory),
                                      .cause = fmt::format(
                                          "out of memory allocating a batch of {} × {} bytes",
                                          samples.size(), bytes)},
          i});
    }
  }
  JobBatch out{.epoch = spec.transform.epoch,
               .ids = std::move(decoded.ids),
               .data = std::move(decoded.data)};
  report_failures(decoded, samples, entered_failed, task, out);
  return out;
}

// The copy stage of a job with a device: torchvision's ImageNet mean and standard
// deviation on x / 255 when normalizing.
// Remote decode tasks in flight at once (the remote stage's concurrency).
int remote_tasks(const RunConfig& c) { return c.remote_inflight > 0 ? c.remote_inflight : 16; }

transport::CopyOptions copy_options(const RunConfig& c) {
  transport::CopyOptions copy{.device_buffers = kDeviceBatches,
                              .layout = c.normalize == Normalize::none ? c.layout : Layout::nhwc};
  if (c.normalize == Normalize::imagenet) {
    copy.normalize = transport::NormalizeOptions{
        .mean = {c.normalize_mean[0], c.normalize_mean[1], c.normalize_mean[2]},
        .stddev = {c.normalize_std[0], c.normalize_std[1], c.normalize_std[2]},
        .scale = 1.0f / 255.0f,
        .dtype = c.normalize_dtype,
        .layout = c.layout};
  }
  return copy;
}

// Without a device, --normalize runs here, after the decode: uint8 NHWC to float32 in
// the layout asked for, in memory from `allocator`.
JobBatch normalize_on_cpu(const RunConfig& c, JobBatch b, const media::Allocator& allocator) {
  if (c.normalize == Normalize::none || !c.device.empty() || !b.data.defined()) return b;
  auto shape = b.data.shape();  // [n, h, w, 3]
  if (c.layout == Layout::nchw) shape = {shape[0], 3, shape[1], shape[2]};
  auto out = media::Tensor::empty(media::DType::float32, shape, allocator);
  media::normalize_into(b.data, {c.normalize_mean, c.normalize_std}, out);
  b.data = std::move(out);
  return b;
}

// A delivered batch's tensor when every sample failed: 0 samples of the dtype and
// sample shape its good batches have (see BATCHES in job.h).
media::Tensor empty_batch(const RunConfig& c, DecodeSpec spec) {
  spec.layout = c.layout;
  auto shape = sample_shape(spec);
  shape.insert(shape.begin(), 0);
  const auto dtype = c.normalize == Normalize::none ? media::DType::uint8 : c.normalize_dtype;
  return media::Tensor::empty(dtype, std::move(shape));
}

// The job's failure budget: a rate becomes a count over the samples this process will
// consume (see FAILURES in job.h).
actors::FailureBudget job_budget(const RunConfig& c, std::uint64_t expected) {
  const double rate = c.failure_budget.max_rate();
  if (rate < 0) return c.failure_budget;
  return actors::FailureBudget(
      static_cast<std::int64_t>(std::floor(rate * static_cast<double>(expected) + 1e-9)));
}

}  // namespace

namespace {

CheckpointError bad_set(const std::string& reason) {
  return CheckpointError(CheckpointErrorKind::mismatched, "state_dict", reason);
}

// The files' states, checked to be of one save (and of one kind: a sampler's or a mix's).
std::vector<transport::DecodedCheckpoint> decode_set(
    std::span<const std::vector<std::byte>> files) {
  if (files.empty()) throw bad_set("no rank state given");
  std::vector<transport::DecodedCheckpoint> decoded;
  for (std::size_t i = 0; i < files.size(); ++i) {
    decoded.push_back(
        transport::decode_checkpoint_file(files[i], fmt::format("state_dict (rank state {})", i)));
  }
  const auto& first = decoded.front();
  for (const auto& d : decoded) {
    if (d.world_size() != first.world_size() || d.generation() != first.generation() ||
        d.job != first.job || d.mix.has_value() != first.mix.has_value()) {
      throw bad_set(fmt::format(
          "the rank states are not of one save: rank {} of {} (generation {}, job {:016x}) "
          "and rank {} of {} (generation {}, job {:016x})",
          first.rank(), first.world_size(), first.generation(), first.job, d.rank(), d.world_size(),
          d.generation(), d.job));
    }
  }
  return decoded;
}

// The state of `rank` of `w` from one save's states (S: a sampler's or a mix's), with
// the figures of `loaded` filled in.
template <class S, class Loaded>
Loaded state_from(const std::vector<S>& states, const transport::DecodedCheckpoint& first,
                  std::uint32_t rank, std::uint32_t w) {
  const std::uint32_t saved_w = first.world_size();
  Loaded loaded{};
  loaded.generation = first.generation();
  loaded.saved_world_size = saved_w;
  loaded.job = first.job;
  loaded.run = first.run;
  if (saved_w == w) {
    auto own = std::find_if(states.begin(), states.end(),
                            [rank](const auto& s) { return s.rank == rank; });
    if (own == states.end()) {
      throw bad_set(
          fmt::format("no state of rank {} among the {} given (this loader is rank {} of {})", rank,
                      states.size(), rank, w));
    }
    loaded.state = *own;
    return loaded;
  }
  std::vector<bool> seen(saved_w);
  for (const auto& s : states) seen[s.rank] = true;
  if (states.size() != saved_w || std::find(seen.begin(), seen.end(), false) != seen.end()) {
    throw CheckpointError(
        CheckpointErrorKind::incomplete, "state_dict",
        fmt::format("saved at world size {}, resumed at {}: an elastic resume needs the state "
                    "of every rank 0 … {} (got {}); gather them (torch.distributed."
                    "all_gather_object) and pass the list",
                    saved_w, w, saved_w - 1, states.size()));
  }
  try {
    loaded.state = actors::repartition(states, rank, w);
  } catch (const actors::SamplerStateError& e) {
    throw bad_set(e.what());
  }
  return loaded;
}

}  // namespace

std::uint64_t epoch_of(const JobState& state) {
  return std::visit([](const auto& s) { return s.epoch; }, state);
}

JobResume checkpoint_from_files(std::span<const std::vector<std::byte>> files, std::uint32_t rank,
                                std::uint32_t w) {
  const auto decoded = decode_set(files);
  if (decoded.front().mix) {
    std::vector<actors::MixState> states;
    for (const auto& d : decoded) states.push_back(*d.mix);
    return state_from<actors::MixState, transport::LoadedMixCheckpoint>(states, decoded.front(),
                                                                        rank, w);
  }
  std::vector<actors::SamplerState> states;
  for (const auto& d : decoded) states.push_back(*d.sampler);
  return state_from<actors::SamplerState, transport::LoadedCheckpoint>(states, decoded.front(),
                                                                       rank, w);
}

// HYBRID (job.h): how often a task that waits for a local slot while no worker is live
// looks whether one came.
constexpr std::chrono::milliseconds kHybridRecheck{100};

// HYBRID's local slots (job.h): at most `n` batches decode here at once.
class LocalSlots {
 public:
  explicit LocalSlots(int n) : free_(n) {}
  bool try_take() {
    std::lock_guard lock(mutex_);
    if (free_ == 0) return false;
    --free_;
    return true;
  }
  /// Waits for a slot at most `timeout`; false when none came, or on a stop.
  bool take_for(std::chrono::milliseconds timeout, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    if (!freed_.wait_for(lock, stop, timeout, [&] { return free_ > 0; })) return false;
    --free_;
    return true;
  }
  void give() {
    {
      std::lock_guard lock(mutex_);
      ++free_;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any freed_;
  int free_;
};

// One sample read as the local read stage reads it: a transient error is read again,
// kReadAttempts times in all with kReadBackoff doubling between them (job.h HYBRID).
void read_like_the_read_stage(EncodedSample& e, const ReadFile& reader, std::stop_token stop) {
  auto backoff = kReadBackoff;
  for (int attempt = 1;; ++attempt) {
    read_sample(e, reader, stop);
    if (!e.failed() || attempt >= kReadAttempts || !actors::is_transient(e.failure->code)) return;
    std::this_thread::sleep_for(backoff);
    if (stop.stop_requested()) return;
    backoff *= 2;
    e.failure.reset();
    e.bytes.clear();
  }
}

// -- Job ---------------------------------------------------------------------------

struct Job::Impl {
  RunConfig c;
  Dataset d;
  detail::JobSampling sampler;
  ReadFile read_file;  // JobOptions::read_file, or empty for media::read_file
  BatchStage stage;    // JobOptions::stage
  std::shared_ptr<detail::BatchPool> batches = std::make_shared<detail::BatchPool>();
  std::shared_ptr<std::atomic<std::uint64_t>> epoch =
      std::make_shared<std::atomic<std::uint64_t>>(0);
  // With remote workers (see REMOTE in job.h); declared before the pipeline, whose
  // stages call it, so that it outlives them.
  std::unique_ptr<transport::RemotePool> pool;
  std::atomic<std::uint64_t> attempts_lost{0}, decoded_locally{0}, decoded_here{0};
  std::unique_ptr<LocalSlots> local;  // HYBRID
  // REBALANCING (rank 0): the rule's state, fed from the statistics' thread.
  mutable std::mutex rebalance_mutex;
  mutable std::optional<RankWeights> weights;
  bool waited_for_workers = false;
  // With a device (see DEVICE in job.h): the pinned pool batches are decoded into, and
  // the copy stage. Declared before the pipeline too: its decode stage reads `pinned`
  // until the pipeline's destructor has joined it (a job destroyed mid-epoch).
  std::shared_ptr<transport::Device> device;
  std::shared_ptr<transport::BufferPool> pinned;
  std::optional<transport::CopyStage> to_device;
  std::optional<actors::Pipeline<JobBatch>> pipeline;

  std::uint64_t next_epoch = 0;
  bool restored = false;  // the sampler holds a restored state not yet run
  actors::CommitState restored_committed;
  transport::RunId run_id;  // this run's checkpoint identity; save k writes first_generation + k
  std::uint64_t saves = 0;
  bool in_epoch = false;
  bool ran = false;               // an epoch has been started (the sampler's state is the run's)
  actors::CommitState committed;  // of the last epoch that ended
  JobCounts counts;
  std::uint64_t expected = 0;
  std::uint64_t begun_samples = 0;    // an open-ended job's epochs begun so far
  std::uint64_t current_batches = 0;  // what the epoch in progress delivers in all

  Impl(RunConfig config, Dataset dataset, JobOptions options)
      : c(std::move(config)),
        d(std::move(dataset)),
        sampler(c, d),
        read_file(std::move(options.read_file)),
        stage(std::move(options.stage)) {
    if (stage.run && (stage.concurrency < 1 || stage.concurrency > kMaxConcurrency)) {
      throw ConfigError(fmt::format("{}: concurrency: expected 1 to {}, got {}", stage.name,
                                    kMaxConcurrency, stage.concurrency),
                        stage.name);
    }
    restore(options);
    check_checkpoint_dir();
    expected = planned_samples();
    open_device();
    open_pool();
    pipeline.emplace(build_pipeline());
  }

  void open_device() {
    if (c.device.empty()) return;
    try {
      device = transport::open_device(transport::parse_device(c.device));
    } catch (const transport::DeviceError& e) {
      throw ConfigError(fmt::format("device {}: {}", c.device, e.what()), "device");
    }
    // Enough pinned buffers for every host batch the pipeline can hold (decode: running
    // and finished, 3 × its concurrency; to_device: 1 + 2 queued) and the copies still
    // reading theirs: decode never waits for a buffer only the pipeline could return
    // (SIZING in transport/device/device_pool.h). With remote workers the decode stage is the
    // remote one, whose tasks take a buffer each as their results arrive, in completion
    // order: sized from decode concurrency alone, later tasks could hold every buffer
    // while the earliest waited.
    const int decoders = std::max(*c.decode_concurrency, c.remote() ? remote_tasks(c) : 0);
    const auto host_batches = static_cast<std::size_t>(3 * decoders + 3) + kDeviceBatches + 1;
    // Every buffer holds a full batch: a smaller one never makes the pools free and
    // reallocate during training; the device buffers are allocated here, up front.
    auto full = sample_shape(spec());
    full.insert(full.begin(), *c.batch_size);
    std::size_t full_bytes = 1;
    for (auto d : full) full_bytes *= static_cast<std::size_t>(d);
    auto copy = copy_options(c);
    copy.full_batch = std::move(full);
    // The pinned bound (DEVICE in job.h): decode writes into pinned buffers only while
    // they fit pinned_direct_mib; else into ordinary memory, staged by the copy stage.
    const auto direct_limit = static_cast<std::size_t>(c.pinned_direct_mib) << 20;
    if (host_batches * full_bytes <= direct_limit) {
      pinned = std::make_shared<transport::BufferPool>(
          device, transport::BufferPool::Memory::pinned_host,
          transport::BufferPool::Options{.max_buffers = host_batches, .min_capacity = full_bytes});
    } else {
      copy.pinned_staging = kPinnedStaging;
    }
    to_device.emplace(device, std::move(copy));
  }

  void open_pool() {
    if (!c.remote()) return;
    transport::PoolOptions o;
    o.workers = c.workers;
    if (!c.directory.empty()) {
      try {
        o.directory = transport::parse_endpoint(c.directory, "directory", true);
      } catch (const transport::EndpointError& e) {
        throw ConfigError(e.what(), "remote.directory");
      }
    }
    o.host_directory = hosts_directory(c);
    o.security = {c.token, c.tls_cert, c.tls_key, c.tls_ca};
    o.operations = {c.kind == MediaKind::video ? kDecodeClips : kDecodeImages};
    o.fingerprint = d.identity_hash();
    o.name = fmt::format("rank {} of {} (pid {})", *c.rank, *c.world_size, ::getpid());
    o.rank = static_cast<std::uint32_t>(*c.rank);
    o.task_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(c.task_timeout * 1000));
    try {
      pool = std::make_unique<transport::RemotePool>(std::move(o));
    } catch (const transport::RemoteError& e) {
      throw ConfigError(fmt::format("remote workers: {}", e.what()), "remote.workers");
    }
  }

  // Restores `options.resume` or `resume_from`, and fixes this run's checkpoint
  // identity (transport/checkpoint/checkpoint.h, JOBS AND RUNS).
  void restore(const JobOptions& options) {
    std::optional<JobResume> loaded = options.resume;
    if (!loaded && !c.resume_from.empty()) {
      try {
        loaded = sampler.load(c.resume_from, *c.rank, *c.world_size);
      } catch (const transport::CheckpointError& e) {
        if (e.kind() == transport::CheckpointErrorKind::conflict) {
          throw ConfigError(
              fmt::format("--resume-from {}: the checkpoint conflicts with this job: {}",
                          c.resume_from, e.reason()),
              "resume_from");
        }
        throw;
      }
    }
    if (!loaded) {
      run_id = sampler.fresh_run(*c.world_size, c.launch_id);
      return;
    }
    const JobState state = std::visit([](const auto& l) { return JobState(l.state); }, *loaded);
    std::visit(
        [&](const auto& l) {
          if (!c.resume_from.empty() && !options.resume) {
            spdlog::info(
                "brigade: resuming from {} (generation {}, saved at world size {}): epoch {}, "
                "{} samples of this rank left",
                c.resume_from, l.generation, l.saved_world_size, l.state.epoch,
                sampler.remaining(state));
          }
          run_id = transport::resumed_run(l, *c.world_size, c.launch_id);
        },
        *loaded);
    try {
      sampler.restore(state);  // also a finished epoch: the state plans the next ones
    } catch (const actors::SamplerStateError& e) {
      throw ConfigError(fmt::format("the checkpoint state conflicts with this job: {}", e.what()));
    }
    restored_committed = std::visit([](const auto& s) { return s.committed; }, state);
    if (sampler.remaining(state) == 0) {
      next_epoch = epoch_of(state) + 1;
      return;
    }
    next_epoch = epoch_of(state);
    restored = true;
  }

  void check_checkpoint_dir() const {
    if (c.checkpoint_dir.empty()) return;
    try {
      transport::check_checkpoint_dir(c.checkpoint_dir, run_id, *c.rank, *c.world_size);
    } catch (const transport::CheckpointError& e) {
      throw ConfigError(fmt::format("checkpoint_dir {}: {}", c.checkpoint_dir, e.reason()),
                        "checkpoint_dir");
    }
  }

  bool open_ended() const { return c.epochs == kUnlimitedEpochs; }

  // The samples the next epoch begun delivers or fails (a restored epoch: its rest).
  std::uint64_t epoch_samples(std::uint64_t e) const {
    return restored && e == next_epoch ? sampler.remaining(sampler.state(restored_committed))
                                       : sampler.size_of(e);
  }

  // The samples this process consumes over the job; without an epoch limit, over the
  // next epoch (see kUnlimitedEpochs).
  std::uint64_t planned_samples() const {
    if (next_epoch >= c.epochs) return 0;
    std::uint64_t n = epoch_samples(next_epoch);
    if (open_ended()) return n;
    for (auto e = next_epoch + 1; e < c.epochs; ++e) n += sampler.size_of(e);
    return n;
  }

  DecodeSpec spec() const {
    auto spec = decode_spec(c, epoch->load());
    if (c.normalize != Normalize::none)
      spec.layout = Layout::nhwc;  // normalizing moves the channels
    return spec;
  }

  actors::Pipeline<JobBatch> build_pipeline() {
    const Dataset* dataset = &d;
    const actors::BuildOptions build{.num_threads = *c.threads,
                                     .max_failures = job_budget(c, expected),
                                     .log_stats_at_end = false};
    // A transient read error (EAGAIN, a timeout) is thrown while the engine may still
    // retry it (kReadRetry's backoff), and fails the sample on the last attempt; any
    // other failure (a corrupt, missing or unreadable file) fails the sample at once.
    auto read = [dataset, reader = read_file](actors::SampleId s, actors::TaskContext& task) {
      EncodedSample e = encoded_sample(s.id, dataset->location(s.id));
      read_sample(e, reader, task.stop_token());
      if (!e.failed()) return e;
      if (task.may_retry() && actors::is_transient(e.failure->code)) {
        throw std::system_error(e.failure->code, e.failure->message());
      }
      task.fail(task.positions().front(), *e.failure);
      return e;
    };
    auto decode = [this, allocator = batches->allocator()](std::vector<EncodedSample> samples,
                                                           actors::TaskContext& task) {
      if (pinned)
        return label(
            decode_task(spec(), std::move(samples), pinned->allocator(task.stop_token()), task));
      return label(
          normalize_on_cpu(c, decode_task(spec(), std::move(samples), allocator, task), allocator));
    };
    if (pool) return build_remote(build);
    auto decoded =
        actors::PipelineBuilder()
            .add_source(std::ref(sampler))
            .pipe(
                read,
                {.concurrency = c.read_concurrency,
                 .output_order = actors::Order::input,  // batch contents never vary
                 .executor = actors::Executor::io,
                 .name = "read",
                 .retry = {.attempts = kReadAttempts, .backoff = kReadBackoff, .multiplier = 2.0}})
            .aggregate(static_cast<std::size_t>(*c.batch_size),
                       {.drop_last = c.drop_last, .name = "batch"})
            // One batch queued for the decode workers, not the engine's default 2 per
            // worker: the aggregate upstream holds the next ones ready, and each queued
            // batch is 32 files' bytes held (and, finished, a decoded batch) for nothing.
            .pipe(decode, {.concurrency = *c.decode_concurrency,
                           .output_order = c.order,
                           .name = "decode",
                           .queue_capacity = 1});
    return finish(std::move(decoded), build);
  }

  // The batch with its samples' labels (a labelled dataset's) and metadata (`meta`).
  JobBatch label(JobBatch b) const {
    if (!d.sources().empty()) {
      b.sources.resize(b.ids.size());
      for (std::size_t i = 0; i < b.ids.size(); ++i)
        b.sources[i] = static_cast<std::int32_t>(d.source_of(b.ids[i]));
    }
    b.meta.resize(d.meta_columns().size());
    for (std::size_t m = 0; m < b.meta.size(); ++m) {
      b.meta[m].reserve(b.ids.size());
      for (const auto id : b.ids) b.meta[m].emplace_back(d.meta(id, m));
    }
    if (!d.labelled()) return b;
    b.labels.resize(b.ids.size());
    for (std::size_t i = 0; i < b.ids.size(); ++i) b.labels[i] = d.label(b.ids[i]);
    return b;
  }

  // The tail of both builders: [the copy to the device →] [the consumer's stage →] the
  // sink (4 batches).
  actors::Pipeline<JobBatch> finish(actors::PipelineBuilder<JobBatch> decoded,
                                    const actors::BuildOptions& build) {
    if (to_device) {
      decoded = std::move(decoded).pipe(
          copy_stage(), {.concurrency = 1, .executor = actors::Executor::io, .name = "to_device"});
    }
    if (stage.run) {
      // One queued batch: a batch waiting here holds its buffers (on the device too).
      decoded = std::move(decoded).pipe(user_stage(), {.concurrency = stage.concurrency,
                                                       .output_order = actors::Order::input,
                                                       .executor = actors::Executor::io,
                                                       .name = stage.name,
                                                       .queue_capacity = 1});
    }
    return std::move(decoded).add_sink(4).build(build);
  }

  // The stage's exception travels with its batch to next() (an exception out of a
  // stage function would drop the batch: actors/pipeline.h THREADING).
  std::function<JobBatch(JobBatch, actors::TaskContext&)> user_stage() const {
    return [run = stage.run](JobBatch b, actors::TaskContext&) {
      JobBatch out{.epoch = b.epoch,
                   .ids = b.ids,
                   .labels = b.labels,
                   .sources = b.sources,
                   .meta = b.meta,
                   .data = {},
                   .failed = b.failed};
      try {
        out.staged = run(std::move(b));
      } catch (...) {
        out.stage_error = std::current_exception();
      }
      return out;
    };
  }

  // The host tensor is dropped here: its pinned buffer goes back once the copy is done.
  std::function<JobBatch(JobBatch, actors::TaskContext&)> copy_stage() const {
    return [this, stage = *to_device](JobBatch b, actors::TaskContext& task) {
      if (b.ids.empty()) {  // every sample failed: nothing to copy (BATCHES in job.h)
        b.data = empty_batch(c, spec());
        return b;
      }
      b.device = stage(b.data, task.stop_token());
      b.data = {};
      return b;
    };
  }

  // HYBRID's local share: the batch read and decoded as the local pipeline's read and
  // decode stages do, its read failures reported here (the read stage would have).
  JobBatch decode_here(std::vector<EncodedSample> samples, const media::Allocator& allocator,
                       actors::TaskContext& task) {
    for (std::size_t i = 0; i < samples.size(); ++i) {
      read_like_the_read_stage(samples[i], read_file, task.stop_token());
      if (samples[i].failed()) task.fail(task.positions()[i], *samples[i].failure);
    }
    decoded_here += samples.size();
    if (pinned)
      return label(
          decode_task(spec(), std::move(samples), pinned->allocator(task.stop_token()), task));
    return label(
        normalize_on_cpu(c, decode_task(spec(), std::move(samples), allocator, task), allocator));
  }

  // source → batch → remote decode (io: each task waits on a worker) → [to_device].
  actors::Pipeline<JobBatch> build_remote(const actors::BuildOptions& build) {
    const Dataset* dataset = &d;
    if (c.decode == DecodeMode::hybrid) local = std::make_unique<LocalSlots>(*c.decode_concurrency);
    auto remote = [this, dataset, allocator = batches->allocator()](
                      std::vector<actors::SampleId> ids, actors::TaskContext& task) {
      std::vector<EncodedSample> samples;
      samples.reserve(ids.size());
      for (const auto& s : ids) samples.push_back(encoded_sample(s.id, dataset->location(s.id)));
      if (local) {
        bool here = local->try_take();
        // No worker to send it to: wait for a slot here, or for a worker to come.
        while (!here && pool->live_workers() == 0) {
          here = local->take_for(kHybridRecheck, task.stop_token());
          if (task.stop_token().stop_requested()) {
            if (here) local->give();
            return JobBatch{};  // stopped: discarded by the engine
          }
        }
        if (here) {
          struct Give {
            LocalSlots& slots;
            ~Give() { slots.give(); }
          } give{*local};
          return decode_here(std::move(samples), allocator, task);
        }
      }
      const auto s = spec();
      RemoteDecodeFigures figures;
      auto decoded = remote_decode_batch(*pool, s, samples,
                                         pinned ? pinned->allocator(task.stop_token()) : allocator,
                                         {.max_attempts = c.max_attempts,
                                          .local_fallback = c.on_no_workers == OnNoWorkers::local,
                                          .share_result = !pinned},
                                         task.stop_token(), &figures);
      attempts_lost += figures.attempts_lost;
      decoded_locally += figures.decoded_locally;
      if (!decoded) return JobBatch{};  // stopped: discarded by the engine
      JobBatch out{.epoch = s.transform.epoch,
                   .ids = std::move(decoded->ids),
                   .data = std::move(decoded->data)};
      report_failures(*decoded, samples, {}, task, out);
      return label(pinned ? std::move(out) : normalize_on_cpu(c, std::move(out), allocator));
    };
    const int inflight = remote_tasks(c);
    auto quiet = build;  // the engine's threads only carry batches here
    quiet.configure_system = [then = build.configure_system](caf::actor_system_config& config) {
      transport::quiet_idle_threads(config);
      if (then) then(config);
    };
    auto decoded = actors::PipelineBuilder()
                       .add_source(std::ref(sampler))
                       .aggregate(static_cast<std::size_t>(*c.batch_size),
                                  {.drop_last = c.drop_last, .name = "batch"})
                       .pipe(remote, {.concurrency = inflight,
                                      .output_order = c.order,
                                      .executor = actors::Executor::io,
                                      .name = "remote_decode"});
    return finish(std::move(decoded), quiet);
  }

  void begin(std::optional<std::uint64_t> requested) {
    if (pool && !local && !waited_for_workers) {
      // Give the workers a moment to answer before the first epoch (else its first
      // batches are decoded here, or wait with on_no_workers = fail).
      waited_for_workers = true;
      if (!pool->wait_for_worker(std::chrono::seconds(5), {}))
        spdlog::warn("brigade: no remote worker is live yet");
    }
    if (in_epoch) throw std::logic_error("Job::begin_epoch: an epoch is in progress");
    const std::uint64_t e = requested.value_or(next_epoch);
    actors::CommitState start;
    if (restored && e == next_epoch) {
      start = restored_committed;
    } else {
      sampler.set_epoch(e);
    }
    if (open_ended() && !c.failure_budget.is_unlimited()) {
      // Without an epoch limit a rate counts over the epochs begun so far.
      begun_samples += epoch_samples(e);
      pipeline->set_failure_budget(job_budget(c, begun_samples));
    }
    current_batches = batches_of(epoch_samples(e));
    restored = false;
    epoch->store(e);
    committed = start;
    pipeline->start(std::move(start));
    in_epoch = true;
    ran = true;
  }

  // on_no_workers = fail: the job fails once no worker has been live for kNoWorkerGrace.
  void check_workers() const {
    if (!pool || local || c.on_no_workers != OnNoWorkers::fail) return;
    const auto since = pool->no_worker_since();
    if (!since || Clock::now() - *since < kNoWorkerGrace) return;
    std::string lost;
    for (const auto& w : pool->lost_workers()) lost += (lost.empty() ? "" : ", ") + w;
    const auto unreachable = pool->directory_unreachable();
    std::string why =
        !lost.empty()         ? lost
        : c.directory.empty() ? std::string("none was ever reached")
        : unreachable
            ? fmt::format("the directory at {} could not be reached: {}", c.directory, *unreachable)
            : fmt::format("the directory at {} listed none that could be reached", c.directory);
    throw actors::PipelineFailure(fmt::format("no remote worker live for {} s (on_no_workers = "
                                              "fail): {}",
                                              kNoWorkerGrace.count(), why),
                                  {});
  }

  JobNext next(std::optional<std::chrono::milliseconds> timeout) {
    if (!in_epoch) return {JobStatus::epoch_end};
    const bool watch = pool && !local && c.on_no_workers == OnNoWorkers::fail;
    const auto deadline = timeout ? std::optional(Clock::now() + *timeout) : std::nullopt;
    for (;;) {
      check_workers();
      auto wait = timeout;
      if (watch) {
        auto left =
            deadline
                ? std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now())
                : std::chrono::milliseconds(200);
        wait = std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(200));
      }
      auto r = pipeline->next(wait);
      if (r.status == actors::NextStatus::timeout) {
        if (watch && (!deadline || Clock::now() < *deadline)) continue;
        return {JobStatus::timeout};
      }
      if (r.status == actors::NextStatus::end) {
        in_epoch = false;
        committed = pipeline->committed();
        for (const auto& st : pipeline->stats().stages) counts.filtered += st.filtered;
        next_epoch = epoch->load() + 1;
        return {JobStatus::epoch_end};
      }
      counts.failed += r.item->failed.size();
      counts.samples += r.item->ids.size();
      ++counts.batches;
      if (r.item->stage_error) std::rethrow_exception(std::exchange(r.item->stage_error, {}));
      return {JobStatus::batch, std::move(r.item)};
    }
  }

  void abandon() {
    if (!in_epoch) return;
    pipeline->stop();
    in_epoch = false;
    committed = pipeline->committed();
    next_epoch = epoch->load() + 1;
  }

  std::uint64_t batches_of(std::uint64_t samples) const {
    const auto n = static_cast<std::uint64_t>(*c.batch_size);
    return c.drop_last ? samples / n : (samples + n - 1) / n;
  }

  std::uint64_t batches_in(std::uint64_t e) const {
    if (in_epoch && e == epoch->load()) return current_batches;
    return batches_of(epoch_samples(e));
  }

  JobState state() const {
    const auto commits = in_epoch ? pipeline->committed() : (ran ? committed : restored_committed);
    return sampler.state(commits, run_id.first_generation + saves);
  }
};

Job::Job(RunConfig config, Dataset dataset, JobOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(dataset), std::move(options))) {}

Job::~Job() = default;

const RunConfig& Job::config() const { return impl_->c; }
const Dataset& Job::dataset() const { return impl_->d; }
std::uint64_t Job::next_epoch() const { return impl_->next_epoch; }
bool Job::finished() const {
  return !impl_->open_ended() && !impl_->in_epoch && impl_->next_epoch >= impl_->c.epochs;
}
void Job::begin_epoch(std::optional<std::uint64_t> epoch) { impl_->begin(epoch); }
bool Job::in_epoch() const { return impl_->in_epoch; }
JobNext Job::next(std::optional<std::chrono::milliseconds> timeout) { return impl_->next(timeout); }
void Job::stop() { impl_->pipeline->stop(); }
void Job::abandon_epoch() { impl_->abandon(); }
std::uint64_t Job::batches_in_epoch(std::optional<std::uint64_t> epoch) const {
  return impl_->batches_in(
      epoch.value_or(impl_->in_epoch ? impl_->epoch->load() : impl_->next_epoch));
}
JobState Job::state() const { return impl_->state(); }
JobCounts Job::counts() const { return impl_->counts; }
std::uint64_t Job::expected_samples() const { return impl_->expected; }
actors::PipelineStats Job::stats() const { return impl_->pipeline->stats(); }

std::optional<RemoteSummary> Job::remote_summary() const {
  if (!impl_->pool) return std::nullopt;
  RemoteSummary summary{impl_->pool->stats(), impl_->attempts_lost.load(),
                        impl_->decoded_locally.load(), impl_->decoded_here.load()};
  std::lock_guard lock(impl_->rebalance_mutex);
  if (impl_->weights) summary.weights = impl_->weights->weights();
  return summary;
}

void Job::rebalance(const std::vector<std::optional<RankWeights::Progress>>& ranks) const {
  auto& i = *impl_;
  if (!i.c.rebalance || !i.pool || !hosts_directory(i.c)) return;
  std::lock_guard lock(i.rebalance_mutex);
  if (!i.weights) i.weights.emplace(static_cast<std::uint32_t>(*i.c.world_size));
  i.pool->set_rank_weights(i.weights->update(ranks));
}

RankWeights::RankWeights(std::uint32_t world_size)
    : ranks_(world_size), rounded_(world_size, kNeutralWeight) {}

const std::vector<std::uint32_t>& RankWeights::update(
    const std::vector<std::optional<Progress>>& ranks) {
  constexpr double kFloor = 0.05;    // keeps a share of 0 from dividing anything
  constexpr double kSettled = 1.05;  // a weight this close to neutral is neutral
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const auto n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  const auto n = ranks_.size();
  struct Window {
    double rate = 0, wait_share = 0;
  };
  std::vector<std::optional<Window>> window(n);
  for (std::size_t r = 0; r < n; ++r) {
    if (r >= ranks.size() || !ranks[r]) continue;
    const auto& p = *ranks[r];
    auto& w = ranks_[r].window;
    if (!w.empty() &&
        (p.samples < w.back().samples || p.wait_s < w.back().wait_s || !(p.at_s > w.back().at_s)))
      w.clear();  // a restarted reporter (or figures out of order): start anew
    w.push_back(p);
    while (w.size() > std::size_t(kWindow) + 1) w.pop_front();
    const double dt = w.back().at_s - w.front().at_s;
    if (w.size() < std::size_t(kWindow) + 1 || !(dt > 0)) continue;
    const Window f{(w.back().samples - w.front().samples) / dt,
                   (w.back().wait_s - w.front().wait_s) / dt};
    if (f.rate > 0) window[r] = f;
  }
  for (std::size_t r = 0; r < n; ++r) {
    auto& rank = ranks_[r];
    std::vector<double> rates, waits;
    for (std::size_t o = 0; o < n; ++o) {
      if (o == r || !window[o]) continue;
      rates.push_back(window[o]->rate);
      waits.push_back(window[o]->wait_share);
    }
    if (!window[r] || rates.empty()) {
      rank.behind = 0;
      continue;
    }
    double pressure = median(rates) / window[r]->rate;
    const double others_wait = median(waits);
    if (others_wait < kLockstepWait)
      pressure *= (window[r]->wait_share + kFloor) / (others_wait + kFloor);
    const bool behind = pressure > 1 + kDeadband;
    rank.behind = behind ? rank.behind + 1 : 0;
    if (rank.weight > kNeutralWeight || (behind && rank.behind >= kBehindIntervals))
      rank.weight *= std::pow(pressure, kGain);
    rank.weight = std::clamp(rank.weight, double(kNeutralWeight), double(kMaxWeight));
    if (rank.weight < kSettled * kNeutralWeight) rank.weight = kNeutralWeight;
    rounded_[r] = static_cast<std::uint32_t>(std::lround(rank.weight));
  }
  return rounded_;
}

bool Job::wait_for_ranks(std::chrono::milliseconds timeout) const {
  if (!impl_->pool) return true;
  return impl_->pool->wait_for_subscribers(static_cast<std::size_t>(*impl_->c.world_size), timeout,
                                           {});
}

std::filesystem::path Job::write_checkpoint(const std::optional<JobState>& saved) {
  auto s = saved ? *saved : state();
  const auto generation = impl_->run_id.first_generation + impl_->saves;
  const transport::WriteOptions options{
      .run = impl_->run_id, .keep = static_cast<std::uint32_t>(impl_->c.keep_checkpoints)};
  auto path = std::visit(
      [&](auto& state) {
        state.generation = generation;
        return transport::write_checkpoint(impl_->c.checkpoint_dir, state, options);
      },
      s);
  ++impl_->saves;
  return path;
}

std::vector<std::byte> Job::checkpoint_bytes(const std::optional<JobState>& saved) {
  auto s = saved ? *saved : state();
  const auto generation = impl_->run_id.first_generation + impl_->saves;
  auto bytes = std::visit(
      [&](auto& state) {
        state.generation = generation;
        return transport::encode_checkpoint(state, impl_->run_id);
      },
      s);
  ++impl_->saves;
  return bytes;
}

// -- run_job -----------------------------------------------------------------------

namespace {

// The consumer side of `brigade run`: drives a Job over its epochs, reports progress,
// stops on --stop-after-batches or a signal.
class Runner {
 public:
  Runner(Job& job, const JobHooks& hooks)
      : job_(job), c_(job.config()), hooks_(hooks), started_(hooks.origin.value_or(Clock::now())) {}

  JobSummary run() {
    try {
      while (!job_.finished() && s_.end == JobEnd::finished) {
        if (const auto end = stop_reason()) {
          s_.end = *end;
          break;
        }
        if (!started_first_) s_.startup_s = seconds();
        started_first_ = true;
        job_.begin_epoch();
        run_epoch();
      }
    } catch (const actors::PipelineFailure& e) {
      s_.end = JobEnd::failed;
      s_.failure = e.what();
    } catch (const transport::DeviceError& e) {  // a batch's copy failed on the device
      s_.end = JobEnd::failed;
      s_.failure = e.what();
    }
    if (s_.end == JobEnd::finished) hold_directory();
    return finish();
  }

 private:
  // Rank 0 hosting the directory keeps it until every rank has subscribed (a rank
  // started later than this one finished would find no directory), at most
  // kDirectoryHold, and not past an interrupt.
  void hold_directory() {
    if (job_.wait_for_ranks(std::chrono::milliseconds(0))) return;
    spdlog::info("brigade: keeping the directory until every rank has subscribed (at most {} s)",
                 kDirectoryHold.count());
    const auto until = Clock::now() + kDirectoryHold;
    while (!job_.wait_for_ranks(std::chrono::milliseconds(100))) {
      if (stop_reason()) {
        spdlog::info("brigade: closing the directory on the interrupt");
        return;
      }
      if (Clock::now() >= until) {
        spdlog::warn("brigade: not every rank subscribed to the directory within {} s; closing it",
                     kDirectoryHold.count());
        return;
      }
    }
  }

  void run_epoch() {
    for (;;) {
      if (const auto end = stop_reason()) {
        s_.end = *end;
        return;
      }
      auto r = job_.next(std::chrono::milliseconds(100));
      const double now = seconds();
      if (r.status == JobStatus::batch) deliver(*r.batch, now);
      report(now);
      if (r.status == JobStatus::epoch_end) {
        s_.stats = job_.stats();
        return;
      }
    }
  }

  std::optional<JobEnd> stop_reason() const {
    if (hooks_.stop_after_batches >= 0 &&
        std::int64_t(job_.counts().batches) >= hooks_.stop_after_batches) {
      return JobEnd::stopped;
    }
    if (hooks_.interrupt && hooks_.interrupt->load() != 0) return JobEnd::interrupted;
    return std::nullopt;
  }

  void deliver(const JobBatch& b, double now) {
    if (b.device.defined()) {
      b.device.wait();  // the consumer, and only it, waits for its batch's copy
      now = seconds();
    }
    s_.seconds = now;
    if (!first_) {
      first_ = now;
      first_samples_ = b.ids.size();
    }
    if (hooks_.on_batch) hooks_.on_batch(b);
  }

  void report(double now) {
    if (!hooks_.on_progress || now - last_report_ < 0.1) return;
    last_report_ = now;
    const auto counts = job_.counts();
    hooks_.on_progress({counts.samples, job_.expected_samples(), counts.failed, now});
  }

  // Saves what the consumer owns first (checkpoint, then the caller's on_saved), then
  // stops the pipeline, waiting at most kJoinGrace for a blocked stage.
  JobSummary finish() {
    s_.counts = job_.counts();
    if (job_.in_epoch()) s_.stats = job_.stats();
    s_.remote = job_.remote_summary();
    if (!c_.checkpoint_dir.empty()) {
      try {
        s_.checkpoint = job_.write_checkpoint().string();
      } catch (const transport::CheckpointError& e) {
        s_.end = JobEnd::failed;
        s_.failure = fmt::format("writing the checkpoint failed: {}", e.what());
      }
    }
    s_.time_to_first_batch_s = first_.value_or(0);
    if (first_ && s_.seconds > *first_) {
      s_.samples_per_s = double(s_.counts.samples - first_samples_) / (s_.seconds - *first_);
    }
    if (hooks_.on_saved) hooks_.on_saved();
    return s_;
  }

  double seconds() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

  Job& job_;
  const RunConfig& c_;
  const JobHooks& hooks_;
  JobSummary s_;
  const Clock::time_point started_;
  bool started_first_ = false;
  std::optional<double> first_;
  std::uint64_t first_samples_ = 0;
  double last_report_ = -1;
};

}  // namespace

JobSummary run_job(const RunConfig& config, const Dataset& dataset, const JobHooks& hooks) {
  auto job = std::make_shared<Job>(config, dataset);
  if (job->finished()) {
    spdlog::info(
        "brigade: the checkpoint in {} is of a completed job ({} epochs): nothing to "
        "deliver",
        config.resume_from, config.epochs);
    return {.end = JobEnd::already_complete};
  }
  if (hooks.on_job) hooks.on_job(job);
  auto summary = Runner(*job, hooks).run();
  // Join the pipeline, but never wait long for a stage blocked outside the process (a
  // FIFO, a hung network file system): everything the consumer owns is written by now.
  // The stopping thread owns the job too; if it is left behind, it keeps the job alive
  // and the caller exits the process without joining it (JobSummary::abandoned).
  constexpr auto kJoinGrace = std::chrono::seconds(2);
  auto stopped = std::make_shared<std::promise<void>>();
  auto done = stopped->get_future();
  std::thread stopper([job, stopped] {
    job->stop();
    stopped->set_value();
  });
  if (done.wait_for(kJoinGrace) == std::future_status::ready) {
    stopper.join();
  } else {
    spdlog::warn(
        "brigade: a stage is still blocked {} s after the stop (a read that does not "
        "return?); exiting without it",
        kJoinGrace.count());
    stopper.detach();
    summary.abandoned = true;
  }
  return summary;
}

}  // namespace brigade::launch
