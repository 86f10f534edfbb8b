// The built-in decode operations on a worker node in this process (over 127.0.0.1) and
// the trainer's remote decode stage: byte identity with local decoding, checks of the
// results, retries, the poison sample, the local fallback, malformed bytes.
#include "launch/loader/remote_ops.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "actors/errors.h"
#include "actors/task.h"
#include "launch/loader/decode_task.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/synthetic.h"
#include "media/video.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using transport::CallStatus;

const transport::Security kSecurity{.token = "remote ops test"};

// An operation stuck outside the process (a read that never returns) until its task is
// cancelled.
[[noreturn]] void hang_until_stopped(const transport::OperationContext& c) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait(lock, c.stop, [] { return false; });
  throw std::runtime_error("cancelled");
}

class RemoteOps : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("brigade-remote-ops-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_);
    for (int i = 0; i < 6; ++i) {
      auto bytes = media::make_image(media::ImageCodec::jpeg, 120 + 10 * i, 90 + 4 * i, i);
      const auto path = root_ / ("img-" + std::to_string(i) + ".jpg");
      media::write_file(path.string(), bytes);
      samples_.push_back({.id = static_cast<std::uint64_t>(i), .path = path.string()});
    }
    std::ofstream(root_ / "corrupt.jpg") << "not a jpeg at all";
    samples_.push_back({.id = 6, .path = (root_ / "corrupt.jpg").string()});
    samples_.push_back({.id = 7, .path = (root_ / "missing.jpg").string()});
  }
  void TearDown() override { fs::remove_all(root_); }

  static transport::WorkerOptions worker_options() {
    transport::WorkerOptions o;
    o.threads = 2;
    o.security = kSecurity;
    return o;
  }
  static transport::PoolOptions pool_options(const transport::WorkerNode& worker) {
    transport::PoolOptions o;
    o.workers = {worker.address()};
    o.security = kSecurity;
    o.operations = {kDecodeImages};
    o.reconnect_interval = 200ms;
    return o;
  }
  static transport::OperationRegistry builtin() {
    transport::OperationRegistry r;
    register_decode_operations(r);
    return r;
  }

  DecodedBatch local(const DecodeSpec& spec) {
    auto copy = samples_;
    for (auto& s : copy) read_sample(s);
    return decode_batch(spec, copy, {});
  }

  fs::path root_;
  std::vector<EncodedSample> samples_;
};

void expect_same(const DecodedBatch& a, const DecodedBatch& b) {
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.data.shape(), b.data.shape());
  ASSERT_EQ(a.data.nbytes(), b.data.nbytes());
  EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.nbytes()), 0);
  ASSERT_EQ(a.failures.size(), b.failures.size());
  for (std::size_t i = 0; i < a.failures.size(); ++i) {
    EXPECT_EQ(a.failures[i].index, b.failures[i].index);
    EXPECT_EQ(a.failures[i].id, b.failures[i].id);
    EXPECT_EQ(a.failures[i].message(), b.failures[i].message());
    EXPECT_EQ(a.failures[i].code, b.failures[i].code);  // the typed code crossed the wire
    EXPECT_EQ(a.failures[i].path, b.failures[i].path);  // and the record's fields
    EXPECT_EQ(a.failures[i].cause, b.failures[i].cause);
  }
}

// share_result (issue 21: the trainer's CPU per remote sample): a batch that came in one
// result is a view of that result, the allocator never asked; without it, one copy into
// the allocator's memory. Byte-identical either way.
TEST_F(RemoteOps, ABatchFromOneResultIsAViewOfItWithShareResult) {
  transport::WorkerNode worker(worker_options(), builtin());
  transport::RemotePool pool(pool_options(worker));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  int allocations = 0;
  const media::Allocator counting = [&](std::size_t n) {
    ++allocations;
    return media::default_allocate(n);
  };
  const DecodeSpec spec;
  auto shared = remote_decode_batch(pool, spec, samples_, counting, {.share_result = true}, {});
  ASSERT_TRUE(shared);
  expect_same(*shared, local(spec));
  EXPECT_EQ(allocations, 0);
  auto copied = remote_decode_batch(pool, spec, samples_, counting, {}, {});
  ASSERT_TRUE(copied);
  expect_same(*copied, local(spec));
  EXPECT_EQ(allocations, 1);
}

TEST_F(RemoteOps, ARemoteBatchIsByteIdenticalToALocalOne) {
  transport::WorkerNode worker(worker_options(), builtin());
  transport::RemotePool pool(pool_options(worker));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  for (auto [layout, transform] : {std::pair{Layout::nhwc, media::TransformKind::eval},
                                   {Layout::nchw, media::TransformKind::eval},
                                   {Layout::nhwc, media::TransformKind::train},
                                   {Layout::nchw, media::TransformKind::train}}) {
    DecodeSpec spec{.layout = layout, .transform = {.kind = transform, .seed = 3, .epoch = 1}};
    spec.transform.scale_min = 0.2;  // parameters other than the defaults cross too
    spec.transform.ratio_max = 1.5;
    spec.transform.flip_probability = 0.7;
    RemoteDecodeFigures figures;
    auto remote = remote_decode_batch(pool, spec, samples_, {}, {}, {}, &figures);
    ASSERT_TRUE(remote);
    expect_same(*remote, local(spec));
    EXPECT_EQ(remote->ids.size(), 6u);
    ASSERT_EQ(remote->failures.size(), 2u);
    EXPECT_NE(remote->failures[1].message().find("sample 7 ("), std::string::npos);
    // The failed samples' records as fields, from the worker: id, path, code, cause.
    const auto& corrupt = remote->failures[0];
    EXPECT_EQ(corrupt.id, std::optional<std::uint64_t>(6));
    EXPECT_EQ(corrupt.path, samples_[6].path);
    EXPECT_EQ(corrupt.code, media::ErrorCode::bad_data);
    EXPECT_EQ(error_code_name(corrupt.code), "bad_data");
    EXPECT_EQ(corrupt.message(), "sample 6 (" + samples_[6].path + "): " + corrupt.cause);
    EXPECT_EQ(remote->failures[1].code, media::ErrorCode::not_found);
    EXPECT_EQ(figures.attempts_lost, 0u);
    EXPECT_EQ(figures.decoded_locally, 0u);
  }
  // The interpolation crosses too: bicubic on the worker as here, and not bilinear.
  DecodeSpec bicubic{.transform = {.kind = media::TransformKind::train, .seed = 3}};
  bicubic.transform.interpolation = media::Interpolation::bicubic;
  auto remote = remote_decode_batch(pool, bicubic, samples_, {}, {}, {});
  ASSERT_TRUE(remote);
  expect_same(*remote, local(bicubic));
  const auto bilinear = local({.transform = {.kind = media::TransformKind::train, .seed = 3}});
  ASSERT_EQ(bilinear.data.nbytes(), remote->data.nbytes());
  EXPECT_NE(std::memcmp(bilinear.data.data(), remote->data.data(), bilinear.data.nbytes()), 0);
}

// Clips with the train transform: the frames and crop media/transform.h documents, the
// same on a worker; eval and other epochs give other pixels.
TEST_F(RemoteOps, TrainClipsAreTheDocumentedFramesAndCropHereAndOnAWorker) {
  std::vector<EncodedSample> clips;
  for (int i = 0; i < 3; ++i) {
    const auto bytes = media::make_video({.codec = media::VideoCodec::h264,
                                          .width = 160 + 16 * i,
                                          .height = 120,
                                          .frames = 60,
                                          .fps = 30,
                                          .gop = 30,
                                          .b_frames = 2,
                                          .seed = std::uint64_t(i)});
    const auto path = root_ / ("clip-" + std::to_string(i) + ".mp4");
    media::write_file(path.string(), bytes);
    clips.push_back({.id = std::uint64_t(20 + i), .path = path.string()});
  }
  DecodeSpec spec{
      .kind = MediaKind::video,
      .transform = {.kind = media::TransformKind::train, .size = 64, .seed = 5, .epoch = 1}};
  spec.clip_stride = 3;
  auto decode_here = [&](const DecodeSpec& s) {
    auto copy = clips;
    for (auto& c : copy) read_sample(c);
    return decode_batch(s, copy, {});
  };
  const auto here = decode_here(spec);
  ASSERT_TRUE(here.failures.empty()) << here.failures[0].message();
  ASSERT_EQ(here.data.shape(), (std::vector<std::int64_t>{3, 8, 64, 64, 3}));
  const auto& t = spec.transform;
  for (std::size_t i = 0; i < clips.size(); ++i) {
    // The reference: every frame, then the documented selection and crop of each.
    const auto all = media::load_video(media::Source::file(clips[i].path));
    const auto frames = media::train_clip_frames(t, 60, 8, 3, clips[i].id);
    const auto crop = media::train_crop(t, 160 + 16 * int(i), 120, clips[i].id);
    media::ImageOptions o;
    o.resize = media::ResizeMode::stretch;
    o.width = o.height = 64;
    o.crop_x = crop.x;
    o.crop_y = crop.y;
    o.crop_width = crop.width;
    o.crop_height = crop.height;
    o.flip = crop.flip;
    media::VideoOptions v{.frames = media::FrameSelection::at({}), .image = o};
    for (std::size_t k = 0; k < frames.size(); ++k)
      v.frames.timestamps.push_back((double(frames[k]) + 0.5) / 30);
    const auto want = media::load_video(media::Source::file(clips[i].path), v);
    const auto got = here.data[std::int64_t(i)];
    ASSERT_EQ(want.nbytes(), got.nbytes());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.nbytes()), 0) << "clip " << i;
    EXPECT_EQ(all.dim(0), 60);
  }
  // Two decodes agree; another epoch, and eval, do not.
  expect_same(decode_here(spec), here);
  DecodeSpec other = spec;
  other.transform.epoch = 2;
  const auto moved = decode_here(other);
  EXPECT_NE(std::memcmp(moved.data.data(), here.data.data(), here.data.nbytes()), 0);
  DecodeSpec eval = spec;
  eval.transform.kind = media::TransformKind::eval;
  const auto evaluated = decode_here(eval);
  EXPECT_NE(std::memcmp(evaluated.data.data(), here.data.data(), here.data.nbytes()), 0);
  // On a worker: byte-identical.
  transport::WorkerNode worker(worker_options(), builtin());
  auto o = pool_options(worker);
  o.operations = {kDecodeClips};
  transport::RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  auto remote = remote_decode_batch(pool, spec, clips, {}, {}, {});
  ASSERT_TRUE(remote);
  expect_same(*remote, here);
}

TEST_F(RemoteOps, AWorkerWithItsOwnListReadsItsOwnPaths) {
  // The worker sees the files under another name (its own mount): ids map to its list.
  const auto mount = root_ / "mount";
  fs::create_directories(mount);
  std::vector<SampleLocation> worker_list;
  for (const auto& s : samples_) {
    const auto there = mount / fs::path(s.path).filename();
    if (fs::exists(s.path)) fs::copy_file(s.path, there);
    worker_list.push_back({.path = there.string()});
  }
  transport::OperationRegistry r;
  register_decode_operations(r, worker_list);
  transport::WorkerNode worker(worker_options(), std::move(r));
  transport::PoolOptions o = pool_options(worker);
  transport::RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  auto moved = samples_;
  for (auto& s : moved) s.path = "/trainer/only/" + fs::path(s.path).filename().string();
  auto remote = remote_decode_batch(pool, {}, moved, {}, {}, {});
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->ids, (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(remote->failures.size(), 2u);
}

// A worker that answers with what `lie` makes of the true result.
transport::OperationRegistry lying(std::function<std::vector<char>(std::vector<char>)> lie) {
  transport::OperationRegistry truth;
  register_decode_operations(truth);
  auto real = *truth.find(kDecodeImages.name);
  transport::OperationRegistry r;
  r.add(kDecodeImages, [real, lie](std::span<const char> task, const auto& context) {
    return lie(real(task, context));
  });
  return r;
}

TEST_F(RemoteOps, AResultThatDoesNotMatchItsTaskIsNeverUsed) {
  // Truncated results are malformed; the sample is retried one by one, then failed.
  transport::WorkerNode worker(worker_options(), lying([](std::vector<char> b) {
                                 b.resize(b.size() / 2 / 8 * 8);
                                 return b;
                               }));
  transport::RemotePool pool(pool_options(worker));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  RemoteDecodeFigures figures;
  auto r = remote_decode_batch(pool, {}, samples_, {}, {.max_attempts = 2}, {}, &figures);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ids.empty());
  ASSERT_EQ(r->failures.size(), samples_.size());
  for (const auto& f : r->failures) {
    EXPECT_NE(f.message().find("lost on 2 attempts"), std::string::npos) << f.message();
    EXPECT_NE(f.message().find("does not match its task"), std::string::npos) << f.message();
    EXPECT_EQ(f.code, transport::RemoteErrc::lost_on_attempts);
  }
  EXPECT_EQ(figures.attempts_lost, 1u + samples_.size());  // the batch, then each sample
}

TEST_F(RemoteOps, MutatedResultsAreEitherConsistentOrRejected) {
  std::mt19937 random(11);
  std::mutex mutex;
  transport::WorkerNode worker(worker_options(), lying([&](std::vector<char> b) {
                                 std::lock_guard lock(mutex);
                                 const int flips = 1 + random() % 4;
                                 for (int i = 0; i < flips; ++i)
                                   b[random() % b.size()] ^= char(1 << (random() % 8));
                                 return b;
                               }));
  transport::RemotePool pool(pool_options(worker));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  const auto reference = local({});
  for (int round = 0; round < 40; ++round) {
    auto r = remote_decode_batch(pool, {}, samples_, {}, {.max_attempts = 1}, {});
    ASSERT_TRUE(r);
    // Every sample is accounted for once: in the batch or failed.
    EXPECT_EQ(r->ids.size() + r->failures.size(), samples_.size());
    const auto row = r->ids.empty() ? 0 : r->data.nbytes() / r->ids.size();
    EXPECT_EQ(r->data.nbytes(), r->ids.size() * row);
  }
  (void)reference;
}

TEST_F(RemoteOps, MalformedTasksThrowAndNeverCrashTheWorker) {
  auto ops = builtin();
  const auto& op = *ops.find(kDecodeImages.name);
  const auto task = write_decode_task({}, samples_);
  std::mt19937 random(5);
  std::stop_source stop;
  int threw = 0;
  for (int round = 0; round < 300; ++round) {
    auto bytes = task;
    if (round % 3 == 0) bytes.resize(random() % bytes.size());
    for (int i = 0; i < 3 && !bytes.empty(); ++i) bytes[random() % bytes.size()] ^= char(random());
    try {
      auto out = op(bytes, {stop.get_token()});
      EXPECT_FALSE(out.empty());
    } catch (const std::exception&) {
      ++threw;
    }
  }
  EXPECT_GT(threw, 0);
  EXPECT_THROW(op({}, {stop.get_token()}), std::exception);
  const auto video = write_decode_task({.kind = MediaKind::video}, samples_);
  EXPECT_THROW(op(video, {stop.get_token()}), std::exception);  // the wrong operation
  // A transform the worker cannot apply is refused with its reason, never decoded.
  DecodeSpec bad{.transform = {.kind = media::TransformKind::train}};
  bad.transform.scale_min = 0.9;
  bad.transform.scale_max = 0.5;
  try {
    op(write_decode_task(bad, samples_), {stop.get_token()});
    ADD_FAILURE() << "an impossible crop range was decoded";
  } catch (const transport::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos) << e.what();
  }
  const auto clip_none = write_decode_task(
      {.kind = MediaKind::video, .transform = {.kind = media::TransformKind::none}}, samples_);
  EXPECT_THROW(ops.find(kDecodeClips.name)->operator()(clip_none, {stop.get_token()}),
               transport::RemoteError);
  DecodeSpec no_stride{.kind = MediaKind::video,
                       .transform = {.kind = media::TransformKind::train}};
  no_stride.clip_stride = 0;
  EXPECT_THROW(ops.find(kDecodeClips.name)
                   ->
                   operator()(write_decode_task(no_stride, samples_), {stop.get_token()}),
               transport::RemoteError);
}

TEST_F(RemoteOps, APoisonSampleIsFailedAfterMaxAttemptsAndTheOthersDelivered) {
  // Sample 3 hangs whatever worker reads it (a stuck read): its task passes the
  // deadline every time.
  transport::OperationRegistry truth;
  register_decode_operations(truth);
  auto real = *truth.find(kDecodeImages.name);
  auto poison = samples_[3].path;
  transport::OperationRegistry r;
  r.add(kDecodeImages,
        [real, poison](std::span<const char> task, const transport::OperationContext& c) {
          if (std::string_view(task.data(), task.size()).find(poison) != std::string_view::npos) {
            hang_until_stopped(c);
          }
          return real(task, c);
        });
  transport::WorkerNode worker(worker_options(), std::move(r));
  auto o = pool_options(worker);
  o.task_timeout = 300ms;
  transport::RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  RemoteDecodeFigures figures;
  // No local fallback: while the worker is suspect (its stuck task's thread not yet
  // free) it is not live, and the batch waits for it instead of decoding here.
  auto batch = remote_decode_batch(pool, {}, samples_, {},
                                   {.max_attempts = 2, .local_fallback = false}, {}, &figures);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->ids, (std::vector<std::uint64_t>{0, 1, 2, 4, 5}));
  ASSERT_EQ(batch->failures.size(), 3u);
  EXPECT_EQ(batch->failures[0].id, 3u);
  EXPECT_NE(batch->failures[0].message().find("sample 3 ("), std::string::npos);
  EXPECT_NE(batch->failures[0].message().find("lost on 2 attempts"), std::string::npos);
  EXPECT_NE(batch->failures[0].message().find("deadline"), std::string::npos);
  // The poison sample has its own code, one that no retry takes for transient.
  EXPECT_EQ(batch->failures[0].code, transport::RemoteErrc::lost_on_attempts);
  EXPECT_EQ(error_code_name(batch->failures[0].code), "lost_on_attempts");
  EXPECT_FALSE(actors::is_transient(batch->failures[0].code));
  // Other remote errors: the engine's retry sees the transient ones.
  EXPECT_TRUE(actors::is_transient(
      actors::error_code_of(transport::RemoteError(transport::RemoteErrc::unreachable, "x"))));
  EXPECT_TRUE(actors::is_transient(transport::RemoteErrc::connection_lost));
  EXPECT_FALSE(
      actors::is_transient(actors::error_code_of(transport::RemoteError("a malformed message"))));
  EXPECT_EQ(batch->failures[0].path, samples_[3].path);
  EXPECT_EQ(figures.attempts_lost, 2u);
  EXPECT_EQ(pool.live_workers(), 1u);  // the worker keeps serving
}

// With attempts to spare the samples of a lost batch go again together (one task, not
// one per sample); one by one only for their last attempt: with max_attempts = 3 the
// batch is sent whole twice, then sample by sample, and only the poison fails.
TEST_F(RemoteOps, SamplesWithAttemptsToSpareAreSentAgainAsOneBatch) {
  transport::OperationRegistry truth;
  register_decode_operations(truth);
  auto real = *truth.find(kDecodeImages.name);
  auto poison = samples_[3].path;
  auto sizes = std::make_shared<std::vector<std::size_t>>();
  auto mutex = std::make_shared<std::mutex>();
  transport::OperationRegistry r;
  r.add(kDecodeImages, [real, poison, sizes, mutex](std::span<const char> task,
                                                    const transport::OperationContext& c) {
    {
      std::lock_guard lock(*mutex);
      sizes->push_back(read_decode_task(task, 1024).samples.size());
    }
    if (std::string_view(task.data(), task.size()).find(poison) != std::string_view::npos) {
      hang_until_stopped(c);
    }
    return real(task, c);
  });
  transport::WorkerNode worker(worker_options(), std::move(r));
  auto o = pool_options(worker);
  o.task_timeout = 300ms;
  transport::RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  RemoteDecodeFigures figures;
  auto batch = remote_decode_batch(pool, {}, samples_, {},
                                   {.max_attempts = 3, .local_fallback = false}, {}, &figures);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->ids, (std::vector<std::uint64_t>{0, 1, 2, 4, 5}));
  ASSERT_FALSE(batch->failures.empty());
  EXPECT_EQ(batch->failures[0].id, 3u);
  EXPECT_NE(batch->failures[0].message().find("lost on 3 attempts"), std::string::npos);
  EXPECT_EQ(figures.attempts_lost, 3u);
  std::lock_guard lock(*mutex);
  ASSERT_EQ(sizes->size(), 2 + samples_.size());
  EXPECT_EQ((*sizes)[0], samples_.size());
  EXPECT_EQ((*sizes)[1], samples_.size());
  for (std::size_t i = 2; i < sizes->size(); ++i) EXPECT_EQ((*sizes)[i], 1u) << i;
}

TEST_F(RemoteOps, WithoutWorkersTheBatchIsDecodedHereOrWaits) {
  transport::PoolOptions o;
  o.workers = {{"127.0.0.1", 1}};
  o.security = kSecurity;
  o.operations = {kDecodeImages};
  transport::RemotePool pool(o);
  RemoteDecodeFigures figures;
  auto here = remote_decode_batch(pool, {}, samples_, {}, {.local_fallback = true}, {}, &figures);
  ASSERT_TRUE(here);
  expect_same(*here, local({}));
  EXPECT_EQ(figures.decoded_locally, samples_.size());
  // Without a fallback it waits for a worker until stopped: whether the stop lands
  // before its first call or while it waits, the batch ends without a result (a stop
  // the wait ignored would hang here).
  std::stop_source stop;
  std::thread stopper([&] { stop.request_stop(); });
  auto waited =
      remote_decode_batch(pool, {}, samples_, {}, {.local_fallback = false}, stop.get_token());
  stopper.join();
  EXPECT_FALSE(waited);
}

}  // namespace
}  // namespace brigade::launch
