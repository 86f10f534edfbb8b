// run_job in-process: the batch tensors hold exactly what media decodes per sample.
#include "launch/loader/job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>

#include "launch/loader/demo_dataset.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/remote_ops.h"
#include "launch/loader/sources.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/source.h"
#include "media/synthetic.h"
#include "media/transform.h"
#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/remote.h"

namespace brigade::launch::job_test {  // its own: the tests of one target share a unity batch
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class Job : public ::testing::TestWithParam<std::tuple<Layout, actors::Order>> {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("brigade-job-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_);
    for (int i = 0; i < 11; ++i) {
      auto bytes = media::make_image(media::ImageCodec::jpeg, 100 + 10 * i, 90, i);
      if (i == 4) bytes.resize(bytes.size() / 3);  // corrupt
      media::write_file((root_ / ("img-" + std::to_string(10 + i) + ".jpg")).string(), bytes);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static inline fs::path root_;
};

TEST_P(Job, BatchesHoldEachSampleAsDecodedAlone) {
  const auto [layout, order] = GetParam();
  RunConfig c;
  c.batch_size = 3;
  c.threads = 2;
  c.layout = layout;
  c.order = order;
  c.shuffle = false;  // sample 4 fails mid-batch (3, 4, 5): 5 moves into its slot
  resolve(c, [](const char*) -> const char* { return nullptr; });
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  std::vector<std::uint64_t> seen;
  const auto summary = run_job(
      c, dataset, {.on_batch = [&](const JobBatch& b) {
        const auto& ids = b.ids;
        const auto& batch = b.data;
        ASSERT_EQ(batch.dim(0), static_cast<std::int64_t>(ids.size()));
        const std::vector<std::int64_t> image = layout == Layout::nchw
                                                    ? std::vector<std::int64_t>{3, 224, 224}
                                                    : std::vector<std::int64_t>{224, 224, 3};
        ASSERT_EQ(std::vector<std::int64_t>(batch.shape().begin() + 1, batch.shape().end()), image);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          const auto expected = media::load_transformed(media::Source::file(dataset.path(ids[i])),
                                                        media::TransformOptions{}, ids[i]);
          const auto* got =
              static_cast<const std::uint8_t*>(batch[static_cast<std::int64_t>(i)].data());
          const auto* want = static_cast<const std::uint8_t*>(expected.data());
          bool same = true;
          for (int p = 0; p < 224 * 224 && same; ++p) {
            for (int k = 0; k < 3; ++k) {
              const auto g = layout == Layout::nchw ? got[k * 224 * 224 + p] : got[p * 3 + k];
              same = same && g == want[p * 3 + k];
            }
          }
          EXPECT_TRUE(same) << "sample " << ids[i];
          seen.push_back(ids[i]);
        }
      }});
  EXPECT_EQ(summary.counts.failed, 1u);
  EXPECT_EQ(summary.counts.samples, 10u);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 1, 2, 3, 5, 6, 7, 8, 9, 10}));
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndOrders, Job,
                         ::testing::Combine(::testing::Values(Layout::nhwc, Layout::nchw),
                                            ::testing::Values(actors::Order::input,
                                                              actors::Order::completion)));

RunConfig resolved(RunConfig c) {
  resolve(c, [](const char*) -> const char* { return nullptr; });
  return c;
}

// Every batch of one epoch of `job` (begun by the caller), without its device memory
// (a device keeps kDeviceBatches at once: holding more would stop the copy stage).
std::vector<JobBatch> drain(launch::Job& job) {
  std::vector<JobBatch> out;
  for (auto r = job.next(); r.status == JobStatus::batch; r = job.next()) {
    r.batch->device = {};
    out.push_back(std::move(*r.batch));
  }
  return out;
}

// A consumer's stage (the Python Loader's) runs in the engine: it shows in the job's
// statistics, its results come in the decode stage's order, what it throws
// comes out of next() at its batch's place, and the job's state covers exactly the
// batches next() returned: a resume from it delivers the rest.
TEST_P(Job, ABatchStageRunsInTheEngineAndTheStateCoversWhatNextReturned) {
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  RunConfig c;
  c.batch_size = 2;
  c.threads = 2;
  c.shuffle = false;  // batches {0,1} {2,3} {4,5} {6,7} {8,9} {10}; sample 4 fails
  c = resolved(c);
  auto run = [](JobBatch b) -> std::shared_ptr<void> {
    if (!b.ids.empty() && b.ids.front() == 6) throw std::runtime_error("no batch 6, please");
    return std::make_shared<std::vector<std::uint64_t>>(b.ids);
  };
  launch::Job job(c, dataset, {.stage = {.run = run, .concurrency = 3, .name = "mine"}});
  job.begin_epoch();
  std::vector<std::uint64_t> staged;
  for (int i = 0; i < 3; ++i) {
    auto r = job.next();
    ASSERT_EQ(r.status, JobStatus::batch);
    EXPECT_FALSE(r.batch->data.defined());
    const auto& ids = *static_cast<const std::vector<std::uint64_t>*>(r.batch->staged.get());
    EXPECT_EQ(ids, r.batch->ids);
    staged.insert(staged.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(staged, (std::vector<std::uint64_t>{0, 1, 2, 3, 5}));
  EXPECT_THROW(
      {
        try {
          job.next();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "no batch 6, please");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(job.counts().batches, 4u);  // the batch whose stage threw counts as delivered
  const auto stats = job.stats();
  EXPECT_TRUE(std::any_of(stats.stages.begin(), stats.stages.end(),
                          [](const auto& s) { return s.name == "mine" && s.concurrency == 3; }));
  const std::vector<std::vector<std::byte>> files{job.checkpoint_bytes()};
  launch::Job resumed(c, dataset, {.resume = checkpoint_from_files(files, 0, 1)});
  resumed.begin_epoch();
  std::vector<std::uint64_t> rest;
  for (const auto& b : drain(resumed)) rest.insert(rest.end(), b.ids.begin(), b.ids.end());
  EXPECT_EQ(rest, (std::vector<std::uint64_t>{8, 9, 10}));
}

// 11 samples, 2 ranks, batch 4: what DDP needs is the same count on both ranks.
TEST_P(Job, EveryRankDeliversTheSameNumberOfBatchesUnlessTailIsNone) {
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  struct Case {
    actors::TailPolicy tail;
    bool drop_last;
    std::array<std::uint64_t, 2> batches, samples;  // per rank (sample 4 fails)
  };
  for (const auto& k : {Case{actors::TailPolicy::pad, false, {2, 2}, {6, 6}},
                        Case{actors::TailPolicy::pad, true, {1, 1}, {4, 4}},
                        Case{actors::TailPolicy::drop_last, false, {2, 2}, {5, 5}},
                        Case{actors::TailPolicy::drop_last, true, {1, 1}, {4, 4}},
                        Case{actors::TailPolicy::none, false, {2, 2}, {6, 5}}}) {
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      RunConfig c;
      c.batch_size = 4;
      c.threads = 2;
      c.order = std::get<1>(GetParam());
      c.rank = rank;
      c.world_size = 2;
      c.tail = k.tail;
      c.drop_last = k.drop_last;
      launch::Job job(resolved(c), dataset);
      EXPECT_EQ(job.batches_in_epoch(), k.batches[rank]);
      job.begin_epoch();
      const auto batches = drain(job);
      std::uint64_t samples = 0;
      for (const auto& b : batches) samples += b.ids.size() + b.failed.size();
      EXPECT_EQ(batches.size(), k.batches[rank]) << to_string(k.tail) << " rank " << rank;
      EXPECT_EQ(samples, k.samples[rank]) << to_string(k.tail) << " rank " << rank;
    }
  }
}

// Batch size 1, sorted: sample 4's batch has no good sample, and is delivered empty,
// with the batch's dtype and sample shape, also through the (CPU) device's copy stage.
TEST_P(Job, ABatchWhoseEverySampleFailedIsDeliveredEmpty) {
  const auto [layout, order] = GetParam();
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  for (const std::string device : {"", "cpu"}) {
    RunConfig c;
    c.batch_size = 1;
    c.threads = 2;
    c.layout = layout;
    c.order = order;
    c.shuffle = false;
    c.device = device;
    if (!device.empty()) c.normalize = Normalize::imagenet;
    launch::Job job(resolved(c), dataset);
    job.begin_epoch();
    const auto batches = drain(job);
    ASSERT_EQ(batches.size(), 11u) << device;
    const auto empty = std::find_if(batches.begin(), batches.end(),
                                    [](const JobBatch& b) { return b.ids.empty(); });
    ASSERT_NE(empty, batches.end());
    EXPECT_EQ(empty->failed, std::vector<std::uint64_t>{4});
    ASSERT_TRUE(empty->data.defined()) << device;
    const std::vector<std::int64_t> shape = layout == Layout::nchw
                                                ? std::vector<std::int64_t>{0, 3, 224, 224}
                                                : std::vector<std::int64_t>{0, 224, 224, 3};
    EXPECT_EQ(std::vector<std::int64_t>(empty->data.shape().begin(), empty->data.shape().end()),
              shape);
    EXPECT_EQ(empty->data.dtype(), device.empty() ? media::DType::uint8 : media::DType::float32);
    EXPECT_EQ(job.counts().batches, 11u);
    EXPECT_EQ(job.counts().failed, 1u);
  }
}

// The read stage retries a transient read error (EAGAIN, a timed-out read: media's
// `unavailable`) with backoff, up to kReadAttempts reads, then fails the sample with
// that code; a missing file and a corrupt one are read once. Faults are injected
// through JobOptions::read_file (the job's reader seam).
TEST_P(Job, TheReadStageRetriesATransientErrorAndNotAMissingOrCorruptFile) {
  const auto [layout, order] = GetParam();
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  RunConfig c;
  c.batch_size = 4;
  c.threads = 2;
  c.layout = layout;
  c.order = order;
  c.shuffle = false;
  std::mutex mutex;
  std::map<std::string, int> reads;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < dataset.size(); ++i) files.push_back(dataset.path(i));
  JobOptions options;
  options.read_file = [&](const std::string& path) {
    int n = 0;
    {
      std::lock_guard lock(mutex);
      n = ++reads[path];
    }
    if ((path == files[1] && n <= 2) || path == files[2]) {
      throw media::MediaError(media::ErrorCode::unavailable, path, "read timed out");
    }
    if (path == files[6]) throw media::MediaError(media::ErrorCode::not_found, path, "gone");
    return media::read_file(path);
  };
  launch::Job job(resolved(c), dataset, std::move(options));
  job.begin_epoch();
  std::vector<std::uint64_t> delivered, failed;
  for (const auto& b : drain(job)) {
    delivered.insert(delivered.end(), b.ids.begin(), b.ids.end());
    failed.insert(failed.end(), b.failed.begin(), b.failed.end());
  }
  std::sort(delivered.begin(), delivered.end());
  std::sort(failed.begin(), failed.end());
  EXPECT_EQ(delivered, (std::vector<std::uint64_t>{0, 1, 3, 5, 7, 8, 9, 10}));
  EXPECT_EQ(failed, (std::vector<std::uint64_t>{2, 4, 6}));
  EXPECT_EQ(reads[files[1]], 3);              // two transient errors, then read
  EXPECT_EQ(reads[files[2]], kReadAttempts);  // transient every time: bounded
  EXPECT_EQ(reads[files[6]], 1);              // missing: not retried
  EXPECT_EQ(reads[files[4]], 1);              // corrupt: read once, fails in decode
  EXPECT_EQ(reads[files[0]], 1);
  const auto stats = job.stats();
  const auto read = std::find_if(stats.stages.begin(), stats.stages.end(),
                                 [](const actors::StageStats& s) { return s.name == "read"; });
  ASSERT_NE(read, stats.stages.end());
  EXPECT_EQ(read->retries, static_cast<std::uint64_t>(2 + kReadAttempts - 1));
  EXPECT_EQ(read->failures, 2u);
  // Each failure is the engine's record, with its stage, sample and code.
  std::map<std::uint64_t, actors::SampleFailure> records;
  for (const auto& r : stats.recent_failures) {
    ASSERT_TRUE(r.id.has_value()) << r.message();
    records[*r.id] = r;
  }
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2].stage, "read");
  EXPECT_EQ(records[2].code, media::ErrorCode::unavailable);
  EXPECT_EQ(records[2].path, files[2]);
  EXPECT_EQ(records[2].message(), "sample 2 (" + files[2] + "): read timed out [unavailable]");
  EXPECT_EQ(records[6].stage, "read");
  EXPECT_EQ(records[6].code, media::ErrorCode::not_found);
  EXPECT_EQ(records[4].stage, "decode");
  EXPECT_EQ(records[4].code, media::ErrorCode::bad_data);
  EXPECT_EQ(records[4].path, files[4]);
}

// A consumer that leaves an epoch early: the next begin runs the next epoch; without an
// epoch limit a rate budget counts over the epochs begun (1 failure in 11 per epoch,
// 10%: 1, 2, 3, … allowed), so a job runs on however many epochs it is given.
TEST_P(Job, AnAbandonedEpochIsLeftAndAnOpenEndedJobKeepsItsRateOverEveryEpoch) {
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  RunConfig c;
  c.batch_size = 2;
  c.threads = 2;
  c.order = std::get<1>(GetParam());
  c.failure_budget = parse_failure_budget("10%", "test");
  c = resolved(c);
  c.epochs = kUnlimitedEpochs;
  launch::Job job(c, dataset);
  job.begin_epoch();
  ASSERT_EQ(job.next().status, JobStatus::batch);
  job.abandon_epoch();
  EXPECT_FALSE(job.in_epoch());
  EXPECT_EQ(job.next_epoch(), 1u);
  for (std::uint64_t e = 1; e < 5; ++e) {
    job.begin_epoch();
    EXPECT_EQ(launch::epoch_of(job.state()), e);
    std::uint64_t samples = 0;
    for (const auto& b : drain(job)) samples += b.ids.size() + b.failed.size();
    EXPECT_EQ(samples, 11u) << "epoch " << e;
    EXPECT_FALSE(job.finished());
  }
}

TEST(Dataset, ErrorsNameTheFolderOrListAndCarryTheirKey) {
  const auto dir = fs::temp_directory_path() / ("brigade-dataset-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto error = [](const std::function<void()>& fn) -> std::pair<std::string, std::string> {
    try {
      fn();
    } catch (const ConfigError& e) {
      return {e.what(), e.key()};
    }
    return {"(no error)", ""};
  };
  const auto missing = (dir / "missing").string();
  auto [what, key] = error([&] { list_folder(missing, MediaKind::image); });
  EXPECT_EQ(key, "data");
  EXPECT_NE(what.find(missing), std::string::npos) << what;
  std::tie(what, key) = error([&] { list_folder(dir.string(), MediaKind::image); });
  EXPECT_EQ(key, "data");
  EXPECT_NE(what.find("no image files"), std::string::npos) << what;
  std::tie(what, key) = error([&] { read_list(missing); });
  EXPECT_EQ(key, "list");
  EXPECT_NE(what.find("cannot read"), std::string::npos) << what;
  const auto blank = (dir / "blank.txt").string();
  media::write_file(blank, std::vector<std::uint8_t>{'\n', ' ', '\n'});
  std::tie(what, key) = error([&] { read_list(blank); });
  EXPECT_EQ(key, "list");
  EXPECT_NE(what.find("no paths"), std::string::npos) << what;
  fs::remove_all(dir);
}

// The demo images are 10 class folders (labels = folder lists them), made the same way
// every time; a cache of the earlier flat layout is regenerated.
TEST(DemoDataset, ImagesAreTenClassFoldersGeneratedDeterministically) {
  const auto base = fs::temp_directory_path() / ("brigade-demo-" + std::to_string(::getpid()));
  const DemoDatasetOptions options{.images = 30, .clips = 0, .threads = 2};
  fs::create_directories(base / "a" / "images" / "07");  // a v1 bucket: not a class
  media::write_file((base / "a" / ".complete").string(), std::vector<std::uint8_t>{'v', '1'});
  ensure_demo_dataset(base / "a", options);
  ensure_demo_dataset(base / "b", options);
  const auto a = list_class_folders((base / "a" / "images").string(), MediaKind::image);
  const auto b = list_class_folders((base / "b" / "images").string(), MediaKind::image);
  ASSERT_EQ(a.classes().size(), 10u);
  EXPECT_EQ(a.classes().front(), "class-0");
  EXPECT_EQ(a.classes().back(), "class-9");
  ASSERT_EQ(a.size(), 30u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.identity(i), b.identity(i));
    EXPECT_EQ(a.label(i), static_cast<std::int64_t>(i / 3));  // 3 images a class
    EXPECT_EQ(media::read_file(a.path(i)), media::read_file(b.path(i))) << a.identity(i);
  }
  fs::remove_all(base);
}

// A class-folder tree (labels = folder): 3 classes, nested folders, one corrupt sample.
class LabelledJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ =
        fs::temp_directory_path() / ("brigade-labelled-" + std::to_string(std::random_device{}()));
    int seed = 0;
    for (const std::string rel : {"ant", "ant/deep", "bee", "bee-big", "bee-big/x y"}) {
      fs::create_directories(root_ / rel);
      for (int i = 0; i < 3; ++i, ++seed) {
        auto bytes = media::make_image(media::ImageCodec::jpeg, 64 + 8 * i, 48, seed);
        if (seed == 7) bytes.resize(bytes.size() / 3);  // corrupt: bee/img-1.jpg
        media::write_file((root_ / rel / ("img-" + std::to_string(i) + ".jpg")).string(), bytes);
      }
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static inline fs::path root_;
};

// Every batch's labels are its ids' labels in the dataset: shuffled, decoded by a remote
// worker, and with a failed sample (left out of ids, so out of labels).
TEST_F(LabelledJob, EachBatchCarriesTheLabelsOfItsIds) {
  const auto dataset = list_class_folders(root_.string(), MediaKind::image);
  ASSERT_EQ(dataset.classes(), (std::vector<std::string>{"ant", "bee", "bee-big"}));
  ASSERT_EQ(dataset.size(), 15u);
  EXPECT_EQ(dataset.identity(7), "bee/img-1.jpg");
  const transport::Security security{.token = "job test"};
  transport::OperationRegistry registry;
  register_decode_operations(registry);
  transport::WorkerOptions options;
  options.threads = 2;
  options.security = security;
  transport::WorkerNode worker(options, std::move(registry));
  for (const bool remote : {false, true}) {
    RunConfig c;
    c.batch_size = 4;
    c.threads = 2;
    c.seed = 11;
    if (remote) {
      c.workers = {worker.address()};
      c.on_no_workers = OnNoWorkers::fail;  // decoded there, never here
    }
    resolve(c, [](const char* name) -> const char* {
      return std::string_view(name) == "BRIGADE_TOKEN" ? "job test" : nullptr;
    });
    launch::Job job(c, dataset);
    job.begin_epoch();
    std::vector<std::uint64_t> ids, failed;
    for (const auto& b : drain(job)) {
      ASSERT_EQ(b.labels.size(), b.ids.size()) << "remote " << remote;
      for (std::size_t i = 0; i < b.ids.size(); ++i)
        EXPECT_EQ(b.labels[i], dataset.label(b.ids[i])) << "sample " << b.ids[i];
      ids.insert(ids.end(), b.ids.begin(), b.ids.end());
      failed.insert(failed.end(), b.failed.begin(), b.failed.end());
    }
    EXPECT_EQ(failed, std::vector<std::uint64_t>{7}) << "remote " << remote;
    EXPECT_FALSE(std::is_sorted(ids.begin(), ids.end())) << "shuffled";
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids.size(), 14u);
    EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
    if (remote) {
      const auto summary = job.remote_summary();
      ASSERT_TRUE(summary.has_value());
      EXPECT_GT(summary->pool.done, 0u);  // decoded by the worker, not here
      EXPECT_EQ(summary->decoded_locally, 0u);
    }
  }
  // An unlabelled listing of the same tree: batches without labels.
  const auto plain = list_folder(root_.string(), MediaKind::image);
  EXPECT_FALSE(plain.labelled());
  RunConfig c;
  c.batch_size = 8;
  c.threads = 2;
  launch::Job job(resolved(c), plain);
  job.begin_epoch();
  for (const auto& b : drain(job)) EXPECT_TRUE(b.labels.empty());
}

// HYBRID (job.h): the rank decodes in its local slot while it is free and sends the
// rest to the worker; every batch, whichever side decoded it, is byte-identical to the
// local run's, with the same failed sample. Made deterministic by the reader: the local
// slot's first read waits until the worker has finished a task, so the batches behind it
// can only go to the worker meanwhile.
TEST_F(LabelledJob, HybridBatchesAreTheLocalRunsWhicheverSideDecodedThem) {
  const auto dataset = list_class_folders(root_.string(), MediaKind::image);
  transport::OperationRegistry registry;
  register_decode_operations(registry);
  auto wo = transport::WorkerOptions{};
  wo.threads = 2;
  wo.security = {.token = "job test"};
  transport::WorkerNode worker(wo, std::move(registry));
  auto run = [&](bool hybrid, ReadFile reader, std::optional<RemoteSummary>& summary) {
    RunConfig c;
    c.batch_size = 2;
    c.threads = 1;
    c.seed = 5;
    if (hybrid) {
      c.workers = {worker.address()};
      c.decode = DecodeMode::hybrid;
    }
    resolve(c, [](const char* name) -> const char* {
      return std::string_view(name) == "BRIGADE_TOKEN" ? "job test" : nullptr;
    });
    launch::Job job(c, dataset, {.read_file = std::move(reader)});
    job.begin_epoch();
    auto batches = drain(job);
    summary = job.remote_summary();
    return batches;
  };
  std::optional<RemoteSummary> none, summary;
  const auto local = run(false, {}, none);
  std::atomic<bool> first{true};
  const auto hybrid = run(
      true,
      [&](const std::string& path) {
        if (first.exchange(false)) {
          EXPECT_TRUE(transport::detail::WorkerAccess::wait(
              worker, [](const auto& s) { return s.tasks_done >= 1; }, 60s));
        }
        return media::read_file(path);
      },
      summary);
  ASSERT_EQ(hybrid.size(), local.size());
  for (std::size_t k = 0; k < local.size(); ++k) {
    EXPECT_EQ(hybrid[k].ids, local[k].ids) << "batch " << k;
    EXPECT_EQ(hybrid[k].failed, local[k].failed) << "batch " << k;
    EXPECT_EQ(hybrid[k].labels, local[k].labels) << "batch " << k;
    ASSERT_EQ(hybrid[k].data.shape(), local[k].data.shape()) << "batch " << k;
    EXPECT_EQ(std::memcmp(hybrid[k].data.data(), local[k].data.data(), local[k].data.nbytes()), 0)
        << "batch " << k;
  }
  ASSERT_TRUE(summary);
  EXPECT_GE(summary->decoded_here, 1u) << "a batch in the local slot (maybe the short last one)";
  EXPECT_GT(summary->pool.done, 0u) << "the overflow, on the worker";
  EXPECT_EQ(summary->decoded_locally, 0u) << "never for want of a worker";
}

// HYBRID without any worker: the rank decodes everything itself, at once (no wait for
// a worker, no failure with on_no_workers = fail: it does not apply).
TEST_F(LabelledJob, HybridWithoutAWorkerDecodesEverythingHere) {
  const auto dataset = list_class_folders(root_.string(), MediaKind::image);
  RunConfig c;
  c.batch_size = 4;
  c.threads = 1;
  c.workers = {transport::Endpoint{"127.0.0.1", 1}};  // nobody listens there
  c.decode = DecodeMode::hybrid;
  c.on_no_workers = OnNoWorkers::fail;
  resolve(c, [](const char* name) -> const char* {
    return std::string_view(name) == "BRIGADE_TOKEN" ? "job test" : nullptr;
  });
  launch::Job job(c, dataset);
  job.begin_epoch();
  std::uint64_t samples = 0;
  std::vector<std::uint64_t> failed;
  for (const auto& b : drain(job)) {
    samples += b.ids.size();
    failed.insert(failed.end(), b.failed.begin(), b.failed.end());
  }
  EXPECT_EQ(samples, 14u);
  EXPECT_EQ(failed, std::vector<std::uint64_t>{7});
  EXPECT_EQ(job.remote_summary()->decoded_here, 15u);
  EXPECT_EQ(job.remote_summary()->pool.done, 0u);
}

// REBALANCING's rule (job.h RankWeights), interval by interval: Ranks feeds it each
// rank's cumulative figures, one second per interval, at the rates given.
using Weights = std::vector<std::uint32_t>;

class Ranks {
 public:
  explicit Ranks(std::size_t n) : rule_(static_cast<std::uint32_t>(n)), progress_(n) {}
  // One interval: rank r delivered rates[r] samples and its consumer waited waits[r] of
  // the second (0.8 where not given); a negative rate: no report.
  const Weights& interval(const std::vector<double>& rates, std::vector<double> waits = {}) {
    waits.resize(rates.size(), 0.8);
    ++now_;
    std::vector<std::optional<RankWeights::Progress>> report(progress_.size());
    for (std::size_t r = 0; r < rates.size(); ++r) {
      if (rates[r] < 0) continue;
      progress_[r].samples += rates[r];
      progress_[r].wait_s += waits[r];
      progress_[r].at_s = now_;
      report[r] = progress_[r];
    }
    return rule_.update(report);
  }
  RankWeights& rule() { return rule_; }

 private:
  RankWeights rule_;
  std::vector<RankWeights::Progress> progress_;
  double now_ = 0;
};

const Weights kEven(4, RankWeights::kNeutralWeight);

// Equal ranks on a loaded machine: every rank delivers its epochs in bursts (500
// samples in one interval, then little or nothing, phases apart), and in turn one rank
// has an interval at a quarter of its own. Over the window they keep pace, so nobody
// gains weight, however long it goes on; not even a rank that delivers a quarter of the
// others' every other interval (and the rest in the next).
TEST(RankWeights, EqualNoisyRanksKeepTheNeutralWeight) {
  Ranks ranks(4);
  for (int i = 0; i < 60; ++i) {
    std::vector<double> r(4);
    for (std::size_t k = 0; k < 4; ++k) r[k] = (i + int(k)) % 2 == 0 ? 400 : 100;
    r[static_cast<std::size_t>(i) % 4] /= 4;
    EXPECT_EQ(ranks.interval(r), kEven) << "interval " << i;
  }
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(ranks.interval({250, 250, i % 2 ? 440.0 : 60.0, 250}), kEven) << "interval " << i;
}

// A rank delivering half the others' rate: judged once its window holds kWindow
// intervals, it gains weight from the second interval behind on, by pressure^¼ per
// interval, until the workers' help makes it keep pace (here, as a worker would: the
// weight buys it rate); its hog gone, it is ahead with that weight, which falls back to
// exactly neutral; the others stay neutral throughout.
TEST(RankWeights, APersistentStragglerGainsWeightThenFallsBackAfterItRecovers) {
  Ranks ranks(4);
  auto rate_of_2 = [&](double alone) {
    // Each 1000 of weight above neutral buys it 25 samples/s from the workers.
    return alone + 25.0 * (ranks.rule().weights()[2] - 1000.0) / 1000.0;
  };
  for (int i = 0; i < RankWeights::kWindow; ++i)
    EXPECT_EQ(ranks.interval({100, 100, rate_of_2(50), 100}), kEven) << "not judged yet " << i;
  EXPECT_EQ(ranks.interval({100, 100, rate_of_2(50), 100}), kEven) << "judged, behind once";
  EXPECT_EQ(ranks.interval({100, 100, rate_of_2(50), 100}), (Weights{1000, 1000, 1189, 1000}))
      << "behind twice: 2^¼";
  std::uint32_t peak = 0;
  for (int i = 0; i < 40; ++i) {
    ranks.interval({100, 100, rate_of_2(50), 100});
    peak = std::max(peak, ranks.rule().weights()[2]);
    EXPECT_EQ(ranks.rule().weights()[0], 1000u);
    EXPECT_EQ(ranks.rule().weights()[1], 1000u);
    EXPECT_EQ(ranks.rule().weights()[3], 1000u);
  }
  // Pace needs 2000 above neutral (+50 samples/s); it settles there, within 5%.
  EXPECT_NEAR(ranks.rule().weights()[2], 3000, 150);
  EXPECT_LT(peak, 3600u) << "a small overshoot at most";
  // Recovered: alone it keeps pace; with its weight it is ahead, and the weight falls.
  int intervals = 0;
  while (ranks.rule().weights()[2] > 1000 && intervals < 60) {
    const auto before = ranks.rule().weights()[2];
    ranks.interval({100, 100, rate_of_2(100), 100});
    EXPECT_LE(ranks.rule().weights()[2], before) << "interval " << intervals;
    ++intervals;
  }
  EXPECT_EQ(ranks.rule().weights(), kEven) << "back to neutral after " << intervals;
  EXPECT_LT(intervals, 60);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(ranks.interval({100, 100, 100, 100}), kEven);
  // Slowed beyond any help, it reaches kMaxWeight and no more.
  for (int i = 0; i < 200; ++i) ranks.interval({100, 100, 1, 100});
  EXPECT_EQ(ranks.rule().weights()[2], RankWeights::kMaxWeight);
}

// Lockstep (equal rates): rank 1's consumer waits 0.55 of the time, the others 0.05: its
// pressure is 0.6 / 0.1 = 6, so it gains 6^¼ from its second interval behind. Where the
// others wait on data most of the time too (0.8), the same difference moves nobody.
TEST(RankWeights, InLockstepARankWaitingOnDataGainsUnlessEveryRankWaits) {
  Ranks lockstep(3);
  for (int i = 0; i <= RankWeights::kWindow; ++i)
    EXPECT_EQ(lockstep.interval({10, 10, 10}, {0.05, 0.55, 0.05}), (Weights{1000, 1000, 1000}));
  EXPECT_EQ(lockstep.interval({10, 10, 10}, {0.05, 0.55, 0.05}), (Weights{1000, 1565, 1000}));
  Ranks waiting(3);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(waiting.interval({10, 10, 10}, {0.8, 1.0, 0.6}), (Weights{1000, 1000, 1000}));
}

// A rank without a report in an interval keeps its weight and its count of intervals
// behind restarts (no figures are no evidence); one whose figures went backwards (a
// restarted reporter) starts its window anew.
TEST(RankWeights, ARankWithoutReportsKeepsItsWeightAndARestartedOneStartsAnew) {
  Ranks ranks(3);
  for (int i = 0; i <= RankWeights::kWindow; ++i) ranks.interval({100, 100, 40});
  EXPECT_EQ(ranks.rule().weights(), (Weights{1000, 1000, 1000})) << "behind once";
  EXPECT_EQ(ranks.interval({100, 100, -1}), (Weights{1000, 1000, 1000})) << "no report";
  EXPECT_EQ(ranks.interval({100, 100, 40}), (Weights{1000, 1000, 1000})) << "behind once again";
  const auto gained = ranks.interval({100, 100, 40})[2];
  EXPECT_GT(gained, 1000u) << "twice in a row";
  EXPECT_EQ(ranks.interval({100, 100, -1})[2], gained) << "no report: kept";
  RankWeights rule(2);
  using P = RankWeights::Progress;
  for (int i = 1; i <= 10; ++i)
    rule.update({P{100.0 * i, 0, double(i)}, P{40.0 * i, 0, double(i)}});
  ASSERT_GT(rule.weights()[1], 1000u);
  const auto before = rule.weights();
  // Rank 1 restarted: its totals start from 0; until its new window holds kWindow
  // intervals nobody is judged, so both weights stay as they were.
  for (int i = 1; i <= RankWeights::kWindow; ++i) {
    EXPECT_EQ(rule.update({P{100.0 * (10 + i), 0, 10.0 + i}, P{100.0 * i, 0, double(i)}}), before)
        << i;
  }
}

}  // namespace
}  // namespace brigade::launch::job_test
